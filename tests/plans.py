"""What PostgreSQL would do with the statements some code runs: for tests that a read goes through indexes
however large its tables grow."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

Statement = tuple[str, Any]  # SQL with its parameters
# The statements that read rows (a write reads what it joins, updates or deletes), all planned without being
# run. The rest (SAVEPOINT, SET) read none.
PLANNED = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


@contextmanager
def statements_run() -> Iterator[list[Statement]]:
    """Every statement run on the default connection inside the block, as it was sent."""
    statements: list[Statement] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield statements


def whole_reads(statements: list[Statement], *, many: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """What the reads among `statements` would read whole: a table (a sequential scan), or an index (walked
    without a condition on its first column, as a condition on its second column alone walks it all).
    Test tables are small, and the planner scans a small table whatever its indexes, so it is planned as if
    large: it may neither scan a table nor walk an index, and a plan that still does has no better way.

    `many` names, per table, the columns one value of which still holds many rows (a person's tasks, a
    mailbox's ledger). An index read seeks by the leading columns its condition names, up to the first it
    does not name (a condition on a later column only filters what it walks): one that seeks by none but
    these columns reads every row of one person or mailbox, and is reported too."""
    found = []
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_indexscan", "enable_indexonlyscan"):
            cursor.execute(f"SET LOCAL {setting} = off")
        _forget_statistics(cursor)
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(PLANNED):
                continue
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()  # type: ignore[misc]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            found += [
                f"{read} in {sql}" for node in _nodes(plan[0]["Plan"]) if (read := _whole(cursor, node, many or {}))
            ]
        transaction.set_rollback(True)  # the settings end with the block
    return found


def _forget_statistics(cursor: CursorWrapper) -> None:
    """Plan as if no table had been analyzed, for the length of the rolled-back block. Autovacuum analyzes a
    test table whenever it likes, and an analyzed table of three rows makes every index path cost the same
    within the planner's 1% fuzz: which one it kept (a seek, or a walk filtered by a later column) then
    followed autovacuum's timing (failed 2 runs in 3 under xdist). Unanalyzed, a table counts at least ten
    pages of rows, and a walk costs what it walks. Changing pg_class takes a superuser, as the embedded
    server's is; on another server the plans use its statistics as they stand."""
    cursor.execute("SELECT current_setting('is_superuser') = 'on'")
    (superuser,) = cursor.fetchone()  # type: ignore[misc]
    if superuser:
        cursor.execute(
            "UPDATE pg_class SET relpages = 0, reltuples = -1, relallvisible = 0 "
            "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i')"
        )


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _whole(cursor: CursorWrapper, node: dict[str, Any], many: Mapping[str, Collection[str]]) -> str:
    if node["Node Type"] == "Seq Scan":
        return f"the table {node['Relation Name']}"
    index = node.get("Index Name")
    if index is None:
        return ""
    condition = node.get("Index Cond", "")
    if not condition:
        return f"the index {index} (no condition)"
    table, columns = _index_columns(cursor, index)
    sought = _sought(columns, condition)
    if columns[0] is not None and not sought:  # an index on an expression first: its condition is on that
        return f"the index {index} ({condition})"
    if sought and set(sought) <= set(many.get(table, ())):
        return f"all rows of one {', '.join(sought)} through the index {index} ({condition})"
    return ""


def _index_columns(cursor: CursorWrapper, index: str) -> tuple[str, list[str | None]]:
    """The table of `index` and its key columns in order (None for an expression)."""
    cursor.execute(
        "SELECT t.relname, array_agg(a.attname ORDER BY k.n) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "JOIN pg_class t ON t.oid = i.indrelid "
        "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) "
        "LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE c.relname = %s AND k.n <= i.indnkeyatts GROUP BY t.relname",
        [index],
    )
    table, columns = cursor.fetchone()  # type: ignore[misc]
    return table, columns


def _sought(columns: list[str | None], condition: str) -> list[str]:
    """The index's leading columns that its condition names, up to the first it does not: what the read
    seeks by. A column of the read's own table is named bare (another table's, qualified)."""
    text = re.sub(r"'(?:[^']|'')*'", "''", condition)  # no column names from inside constants
    sought = []
    for column in columns:
        if column is None or not re.search(rf"(?<![\w.\"]){re.escape(column)}\b", text):
            break
        sought.append(column)
    return sought
