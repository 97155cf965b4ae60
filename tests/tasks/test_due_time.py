"""A task may be due at a time (issue 34): set by quick add, the edit form and the API (`due_time`, `HH:MM` in
the person's zone), shown in the list, a timed event in the calendar feed, never without a date."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import icalendar
import pytest
from django.test import Client

from accounts.models import User
from tasks.models import Task
from tasks.services import task_create
from tasks.snooze import person_today
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def person(client: Client) -> User:
    user = UserFactory(timezone="Europe/Berlin")
    client.force_login(user)
    return user


def test_due_time_set_and_cleared_in_the_edit_form_and_shown_in_the_list(client: Client, person: User) -> None:
    task = task_create(user=person, title="Call Bob", due_date=person_today(user=person))
    day = f"{task.due_date:%Y-%m-%d}"
    saved = client.post(f"/tasks/{task.pk}/edit", {"title": "Call Bob", "due_date": day, "due_time": "15:30"})
    assert saved.status_code == 302
    task.refresh_from_db()
    assert task.due_time == time(15, 30)
    row = re.search(rf'<li class="task[^"]*" id="task-{task.pk}".*?</li>', client.get("/").content.decode(), re.S)
    assert row is not None and "<time>15:30</time>" in row[0]
    # No date, no time: clearing the date clears the time; a time alone is refused, on the field.
    client.post(f"/tasks/{task.pk}/edit", {"title": "Call Bob", "due_date": "", "due_time": ""})
    cleared = Task.objects.get(pk=task.pk)
    assert (cleared.due_date, cleared.due_time) == (None, None)
    refused = client.post(f"/tasks/{task.pk}/edit", {"title": "Call Bob", "due_date": "", "due_time": "09:00"})
    assert refused.status_code == 400 and "A time needs a due date" in refused.content.decode()


def test_due_time_read_and_written_by_the_api(client: Client, person: User) -> None:
    day = f"{person_today(user=person) + timedelta(days=1):%Y-%m-%d}"
    made = client.post("/api/tasks", {"title": "Dentist", "due_date": day, "due_time": "09:15"}, content_type=JSON)
    assert made.status_code == 201 and made.json()["due_time"] == "09:15"
    task_id = made.json()["id"]
    moved = client.patch(f"/api/tasks/{task_id}", {"due_time": "10:00"}, content_type=JSON)
    assert moved.status_code == 200 and (moved.json()["due_date"], moved.json()["due_time"]) == (day, "10:00")
    assert client.patch(f"/api/tasks/{task_id}", {"due_time": "25:00"}, content_type=JSON).status_code == 422
    cleared = client.patch(f"/api/tasks/{task_id}", {"due_date": None}, content_type=JSON).json()
    assert (cleared["due_date"], cleared["due_time"]) == (None, None)
    alone = client.patch(f"/api/tasks/{task_id}", {"due_time": "10:00"}, content_type=JSON)
    assert alone.status_code == 409 and alone.json()["code"] == "no_due_date"  # this task has no date now
    assert Task.objects.get(pk=task_id).due_time is None
    new = client.post("/api/tasks", {"title": "Someday", "due_time": "10:00"}, content_type=JSON)
    assert new.status_code == 422 and new.json()["code"] == "invalid_due_time"  # the document says so too
    assert not Task.objects.filter(title="Someday").exists()


def test_due_time_is_a_half_hour_event_in_the_calendar_in_the_persons_zone(client: Client, person: User) -> None:
    today = person_today(user=person)
    task_create(user=person, title="Call Bob", due_date=today, due_time=time(15, 0))
    task_create(user=person, title="Pay rent", due_date=today)
    page = client.post("/settings/calendar")
    [url] = re.findall(rb'value="(http[^"]+\.ics)" id="new-calendar-url"', page.content)
    calendar = icalendar.Calendar.from_ical(Client().get(url.decode().split("127.0.0.1:8000", 1)[-1]).content)
    events = {str(e["SUMMARY"]): e for e in calendar.walk("VEVENT")}
    start = datetime(today.year, today.month, today.day, 15, tzinfo=ZoneInfo("Europe/Berlin"))
    assert events["Call Bob"].decoded("DTSTART") == start
    assert events["Call Bob"].decoded("DTEND") == start + timedelta(minutes=30)
    assert events["Pay rent"].decoded("DTSTART") == today  # no time: all day


def test_due_time_kept_when_an_email_re_dates_the_task(person: User) -> None:
    from django.db import transaction
    from django.utils import timezone

    from tasks.conversation import EmailChange, conversation_changes_apply
    from tests.factories import IntegrationFactory, email_task

    box = IntegrationFactory(user=person)
    today = person_today(user=person)
    task = email_task(person, box, "m1", "Call Bob", due_date=today, due_time=time(15, 0))
    later = today + timedelta(days=2)
    change = EmailChange(
        task_id=task.pk,
        outcome="updated",
        sentence="Let's make it Sunday instead.",
        due_date=later,
        integration_id=box.pk,
        message_id="m2",
        web_link="",
        folder="inbox",
        sender="Ann <ann@example.com>",  # who asked: she may re-date it
        received_at=timezone.now(),
    )
    with transaction.atomic():
        assert conversation_changes_apply(user_id=person.pk, changes=[change], run_id=None).updated == 1
    task.refresh_from_db()
    assert (task.due_date, task.due_time) == (later, time(15, 0))


def test_due_time_the_email_states_comes_from_gemini(gmail: Any, consenting_user: User) -> None:
    """The prompt asks Gemini for `due_time`; the sandbox's stand-in answers it (sandbox/reader.py) and the run
    keeps it with the task's date. A time without a date, or not HH:MM, leaves the task its day alone."""
    from extraction.llm import _due_time
    from tests.conftest import run_extraction
    from tests.mail import rfc822

    gmail.sandbox.deliver(gmail.address, rfc822("The call", "Hi,\n\nCould you call me tomorrow at 3pm?\n\nAlex\n"))
    gmail.sandbox.deliver(gmail.address, rfc822("The rooms", "Hi,\n\nCan you book 3 rooms by Friday?\n\nAlex\n"))
    run_extraction(consenting_user)
    times = dict(Task.objects.filter(user=consenting_user).values_list("email_subject", "due_time"))
    assert times == {"The call": time(15, 0), "The rooms": None}
    assert _due_time("email_1", "15:00", None) is None
    assert _due_time("email_1", "3pm", "2026-12-05") is None
