"""Mail received before its mailbox was connected, and already past due then, does not open a first day on
"Overdue 5": its tasks stand under one collapsed "From before you connected" heading, once (issue 23 point 8)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from integrations.models import Integration
from tasks.models import Task
from tasks.services import task_create
from tests.factories import IntegrationFactory
from tests.tasks.test_task_pages import HTMX, email_task, groups

pytestmark = pytest.mark.django_db

EARLIER = "From before you connected"


@pytest.fixture
def person(client: Client, user: User) -> User:
    client.force_login(user)
    return user


def connected_days_ago(integration: Integration, days: int) -> None:
    Integration.objects.filter(pk=integration.pk).update(created_at=timezone.now() - timedelta(days=days))


def earlier_section(body: str) -> str:
    """The group, up to the next group's heading (its tasks hold disclosures of their own: history, snooze)."""
    start = body.index('<li class="group-heading earlier"')
    following = re.compile(r'<li class="group-heading(?! earlier)').search(body, start)
    return body[start : following.start() if following else len(body)]


def titles(html: str) -> list[str]:
    return re.findall(r'<strong class="task-title"[^>]*>([^<]*)</strong>', html)


def test_overdue_mail_from_before_connecting_is_under_one_collapsed_heading(client: Client, person: User) -> None:
    today = timezone.localdate()
    gmail = IntegrationFactory(user=person, provider="gmail")
    outlook = IntegrationFactory(user=person, provider="outlook")
    connected_days_ago(gmail, 1)
    week_ago = timezone.now() - timedelta(days=7)
    email_task(person, gmail, "g1", "Old ask in Gmail", email_received_at=week_ago, due_date=today - timedelta(days=3))
    email_task(person, outlook, "o1", "Old ask in Outlook", email_received_at=week_ago, due_date=today - timedelta(5))
    # Old mail not yet due when the mailbox was connected: it is due in the ordinary way.
    email_task(person, gmail, "g2", "Old but due later", email_received_at=week_ago, due_date=today)
    # Mail since connecting that is overdue now, and a task added by hand: Overdue, as ever.
    email_task(person, gmail, "g3", "New and late", email_received_at=timezone.now(), due_date=today - timedelta(1))
    task_create(user=person, title="By hand and late", due_date=today - timedelta(days=2))
    # A mailbox connected long before its late mail came.
    older = IntegrationFactory(user=person, provider="gmail")
    connected_days_ago(older, 30)
    email_task(person, older, "x1", "Late in an old mailbox", email_received_at=week_ago, due_date=today - timedelta(4))

    body = client.get("/").content.decode()

    section = earlier_section(body)
    assert body.count(EARLIER) == 1  # one heading for every mailbox
    assert "<details" in section and " open" not in section.split(">", 2)[1]  # collapsed
    assert re.search(rf"{EARLIER}\s*<span class=\"count\">2</span>", section)
    assert titles(section) == []  # collapsed, its count alone: its rows come when it is opened
    rows_url = re.search(r'<details class="earlier-group" hx-get="([^"]+)" hx-trigger="toggle once"', section)
    assert rows_url is not None
    rows = client.get(rows_url[1].replace("&amp;", "&"), headers=HTMX)
    assert rows.status_code == 200
    assert titles(rows.content.decode()) == ["Old ask in Outlook", "Old ask in Gmail"]
    shown = groups(body.replace(section, ""))
    assert shown == {
        "overdue": ["Late in an old mailbox", "By hand and late", "New and late"],
        "today": ["Old but due later"],
    }
    assert re.search(r'data-group="overdue"><h2>Overdue <span class="count">3</span>', body)

    # A search opens it, with its rows, so that what is searched for shows.
    searched = earlier_section(client.get("/?q=Old+ask").content.decode())
    assert '<details class="earlier-group" open>' in searched
    assert titles(searched) == ["Old ask in Outlook", "Old ask in Gmail"]

    # The list's own refresh (after a change) shows it the same way: collapsed, or open with its rows when it
    # was open (the refresh then says `earlier=open`). The API lists every task as it is.
    refreshed = client.get("/tasks/list", headers=HTMX).content.decode()
    assert refreshed.count(EARLIER) == 1 and titles(earlier_section(refreshed)) == []
    kept_open = earlier_section(client.get("/tasks/list?earlier=open", headers=HTMX).content.decode())
    assert '<details class="earlier-group" open>' in kept_open
    assert titles(kept_open) == ["Old ask in Outlook", "Old ask in Gmail"]
    listed = {item["title"] for item in client.get("/api/tasks").json()["items"]}
    assert {"Old ask in Gmail", "Old ask in Outlook"} <= listed


def test_the_heading_is_not_repeated_on_the_next_page_and_leaves_with_its_last_task(
    client: Client, person: User
) -> None:
    today = timezone.localdate()
    gmail = IntegrationFactory(user=person)
    connected_days_ago(gmail, 1)
    week_ago = timezone.now() - timedelta(days=7)
    old = email_task(person, gmail, "g1", "Old ask", email_received_at=week_ago, due_date=today - timedelta(days=3))
    for n in range(55):  # more than a page of tasks due in the ordinary way
        task_create(user=person, title=f"Task {n}", due_date=today + timedelta(days=n))
    body = client.get("/").content.decode()
    assert body.count(EARLIER) == 1
    more = re.search(r'id="load-more-button" hx-get="([^"]+)"', body)
    assert more is not None
    page_two = client.get(more[1].replace("&amp;", "&"), headers=HTMX).content.decode()
    assert "Task 54" in page_two and EARLIER not in page_two

    old.status = Task.Status.DONE
    old.save(update_fields=["status"])
    assert EARLIER not in client.get("/").content.decode()


def test_the_collapsed_group_costs_its_count_whatever_its_size(client: Client, person: User) -> None:
    """The first page reads the same statements with one task from before the connect as with forty (its rows
    come when it is opened), and stays within issue 33's fifteen."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    today = timezone.localdate()
    gmail = IntegrationFactory(user=person)
    connected_days_ago(gmail, 1)
    week_ago = timezone.now() - timedelta(days=7)

    def first_page_statements(old: int) -> int:
        for n in range(Task.objects.filter(user=person).count(), old):
            late = today - timedelta(days=3)
            email_task(person, gmail, f"g{n}", f"Old ask {n}", email_received_at=week_ago, due_date=late)
        client.get("/")
        with CaptureQueriesContext(connection) as statements:
            body = client.get("/").content.decode()
        assert re.search(rf"{EARLIER}\s*<span class=\"count\">{old}</span>", body)
        assert titles(earlier_section(body)) == []
        return len([q for q in statements.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))])

    assert first_page_statements(1) == first_page_statements(40) <= 15


def test_the_rows_fetched_after_the_last_one_left_say_so(client: Client, person: User) -> None:
    gmail = IntegrationFactory(user=person)
    connected_days_ago(gmail, 1)
    body = client.get("/tasks/earlier", headers=HTMX)
    assert body.status_code == 200 and "None left" in body.content.decode()
