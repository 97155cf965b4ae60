"""Keyset pages (config/pagination.py) against the list's own order: from every row, the next page is the
next rows, with nulls, ties and the primary key deciding; and the admin's count that stops counting."""

from __future__ import annotations

import itertools
from datetime import date, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from config.pagination import EstimatedCountPaginator, keyset_page
from tasks.models import Task
from tasks.selectors import CLOSED_ORDER, OPEN_ORDER

pytestmark = pytest.mark.django_db

MONDAY = datetime(2026, 3, 2, 9, 0).astimezone()


@pytest.fixture
def mixed(user: User) -> list[Task]:
    """Tasks with every mix the open order meets: due dates shared or missing, received times shared or
    missing (tasks added by hand), creation times shared (so the id decides)."""
    dues = [None, date(2026, 3, 1), date(2026, 3, 3)]
    received = [None, MONDAY, MONDAY - timedelta(hours=1)]
    created = [MONDAY, MONDAY + timedelta(seconds=1)]
    mixes = list(itertools.product(dues, received, created, range(2)))
    tasks = Task.objects.bulk_create(
        Task(user=user, source="manual", source_id=f"t{n}", title=f"T{n}", title_key=f"t{n}", due_date=due,
             email_received_at=got)
        for n, (due, got, _, _) in enumerate(mixes)
    )  # fmt: skip
    for task, (_, _, made, _) in zip(tasks, mixes, strict=True):  # auto_now would make every one different
        Task.objects.filter(pk=task.pk).update(created_at=made, updated_at=made)
    return tasks


def test_from_every_row_the_next_page_is_the_next_rows_in_order(user: User, mixed: list[Task]) -> None:
    for keyset in (OPEN_ORDER, CLOSED_ORDER):
        everything = list(Task.objects.filter(user=user).order_by(*keyset.order_by()))
        for n, row in enumerate(everything):
            page = keyset_page(Task.objects.filter(user=user), keyset, size=4, after=keyset.cursor(row))
            assert page.rows == everything[n + 1 : n + 5], (keyset, n)
            assert (page.next is None) == (n + 5 >= len(everything))


def test_up_to_a_row_is_every_row_as_far_as_it(user: User, mixed: list[Task]) -> None:
    everything = list(Task.objects.filter(user=user).order_by(*OPEN_ORDER.order_by()))
    for n, row in enumerate(everything):
        shown = list(Task.objects.filter(user=user).filter(OPEN_ORDER.up_to(OPEN_ORDER.cursor(row))))
        assert sorted(t.pk for t in shown) == sorted(t.pk for t in everything[: n + 1]), n


def test_the_admin_count_is_exact_up_to_its_bound_then_an_estimate(user: User, monkeypatch) -> None:
    LogEntry.objects.bulk_create(
        [LogEntry(user=user, action_flag=1, object_repr=f"e{n}", change_message="") for n in range(30)]
    )
    small = EstimatedCountPaginator(LogEntry.objects.order_by("pk"), 10)
    assert small.count == 30

    monkeypatch.setattr(EstimatedCountPaginator, "EXACT_UP_TO", 20)
    bounded = EstimatedCountPaginator(LogEntry.objects.order_by("pk"), 10)
    with CaptureQueriesContext(connection) as queries:
        estimate = bounded.count
    assert estimate >= 21  # never fewer than it counted
    assert "LIMIT 21" in queries[0]["sql"]  # the count stopped at the bound
    assert queries[1]["sql"].startswith("EXPLAIN")
