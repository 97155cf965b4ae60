"""Pages of a list, three ways, none of which counts the whole list.

- The API: `{"items": [...], "next": url or null}` by limit and offset (`page_of`). One row more than the
  page is read to know whether another page follows, so a page costs the same however long the list is.
  `next` is the same request with the offset moved on (filters kept).
- The task page's "Load more": keyset pages (`Keyset`). The next page starts after the last row shown, by
  its values in the list's order, so a task added or closed meanwhile neither repeats a row nor skips one.
- The admin's changelists: `EstimatedCountPaginator`, whose count stops at a bound and estimates beyond it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import F, Model, OrderBy, Q, QuerySet
from django.db.models import Field as ModelField
from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

from config.errors import ApplicationError

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
MAX_OFFSET = 100_000

M = TypeVar("M", bound=Model)


# The API: limit and offset --------------------------------------------------------------------------------


class PageParams(Schema):
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="How many items a page holds.")
    offset: int = Field(0, ge=0, le=MAX_OFFSET, description="How many items to skip; follow `next` instead.")


def page_of(request: HttpRequest, queryset: QuerySet[M], params: PageParams) -> dict[str, Any]:
    rows = list(queryset[params.offset : params.offset + params.limit + 1])
    has_more = len(rows) > params.limit and params.offset + params.limit <= MAX_OFFSET
    next_url = None
    if has_more:
        query = request.GET.copy()
        query["offset"] = str(params.offset + params.limit)
        query["limit"] = str(params.limit)
        next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    return {"items": rows[: params.limit], "next": next_url}


# Keyset pages ----------------------------------------------------------------------------------------------


class InvalidCursor(ApplicationError):
    def __init__(self) -> None:
        super().__init__("This link to more of the list is not valid. Open the list again.", code="invalid_cursor")


@dataclass(frozen=True)
class SortKey:
    """One column of a list's order. A nullable column sorts its nulls last, whichever the direction."""

    field: str
    descending: bool = False
    nullable: bool = False

    def order_by(self) -> OrderBy:
        # NULLS LAST only where nulls can be: an index on "created_at DESC" serves "created_at DESC" and
        # not "created_at DESC NULLS LAST" (PostgreSQL's DESC puts nulls first).
        column = F(self.field)
        if self.descending:
            return column.desc(nulls_last=True) if self.nullable else column.desc()
        return column.asc(nulls_last=True) if self.nullable else column.asc()

    def after(self, value: Any) -> Q:
        """Rows past `value` in this column's order (nothing is past a null: nulls come last)."""
        if value is None:
            return Q(pk__in=[])
        past = Q(**{f"{self.field}__{'lt' if self.descending else 'gt'}": value})
        return past | Q(**{f"{self.field}__isnull": True}) if self.nullable else past

    def equal(self, value: Any) -> Q:
        return Q(**{f"{self.field}__isnull": True}) if value is None else Q(**{self.field: value})


