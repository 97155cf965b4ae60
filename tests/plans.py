"""What PostgreSQL would do with the statements some code runs: for tests that a read goes through indexes
however large its tables grow."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

Statement = tuple[str, Any]  # SQL with its parameters


@contextmanager
def statements_run() -> Iterator[list[Statement]]:
    """Every statement run on the default connection inside the block, as it was sent."""
    statements: list[Statement] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield statements


def whole_reads(statements: list[Statement]) -> list[str]:
    """What the reads among `statements` would read whole: a table (a sequential scan), or an index (walked
    without a condition on its first column, as a condition on its second column alone walks it all).
    Test tables are small, and the planner scans a small table whatever its indexes, so it is planned as if
    large: it may neither scan a table nor walk an index, and a plan that still does has no better way."""
    found = []
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_indexscan", "enable_indexonlyscan"):
            cursor.execute(f"SET LOCAL {setting} = off")
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()  # type: ignore[misc]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            found += [f"{read} in {sql}" for node in _nodes(plan[0]["Plan"]) if (read := _whole(cursor, node))]
        transaction.set_rollback(True)  # the settings end with the block
    return found


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _whole(cursor: CursorWrapper, node: dict[str, Any]) -> str:
    if node["Node Type"] == "Seq Scan":
        return f"the table {node['Relation Name']}"
    index = node.get("Index Name")
    if index is None:
        return ""
    condition = node.get("Index Cond", "")
    cursor.execute(
        "SELECT a.attname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] WHERE c.relname = %s",
        [index],
    )
    (first_column,) = cursor.fetchone()  # type: ignore[misc]  # None for an index on an expression
    if not condition or (first_column and not re.search(rf"\b{re.escape(first_column)}\b", condition)):
        return f"the index {index} ({condition or 'no condition'})"
    return ""
