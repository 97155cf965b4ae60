"""The task list as a person uses it: grouping by due date in their time zone, edits in place, done and
dismiss with undo, bulk, search and filters, a badge per mailbox, and the live-update endpoint."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration
from tasks.models import Task, TaskLink
from tasks.services import task_create, task_insert_from_emails
from tests.factories import IntegrationFactory, UserFactory, email_task_row

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def email_task(user: User, integration: Integration, message_id: str, title: str, **fields: object) -> Task:
    row = email_task_row(user, integration, message_id, title)
    task_insert_from_emails(rows=[row])
    task = Task.objects.get(user=user, source_id=message_id, title=title)
    if fields:
        Task.objects.filter(pk=task.pk).update(**fields)
        task.refresh_from_db()
    return task


def titles(body: str) -> list[str]:
    return re.findall(r'<strong class="task-title"[^>]*>([^<]*)</strong>', body)


def groups(body: str) -> dict[str, list[str]]:
    """The list's groups in order, each with its task titles."""
    found: dict[str, list[str]] = {}
    current = ""
    for match in re.finditer(r'data-group="([a-z_]+)"|<strong class="task-title"[^>]*>([^<]*)</strong>', body):
        if match[1]:
            current = match[1]
            found[current] = []
        else:
            found[current].append(match[2])
    return found


@pytest.fixture
def person(client: Client, user: User) -> User:
    client.force_login(user)
    return user


# Grouping and order ---------------------------------------------------------------------------------


def test_open_tasks_are_grouped_overdue_today_upcoming_then_no_date(client: Client, person: User) -> None:
    today = timezone.localdate()
    box = IntegrationFactory(user=person)
    task_create(user=person, title="Later", due_date=today + timedelta(days=3))
    task_create(user=person, title="Soon", due_date=today + timedelta(days=1))
    task_create(user=person, title="Now", due_date=today)
    task_create(user=person, title="Late", due_date=today - timedelta(days=2))
    email_task(person, box, "old", "Older email", email_received_at=timezone.now() - timedelta(days=2))
    email_task(person, box, "new", "Newer email", email_received_at=timezone.now() - timedelta(hours=1))

    body = client.get("/").content.decode()

    assert groups(body) == {
        "overdue": ["Late"],
        "today": ["Now"],
        "upcoming": ["Soon", "Later"],
        "no_date": ["Newer email", "Older email"],  # by the email's received time, newest first
    }


def test_today_is_today_in_the_persons_time_zone(client: Client, person: User, monkeypatch: pytest.MonkeyPatch) -> None:
    # 12:00 UTC is already the next day (00:00 or 01:00) in Auckland.
    noon_utc = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    monkeypatch.setattr(timezone, "now", lambda: noon_utc)
    utc_today = noon_utc.date()
    auckland_today = noon_utc.astimezone(ZoneInfo("Pacific/Auckland")).date()
    assert auckland_today == utc_today + timedelta(days=1)
    task_create(user=person, title="Due on the UTC day", due_date=utc_today)
    task_create(user=person, title="Due on the Auckland day", due_date=auckland_today)

    assert groups(client.get("/tasks/list").content.decode()) == {
        "today": ["Due on the UTC day"],
        "upcoming": ["Due on the Auckland day"],
    }

    person.timezone = "Pacific/Auckland"
    person.save(update_fields=["timezone"])
    assert groups(client.get("/tasks/list").content.decode()) == {
        "overdue": ["Due on the UTC day"],
        "today": ["Due on the Auckland day"],
    }


def test_priority_badge_only_when_not_the_default(client: Client, person: User) -> None:
    for priority in ("", "low", "medium", "high"):
        task_create(user=person, title=f"P-{priority or 'none'}", priority=priority)
    body = client.get("/").content.decode()
    assert sorted(re.findall(r'data-priority="(\w+)"', body)) == ["high", "low"]
    assert "Medium priority" not in body