@dataclass(frozen=True)
class Keyset(Generic[M]):
    """A list's order, and its pages by the values of a row (a cursor) rather than by a position.

    The last key must be unique (the primary key), so every row has its own place. A page is read in the
    order of an index that matches `keys` after the list's equality filters, and stops at the page's end:
    no sort and no count, however long the list.
    """

    model: type[M]
    keys: tuple[SortKey, ...]

    def __post_init__(self) -> None:
        if not self.keys or self.keys[-1].field not in ("id", "pk") or self.keys[-1].nullable:
            raise ValueError("a keyset order ends with the primary key, so that every row has a place of its own")

    def order_by(self) -> list[OrderBy]:
        return [key.order_by() for key in self.keys]

    def _field(self, key: SortKey) -> ModelField[Any, Any]:
        field = self.model._meta.get_field(key.field)
        if not isinstance(field, ModelField):
            raise TypeError(f"{key.field} is not a column of {self.model.__name__}")
        return field

    def cursor(self, row: M) -> str:
        """An opaque, URL-safe token of `row`'s place in the order."""
        raw = [None if getattr(row, key.field) is None else self._field(key).value_to_string(row) for key in self.keys]
        return base64.urlsafe_b64encode(json.dumps(raw, separators=(",", ":")).encode()).decode().rstrip("=")

    def values(self, token: str) -> list[Any]:
        """The values a token stands for, each checked against its field; `InvalidCursor` when it is not one."""
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, binascii.Error):
            raise InvalidCursor() from None
        if not isinstance(raw, list) or len(raw) != len(self.keys):
            raise InvalidCursor()
        values = []
        for key, value in zip(self.keys, raw, strict=True):
            if (value is None and not key.nullable) or not isinstance(value, str | int | None):
                raise InvalidCursor()
            try:
                values.append(None if value is None else self._field(key).to_python(value))
            except ValidationError:
                raise InvalidCursor() from None
        return values

    def after(self, token: str) -> Q:
        """The rows after the cursor's row: past it in the first key, or equal there and past it in the next…"""
        return self._after(self.values(token))

    def after_ranges(self, token: str) -> list[Q]:
        """The rows after the cursor's row as (at most two) conditions, each the rows of one index range, in
        the list's order. `after` alone is an OR that an index scan can only filter by: a page far down the
        list would read every row before it. Here the first condition adds the bound the index can seek to
        (the first key with a value, past or equal, after the keys before it that are null); the second,
        for a nullable key, is its nulls, which come last and so are all after the cursor."""
        values = self.values(token)
        nulls = Q()
        for key, value in zip(self.keys, values, strict=True):
            if value is None:
                nulls &= Q(**{f"{key.field}__isnull": True})
                continue
            bound = nulls & Q(**{f"{key.field}__{'lte' if key.descending else 'gte'}": value})
            ranges = [self._after(values) & bound]
            if key.nullable:
                ranges.append(nulls & Q(**{f"{key.field}__isnull": True}))
            return ranges
        return [Q(pk__in=[])]  # unreachable: the last key, the primary key, is never null

    def _after(self, values: list[Any]) -> Q:
        condition = Q(pk__in=[])
        equal_so_far = Q()
        for key, value in zip(self.keys, values, strict=True):
            condition |= equal_so_far & key.after(value)
            equal_so_far &= key.equal(value)
        return condition

    def up_to(self, token: str) -> Q:
        """The rows up to the cursor's row, itself included: the list as far as it was shown."""
        return ~self._after(self.values(token))


@dataclass(frozen=True)
class KeysetPage(Generic[M]):
    rows: list[M]
    next: str | None  # the cursor to pass as `after` for the next page, or None on the last one
    last: str | None  # the cursor of the last row shown (None when there is none)


def keyset_page(
    queryset: QuerySet[M], keyset: Keyset[M], *, size: int, after: str = "", up_to: str = "", up_to_limit: int = 0
) -> KeysetPage[M]:
    """A page of `queryset` in `keyset`'s order: `size` rows after the cursor `after`, or the first `size`.
    One or two statements, whatever the page's place in the list.

    With `up_to` (a list that showed several pages, shown again): every row as far as that cursor, at most
    `up_to_limit`, when that is more than a page; else the first page. One row more than the page is read
    to know whether another follows (after rows up to a cursor, one more statement asks)."""
    ordered = queryset.order_by(*keyset.order_by())
    if up_to:
        shown = list(ordered.filter(keyset.up_to(up_to))[: up_to_limit + 1])
        if len(shown) > size:
            end = keyset.cursor(shown[:up_to_limit][-1])
            more = len(shown) > up_to_limit or ordered.filter(keyset.after(end)).exists()
            return KeysetPage(rows=shown[:up_to_limit], next=end if more else None, last=end)
    rows: list[M] = []
    for condition in keyset.after_ranges(after) if after else [Q()]:
        rows += ordered.filter(condition)[: size + 1 - len(rows)]
        if len(rows) > size:
            break
    last = keyset.cursor(rows[min(len(rows), size) - 1]) if rows else None
    return KeysetPage(rows=rows[:size], next=last if len(rows) > size else None, last=last)


# The admin: a count that stops ------------------------------------------------------------------------------


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]
    """Django admin's paginator without a count of the whole table.

    The rows are counted exactly up to `EXACT_UP_TO`; beyond that the count is PostgreSQL's estimate (the
    planner's, from the table's statistics), so a changelist of 100,000 rows costs what one of 10,000
    does. The admin then shows "about" as many rows as there are, and its last page links may land short
    of (or past) the real end: acceptable for an operator's list, which is searched and filtered anyway.
    """

    EXACT_UP_TO = 10_000

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        bounded = queryset.order_by()[: self.EXACT_UP_TO + 1].count()  # SELECT COUNT(*) FROM (… LIMIT n)
        if bounded <= self.EXACT_UP_TO:
            return bounded
        return max(bounded, planner_estimate(queryset))


def planner_estimate(queryset: QuerySet[Any]) -> int:
    """How many rows PostgreSQL expects `queryset` to return (EXPLAIN, which runs nothing)."""
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
