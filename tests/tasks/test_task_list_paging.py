"""The task list a page at a time: "Load more" appends the next page (keyset, in the list's order), keeps
the search and filters, never repeats or skips a task when the list changes between pages, and a page
costs the same number of statements however many tasks a person has."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from tasks.models import Task, TaskLink
from tasks.selectors import task_list
from tasks.views import PAGE_SIZE
from tests.factories import IntegrationFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def add_tasks(user: User, count: int, *, start: int = 0, **fields: object) -> list[Task]:
    """`count` tasks found in email; every fourth without a due date, the others due over two weeks (so
    several share a date and the order's later keys decide), received a minute apart."""
    today = timezone.localdate()
    now = timezone.now()
    return Task.objects.bulk_create(
        [
            Task(
                **{
                    "user": user,
                    "source": Task.Source.EMAIL_AI,
                    "source_id": f"m{n}",
                    "title": f"Task {n}",
                    "title_key": f"task {n}",
                    "due_date": None if n % 4 == 0 else today + timedelta(days=(n % 15) - 5),
                    "email_received_at": now - timedelta(minutes=n),
                    **fields,
                }
            )
            for n in range(start, start + count)
        ]
    )


def ids(body: str) -> list[int]:
    return [int(i) for i in re.findall(r'<li class="task[^"]*" id="task-(\d+)"', body)]


def more_url(body: str) -> str | None:
    """The URL "Load more" fetches with htmx (None when the list has no more)."""
    found = re.search(r'id="load-more-button" hx-get="([^"]+)"', body)
    return html.unescape(found[1]) if found else None


def headings(body: str) -> list[tuple[str, int]]:
    return [(g, int(n)) for g, n in re.findall(r'data-group="([a-z_]+)"><h2>[^<]*<span class="count">(\d+)', body)]


def load_everything(client: Client, first: str, params: dict[str, str] | None = None) -> tuple[list[int], int]:
    """Follow "Load more" from the first page to the end: every task id shown, and how many pages."""
    body = client.get(first, params or {}).content.decode()
    shown, pages = ids(body), 1
    while (url := more_url(body)) is not None:
        body = client.get(url, headers=HTMX).content.decode()
        assert 'id="task-list"' not in body  # only rows, appended in the place of "Load more"
        shown += ids(body)
        pages += 1
    return shown, pages


@pytest.fixture
def person(client: Client, user: User) -> User:
    client.force_login(user)
    return user


def test_load_more_shows_every_open_task_once_in_the_lists_order(client: Client, person: User) -> None:
    add_tasks(person, 2 * PAGE_SIZE + 20)
    Task.objects.filter(user=person, title="Task 7").update(status=Task.Status.DONE)

    shown, pages = load_everything(client, "/")

    assert pages == 3
    assert shown == list(task_list(user=person).values_list("pk", flat=True))
    assert len(shown) == 2 * PAGE_SIZE + 19  # the done one is on its own tab


def test_headings_come_once_with_the_count_of_every_page(client: Client, person: User) -> None:
    today = timezone.localdate()
    add_tasks(person, PAGE_SIZE + 10, due_date=today - timedelta(days=2))  # overdue, more than a page
    add_tasks(person, 5, start=1000, due_date=None)

    first = client.get("/").content.decode()
    assert headings(first) == [("overdue", PAGE_SIZE + 10)]  # of all of them, not of this page
    second = client.get(more_url(first), headers=HTMX).content.decode()  # type: ignore[arg-type]
    assert headings(second) == [("no_date", 5)]  # "Overdue" goes on without a second heading
    assert len(ids(second)) == 15


def test_the_done_tab_pages_by_when_tasks_were_closed(client: Client, person: User) -> None:
    add_tasks(person, PAGE_SIZE + 3, status=Task.Status.DONE)

    shown, pages = load_everything(client, "/", {"status": "done"})

    assert pages == 2
    assert shown == list(task_list(user=person, status="done").values_list("pk", flat=True))
    assert headings(client.get("/", {"status": "done"}).content.decode()) == [("done", PAGE_SIZE + 3)]


def test_load_more_keeps_the_search_and_the_filters(client: Client, person: User) -> None:
    gmail, outlook = IntegrationFactory(user=person), IntegrationFactory(user=person, provider="outlook")
    tasks = add_tasks(person, 8 * PAGE_SIZE)
    TaskLink.objects.bulk_create(
        [TaskLink(task=t, integration=gmail if t.pk % 2 else outlook, message_id=t.source_id) for t in tasks]
    )
    wanted = [t.pk for t in tasks if t.pk % 2 and "1" in t.title]

    shown, _ = load_everything(client, "/", {"q": "1", "mailbox": str(gmail.pk)})

    assert sorted(shown) == sorted(wanted)
    url = more_url(client.get("/", {"q": "1", "mailbox": str(gmail.pk)}).content.decode())
    assert url is not None and "q=1" in url and f"mailbox={gmail.pk}" in url


def test_a_task_added_or_closed_between_pages_neither_repeats_nor_skips_one(client: Client, person: User) -> None:
    add_tasks(person, 2 * PAGE_SIZE)
    before = list(task_list(user=person).values_list("pk", flat=True))
    first = client.get("/").content.decode()

    # Meanwhile: a new task at the top, and one of the first page done.
    add_tasks(person, 1, start=5000, due_date=timezone.localdate() - timedelta(days=30))
    Task.objects.filter(pk=before[3]).update(status=Task.Status.DONE)
    second = client.get(more_url(first), headers=HTMX).content.decode()  # type: ignore[arg-type]

    assert ids(first) + ids(second) == before  # exactly the rest, from where the first page ended


def test_a_refresh_shows_again_as_many_tasks_as_were_loaded(client: Client, person: User) -> None:
    add_tasks(person, 3 * PAGE_SIZE)
    first = client.get("/").content.decode()
    second = client.get(more_url(first), headers=HTMX).content.decode()  # type: ignore[arg-type]
    upto = re.search(r'<input type="hidden" name="upto" value="([^"]+)" data-task-list-upto hx-swap-oob', second)
    assert upto is not None  # the list's refresh includes it (hx-include)

    Task.objects.filter(pk=ids(first)[0]).update(status=Task.Status.DONE)  # the bulk action refreshes the list
    refreshed = client.get("/tasks/list", {"upto": upto[1]}, headers=HTMX).content.decode()

    assert ids(refreshed) == (ids(first) + ids(second))[1:]
    assert more_url(refreshed) is not None  # the third page is still to come
    assert ids(client.get("/tasks/list", headers=HTMX).content.decode()) == [*ids(first)[1:], ids(second)[0]]


def test_a_first_page_and_a_later_one_cost_the_same_statements_for_120_or_1200_tasks(
    client: Client, person: User
) -> None:
    def statements() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as first_page:
            body = client.get("/").content.decode()
        with CaptureQueriesContext(connection) as later_page:
            client.get(more_url(body), headers=HTMX)  # type: ignore[arg-type]
        return len(first_page), len(later_page)

    add_tasks(person, 120, due_date=None)
    few = statements()
    add_tasks(person, 1080, start=120, due_date=None)
    assert statements() == few


def test_a_bad_cursor_is_refused_plainly(client: Client, person: User) -> None:
    add_tasks(person, 3)
    for bad in ("nonsense", "WyJ4Il0", "W251bGwsbnVsbCxudWxsLDFd"):  # not base64 JSON; one value; a null creation
        response = client.get("/tasks/list", {"after": bad}, headers=HTMX)
        assert response.status_code == 400
        assert "not valid" in response.content.decode()
    page = client.get("/", {"after": "nonsense"}).content.decode()  # without JavaScript: the first page
    assert "not valid" in page and len(ids(page)) == 3


def test_load_more_works_without_javascript(client: Client, person: User) -> None:
    add_tasks(person, PAGE_SIZE + 5)
    first = client.get("/").content.decode()
    link = re.search(r'<a href="([^"]+)" class="button secondary" id="load-more-button"', first)
    assert link is not None

    second = client.get(html.unescape(link[1])).content.decode()  # a page of its own

    assert len(ids(second)) == 5 and not set(ids(second)) & set(ids(first))
    assert 'id="first-page"' in second