def test_dates_show_the_year_only_when_it_is_not_this_year(client: Client, person: User) -> None:
    this_year = timezone.localdate().replace(month=6, day=15)
    next_year = this_year.replace(year=this_year.year + 1)
    task_create(user=person, title="This year", due_date=this_year)
    task_create(user=person, title="Next year", due_date=next_year)
    body = client.get("/").content.decode()
    assert f"{this_year:%a} 15 Jun<" in body
    assert f"{next_year:%a} 15 Jun {next_year.year}<" in body


def test_a_task_shows_a_badge_per_mailbox_linking_to_the_email_there(client: Client, person: User) -> None:
    gmail = IntegrationFactory(user=person, provider="gmail")
    outlook = IntegrationFactory(user=person, provider="outlook")
    task = email_task(person, gmail, "m1", "Reply to Ann")
    TaskLink.objects.create(
        task=task, integration=outlook, message_id="AAMk1", web_link="https://outlook.office.com/mail/id/AAMk1"
    )

    body = client.get("/").content.decode()

    links = re.findall(r'<a class="badge mailbox-link[^"]*" href="([^"]+)"[^>]*data-provider="(\w+)"', body)
    assert links == [
        ("https://mail.google.com/mail/u/0/#all/m1", "gmail"),
        ("https://outlook.office.com/mail/id/AAMk1", "outlook"),
    ]


# Editing in place ---------------------------------------------------------------------------------


def test_edit_in_place_changes_title_notes_due_date_and_priority(client: Client, person: User) -> None:
    task = task_create(user=person, title="Call the plumber")
    form = client.get(f"/tasks/{task.pk}/edit", headers=HTMX).content.decode()
    assert 'class="task-edit"' in form and 'value="Call the plumber"' in form

    due = timezone.localdate() + timedelta(days=2)
    response = client.post(
        f"/tasks/{task.pk}/edit",
        {
            "title": "Call the plumber back",
            "notes": "Ask about\nthe boiler",
            "due_date": due.isoformat(),
            "priority": "high",
        },
        headers=HTMX,
    )

    assert response.status_code == 200
    assert response["HX-Trigger-After-Settle"] == "tasksChanged"
    row = response.content.decode()
    assert f'id="task-{task.pk}"' in row and "Call the plumber back" in row
    assert "Ask about\nthe boiler</span>" in row  # notes are shown, on the row's one line
    task.refresh_from_db()
    assert (task.title, task.notes, task.due_date, task.priority) == (
        "Call the plumber back", "Ask about\nthe boiler", due, "high"
    )  # fmt: skip


