"""Pages of a list for the API: `{"items": [...], "next": url or null}`.

No total count: one row more than the page is read to know whether another page follows, so a page costs
the same however long the list is. `next` is the same request with the offset moved on (filters kept).
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
MAX_OFFSET = 100_000

M = TypeVar("M", bound=Model)


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
