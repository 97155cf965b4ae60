"""The API's task list past the old caps (the page's 200, the API's 500): every task is reached by following
`next`, each once, in the list's order, with the same statements on every page."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.pagination import MAX_LIMIT
from tasks.models import Task
from tasks.selectors import task_list
from tests.tasks.test_api_v1 import Api
from tests.tasks.test_task_list_paging import add_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user: Any) -> Api:
    return Api(user)


def test_following_next_reaches_every_one_of_620_tasks_once(api: Api) -> None:
    add_tasks(api.user, 600)
    add_tasks(api.user, 20, start=600, status=Task.Status.DONE)

    api.get("/api/tasks", limit=1)  # the token's first use of the day is noted once (last_used_at)
    seen: list[int] = []
    statements: set[int] = set()
    url: str | None = f"/api/tasks?status=all&limit={MAX_LIMIT}"
    while url:
        with CaptureQueriesContext(connection) as queries:
            response = api.client.get(url)
        assert response.status_code == 200, response.content
        statements.add(len(queries))
        page = response.json()
        seen += [t["id"] for t in page["items"]]
        url = page["next"]

    assert seen == list(task_list(user=api.user, status=None).values_list("pk", flat=True))
    assert len(seen) == 620
    assert len(statements) == 1  # the last page costs what the first does


def test_the_default_page_is_fifty_and_says_where_the_next_is(api: Api) -> None:
    add_tasks(api.user, 501)
    page = api.get("/api/tasks", offset=500).json()
    assert len(page["items"]) == 1 and page["next"] is None
    first = api.get("/api/tasks").json()
    assert len(first["items"]) == 50 and "offset=50" in first["next"]