def test_a_due_date_outside_the_sane_range_is_refused_on_the_form(client: Client, person: User) -> None:
    task = task_create(user=person, title="Pay the bill")
    response = client.post(
        f"/tasks/{task.pk}/edit", {"title": "Pay the bill", "due_date": "1900-01-01", "priority": ""}, headers=HTMX
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-field="due_date"' in body
    assert "A due date must be between 2000 and 10 years from now." in body
    task.refresh_from_db()
    assert task.due_date is None

    added = client.post("/tasks/add", {"title": "Far away", "due_date": "2999-01-01"})
    assert added.status_code == 400
    assert "A due date must be between 2000 and 10 years from now." in added.content.decode()
    assert not Task.objects.filter(title="Far away").exists()


def test_edit_without_javascript_is_a_page_of_its_own(client: Client, person: User) -> None:
    task = task_create(user=person, title="Plain")
    assert "<title>Edit task" in client.get(f"/tasks/{task.pk}/edit").content.decode()
    response = client.post(f"/tasks/{task.pk}/edit", {"title": "Plainer", "notes": "", "due_date": "", "priority": ""})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.title == "Plainer"


def test_cancel_puts_the_row_back(client: Client, person: User) -> None:
    task = task_create(user=person, title="Unchanged")
    row = client.get(f"/tasks/{task.pk}", headers=HTMX).content.decode()
    assert f'data-task-id="{task.pk}"' in row and "Unchanged" in row


def test_another_persons_task_cannot_be_edited(client: Client, person: User) -> None:
    task = task_create(user=UserFactory(), title="Not yours")
    assert client.post(f"/tasks/{task.pk}/edit", {"title": "Mine now"}, headers=HTMX).status_code == 404
    task.refresh_from_db()
    assert task.title == "Not yours"


# Done, dismiss, undo, reopen ----------------------------------------------------------------------


def test_done_shows_an_undo_that_brings_the_task_back(client: Client, person: User) -> None:
    task = task_create(user=person, title="Send the report")

    response = client.post(f"/tasks/{task.pk}/status", {"status": "done"}, headers=HTMX)

    body = response.content.decode()
    assert 'id="undo"' in body and 'hx-swap-oob="true"' in body
    assert "“Send the report” marked done." in body
    assert 'id="undo-button"' in body and 'value="open"' in body
    assert "Send the report" not in client.get("/tasks/list").content.decode()

    undone = client.post("/tasks/bulk", {"task_ids": [task.pk], "status": "open", "undo": "1"}, headers=HTMX)

    assert undone["HX-Trigger"] == "tasksChanged"
    assert "Undone." in undone.content.decode()
    task.refresh_from_db()
    assert task.status == Task.Status.OPEN and task.completed_at is None
    assert "Send the report" in client.get("/tasks/list").content.decode()


def test_undo_works_without_javascript_too(client: Client, person: User) -> None:
    task = task_create(user=person, title="Water the plants")
    response = client.post(f"/tasks/{task.pk}/status", {"status": "dismissed"}, follow=True)
    body = response.content.decode()
    assert "“Water the plants” dismissed." in body and 'id="undo-button"' in body
    assert "“Water the plants” dismissed." not in client.get("/").content.decode()  # shown once


def test_done_and_dismissed_views_list_closed_tasks_that_can_be_reopened(client: Client, person: User) -> None:
    done = task_create(user=person, title="Finished thing")
    dismissed = task_create(user=person, title="Ignored thing")
    task_create(user=person, title="Open thing")
    client.post(f"/tasks/{done.pk}/status", {"status": "done"}, headers=HTMX)
    client.post(f"/tasks/{dismissed.pk}/status", {"status": "dismissed"}, headers=HTMX)

    assert titles(client.get("/?status=done").content.decode()) == ["Finished thing"]
    assert titles(client.get("/tasks/list?status=dismissed").content.decode()) == ["Ignored thing"]
    assert 'data-action="reopen"' in client.get("/?status=dismissed").content.decode()

    client.post(f"/tasks/{dismissed.pk}/status", {"status": "open"}, headers=HTMX)
    assert sorted(titles(client.get("/").content.decode())) == ["Ignored thing", "Open thing"]


# Bulk -----------------------------------------------------------------------------------------------


def test_bulk_done_and_dismiss_with_undo(client: Client, person: User) -> None:
    a, b, c = (task_create(user=person, title=t) for t in ("A task", "B task", "C task"))
    stranger = task_create(user=UserFactory(), title="Stranger's")

    response = client.post(
        "/tasks/bulk", {"task_ids": [a.pk, b.pk, stranger.pk], "status": "done", "previous": "open"}, headers=HTMX
    )

    assert response["HX-Trigger"] == "tasksChanged"
    assert "2 tasks marked done." in response.content.decode()
    assert titles(client.get("/tasks/list").content.decode()) == ["C task"]
    stranger.refresh_from_db()
    assert stranger.status == Task.Status.OPEN

    client.post("/tasks/bulk", {"task_ids": [c.pk], "status": "dismissed", "previous": "open"}, headers=HTMX)
    assert Task.objects.get(pk=c.pk).status == Task.Status.DISMISSED

    client.post("/tasks/bulk", {"task_ids": [a.pk, b.pk], "status": "open", "undo": "1"}, headers=HTMX)
    assert sorted(titles(client.get("/tasks/list").content.decode())) == ["A task", "B task"]


def test_bulk_with_nothing_selected_says_so(client: Client, person: User) -> None:
    response = client.post("/tasks/bulk", {"status": "done"}, headers=HTMX)
    assert "Select at least one task first." in response.content.decode()


def test_the_list_has_stable_controls_for_the_browser(client: Client, person: User) -> None:
    task = task_create(user=person, title="Something")
    body = client.get("/").content.decode()
    for control in ('id="search"', 'id="filter-mailbox"', 'id="filter-source"', 'id="bulk-done"',
                    'id="bulk-dismiss"', 'id="select-all"', 'id="tab-done"', 'id="tab-dismissed"',
                    f'data-task-id="{task.pk}"', 'data-action="done"', 'data-action="dismiss"', 'data-action="edit"',
                    'form="bulk-form"', 'id="live"'):  # fmt: skip
        assert control in body, control
    assert "<script>" not in body and " on" + "click=" not in body  # no inline script (CSP)


# Search and filters ---------------------------------------------------------------------------------


def test_search_by_text_and_filter_by_mailbox_and_source(client: Client, person: User) -> None:
    gmail = IntegrationFactory(user=person, provider="gmail")
    outlook = IntegrationFactory(user=person, provider="outlook")
    email_task(person, gmail, "g1", "Book the venue")
    email_task(person, outlook, "o1", "Sign the lease")
    task_create(user=person, title="Buy milk", notes="oat, not cow")

    assert titles(client.get("/tasks/list", {"q": "venue"}).content.decode()) == ["Book the venue"]
    assert titles(client.get("/tasks/list", {"q": "OAT"}).content.decode()) == ["Buy milk"]  # notes, any case
    assert titles(client.get("/tasks/list", {"mailbox": outlook.pk}).content.decode()) == ["Sign the lease"]
    assert titles(client.get("/tasks/list", {"source": "manual"}).content.decode()) == ["Buy milk"]
    assert sorted(titles(client.get("/tasks/list", {"source": "email_ai"}).content.decode())) == [
        "Book the venue", "Sign the lease"
    ]  # fmt: skip
    assert "No task matches this search." in client.get("/tasks/list", {"q": "zebra"}).content.decode()
    empty_filter = client.get("/tasks/list", {"source": "manual", "status": "dismissed"}).content.decode()
    assert "No task matches these filters." in empty_filter and "this search" not in empty_filter  # no search typed
    # The full page keeps the filters, and the list refreshes itself with them.
    page = client.get("/", {"q": "venue", "mailbox": gmail.pk}).content.decode()
    assert titles(page) == ["Book the venue"]
    assert f'hx-get="/tasks/list?q=venue&amp;mailbox={gmail.pk}"' in page


def test_a_search_from_the_filter_form_updates_the_address(client: Client, person: User) -> None:
    response = client.get("/tasks/list", {"q": "venue"}, HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="task-filters")
    assert response["HX-Push-Url"] == "/?q=venue"
    assert "HX-Push-Url" not in client.get("/tasks/list", HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="task-list")


# Live updates -----------------------------------------------------------------------------------------


def live_version(body: str) -> str:
    found = re.search(r'data-version="([^"]+)"', body)
    assert found, body
    return found[1]


def test_the_live_endpoint_says_nothing_until_tasks_or_runs_change(
    client: Client, person: User, django_assert_max_num_queries
) -> None:
    version = live_version(client.get("/").content.decode())

    with django_assert_max_num_queries(4):  # session, user, the tasks' version, the latest run
        unchanged = client.get("/tasks/changes", {"v": version}, headers=HTMX)
    assert unchanged.status_code == 204

    task_create(user=person, title="Arrived from another tab")
    changed = client.get("/tasks/changes", {"v": version}, headers=HTMX)
    assert changed.status_code == 200
    assert changed["HX-Trigger"] == "tasksChanged"  # the list fetches itself again
    new_version = live_version(changed.content.decode())
    assert new_version != version
    assert client.get("/tasks/changes", {"v": new_version}, headers=HTMX).status_code == 204


def test_the_live_endpoint_shows_a_run_started_elsewhere(client: Client, person: User) -> None:
    version = live_version(client.get("/").content.decode())
    run = ExtractionRun.objects.create(user=person, trigger=ExtractionRun.Trigger.SCHEDULE)

    response = client.get("/tasks/changes", {"v": version}, headers=HTMX)

    body = response.content.decode()
    assert "HX-Trigger" not in response  # no task changed
    assert 'id="run-status"' in body and 'hx-swap-oob="true"' in body
    assert f'data-run-id="{run.pk}"' in body and 'data-status="queued"' in body

    ExtractionRun.objects.filter(pk=run.pk).update(
        status=ExtractionRun.Status.SUCCEEDED, tasks_created=2, finished_at=timezone.now()
    )
    finished = client.get("/tasks/changes", {"v": live_version(body)}, headers=HTMX).content.decode()
    assert 'data-status="succeeded"' in finished and "2 tasks created" in finished


def test_the_live_endpoint_stays_cheap_with_many_tasks(
    client: Client, person: User, django_assert_max_num_queries
) -> None:
    for n in range(30):
        task_create(user=person, title=f"Task {n}", due_date=date.today() + timedelta(days=n))
    with django_assert_max_num_queries(4):
        assert client.get("/tasks/changes", {"v": "stale"}, headers=HTMX).status_code == 200


def test_run_problems_are_plain_sentences_not_the_technical_error(client: Client, person: User) -> None:
    ExtractionRun.objects.create(
        user=person,
        trigger="schedule",
        status=ExtractionRun.Status.FAILED,
        finished_at=timezone.now(),
        error_code="llm_unavailable",
        error_message="Gemini could not be reached (HTTP 503 from generativelanguage: UNAVAILABLE).",
    )
    body = client.get("/").content.decode()
    assert "The AI could not be reached; your tasks so far are kept and the next read goes on." in body
    assert "HTTP 503" not in body


@pytest.mark.parametrize(
    ("trigger", "sentence"),
    [
        ("webhook", "This read stopped unexpectedly; nothing was lost, and Tasklift reads your mail again now."),
        (
            "retry",
            "This read stopped unexpectedly again; nothing was lost, and the next regular check reads your mail.",
        ),
    ],
)
def test_a_run_stopped_because_its_worker_kept_dying_says_when_the_mail_is_read_again(
    client: Client, person: User, trigger: str, sentence: str
) -> None:
    ExtractionRun.objects.create(
        user=person,
        trigger=trigger,
        status=ExtractionRun.Status.FAILED,
        finished_at=timezone.now(),
        error_code="worker_lost",
        error_message="The run was interrupted several times and was stopped.",
    )
    assert sentence in client.get("/").content.decode()


def test_a_run_that_left_a_mailbox_out_is_a_warning_with_a_link_to_fix_it(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person, provider="outlook", account_address="me@outlook.example.com")
    ExtractionRun.objects.create(
        user=person,
        trigger="schedule",
        status=ExtractionRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        error_code="partial",
        error_message="Outlook me@outlook.example.com was left out: Graph answered 503.",
        mailboxes={str(box.pk): {"provider": "outlook", "address": box.account_address, "status": "failed"}},
    )
    body = client.get("/").content.decode()
    assert 'class="warning" data-problem="partial"' in body
    assert "Tasklift read your mail, but not all of Outlook me@outlook.example.com" in body
    assert 'href="/mailboxes/" class="fix-link"' in body
    assert "Graph answered 503" not in body


def test_dates_and_times_are_shown_in_the_persons_time_zone(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    received = datetime(2024, 3, 1, 23, 30, tzinfo=ZoneInfo("UTC"))
    email_task(person, box, "late", "Late-night email", email_received_at=received)
    assert "1 Mar 2024, 23:30" in client.get("/").content.decode()
    person.timezone = "Pacific/Auckland"
    person.save(update_fields=["timezone"])
    assert "2 Mar 2024, 12:30" in client.get("/").content.decode()
