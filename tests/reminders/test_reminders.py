"""Reminders that ring (issue 34): a task due at a time reminds its person at that time or a chosen time before
it, by email; once per task and time whatever the workers, kills and repeats; never for a task done, dismissed
or snoozed past the day; again when the time moves. Set in the edit form and the API, refused without a time."""

from __future__ import annotations

import signal
import subprocess
from datetime import UTC, date, datetime, time, timedelta
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.db.models import F
from django.test import Client
from django.utils import timezone

from accounts.models import User
from accounts.services import user_set_timezone
from reminders.models import Reminder
from reminders.ring import reminders_send_due
from sandbox.smtp import SmtpSink
from tasks.models import Task
from tasks.services import task_bulk_set_status, task_create, task_update
from tests.concurrency import at_once
from tests.factories import UserFactory
from tests.processes import run_mail_job

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"
DAY = date(2026, 12, 7)
# 15:00 in Berlin on 7 December is 14:00 UTC; 30 minutes before is 13:30 UTC.
RINGS = datetime(2026, 12, 7, 13, 30, tzinfo=UTC)
LEASE = timedelta(seconds=300)  # the ring processes' REMINDER_LEASE_SECONDS


def _person() -> User:
    return UserFactory(timezone="Europe/Berlin")


def _call_bob(person: User, minutes_before: int = 30) -> Task:
    return task_create(user=person, title="Call Bob", due_date=DAY, due_time=time(15, 0), reminder=minutes_before)


def _reminders_to(person: User) -> list[mail.EmailMessage]:
    return [m for m in mail.outbox if m.to == [person.email] and m.subject.startswith("Reminder:")]


def test_reminder_email_rings_once_at_its_time_in_the_persons_zone() -> None:
    person = _person()
    task = _call_bob(person)
    assert Reminder.objects.get(task=task).remind_at == RINGS

    assert reminders_send_due(now=RINGS - timedelta(minutes=1))["claimed"] == 0
    assert _reminders_to(person) == []
    reminders_send_due(now=RINGS + timedelta(seconds=5))
    [message] = _reminders_to(person)
    assert message.subject == "Reminder: Call Bob at 15:00"
    parsed = message_from_bytes(message.message().as_bytes(), policy=policy.default)
    text = parsed.get_body(preferencelist=("plain",))
    html = parsed.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    assert f"/tasks/{task.pk}" in text.get_content() and f"/tasks/{task.pk}" in html.get_content()
    assert "Europe/Berlin" in text.get_content()
    # Once: the next scans find nothing.
    assert reminders_send_due(now=RINGS + timedelta(minutes=1))["claimed"] == 0
    assert len(_reminders_to(person)) == 1


def test_reminder_email_not_for_a_task_done_dismissed_or_snoozed_past_the_day() -> None:
    person = _person()
    done, dismissed, snoozed, kept = (_call_bob(person) for _ in range(4))
    task_bulk_set_status(user=person, task_ids=[done.pk], status=Task.Status.DONE)
    task_bulk_set_status(user=person, task_ids=[dismissed.pk], status=Task.Status.DISMISSED)
    Task.objects.filter(pk=snoozed.pk).update(snoozed_until=DAY + timedelta(days=1))
    result = reminders_send_due(now=RINGS)
    assert (result["emailed"], result["passed"]) == (1, 3)
    assert len(_reminders_to(person)) == 1
    assert Reminder.objects.get(task=kept).sent_for == RINGS


def test_reminder_email_rings_again_when_the_time_moves_and_follows_the_zone() -> None:
    person = _person()
    task = _call_bob(person)
    reminders_send_due(now=RINGS)
    task_update(task=Task.objects.get(pk=task.pk), due_time=time(16, 0))  # an hour later: it rings again then
    assert reminders_send_due(now=RINGS + timedelta(minutes=30))["claimed"] == 0
    reminders_send_due(now=RINGS + timedelta(hours=1))
    assert len(_reminders_to(person)) == 2
    user_set_timezone(user=person, timezone_name="America/New_York")  # 16:00 in New York is 21:00 UTC
    assert Reminder.objects.get(task=task).remind_at == datetime(2026, 12, 7, 20, 30, tzinfo=UTC)


def test_reminder_email_too_late_is_dropped_not_rung() -> None:
    person = _person()
    _call_bob(person)
    result = reminders_send_due(now=RINGS + timedelta(hours=5))  # workers down all afternoon
    assert (result["emailed"], result["passed"]) == (0, 1) and _reminders_to(person) == []


def test_reminder_email_two_workers_at_once_ring_each_once() -> None:
    person = _person()
    tasks = [_call_bob(person) for _ in range(30)]
    at_once(lambda: reminders_send_due(now=RINGS), lambda: reminders_send_due(now=RINGS))
    assert len(_reminders_to(person)) == len(tasks)


def _ring_process(sink: SmtpSink, tmp_path: Path, crash_point: str = "") -> subprocess.CompletedProcess[str]:
    return run_mail_job(
        "reminder_chunk_job",
        relay_port=sink.port,
        local_dir=str(tmp_path),
        crash_point=crash_point,
        REMINDER_CHUNK="50",
        REMINDER_LEASE_SECONDS=str(LEASE.seconds),  # the test ends the lease itself (below)
    )


@pytest.mark.slow  # it starts processes (tests/slow.py)
@pytest.mark.parametrize(
    ("crash_point", "copies"),
    [
        # Killed once the 3rd ring was journalled: the next job records those three, rings the rest.
        ("reminder_journalled:3", {}),
        # Killed between the mail server's yes to the 3rd and the journal: that one rings twice (the same
        # Message-ID), none never: the side chosen (reminders/ring.py).
        ("reminder_rung:3", {2: 2}),
    ],
)
def test_reminder_email_a_worker_killed_mid_chunk_leaves_no_reminder_unrung(
    tmp_path: Path, crash_point: str, copies: dict[int, int]
) -> None:
    person = _person()
    tasks = sorted((_call_bob(person) for _ in range(6)), key=lambda t: t.pk)
    for n, task in enumerate(tasks):  # due a moment ago, in this order
        Reminder.objects.filter(task=task).update(remind_at=timezone.now() - timedelta(seconds=60 - n))
    with SmtpSink(tmp_path / "relay") as sink:
        killed = _ring_process(sink, tmp_path, crash_point)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert len(sink.messages()) == 3
        assert not Reminder.objects.filter(sent_for__isnull=False).exists()  # nothing recorded before the kill
        Reminder.objects.update(lease_until=F("lease_until") - LEASE)  # the lease ends, as that much time would
        again = _ring_process(sink, tmp_path)
        assert again.returncode == 0, again.stderr
        kept = sink.messages()
    ids = [str(m["Message-ID"]) for m in kept]
    rung = [sum(f"reminder-{task.pk}-" in one for one in ids) for task in tasks]
    assert rung == [copies.get(n, 1) for n in range(len(tasks))]
    assert Reminder.objects.filter(sent_for=F("remind_at")).count() == len(tasks)


def test_reminder_set_in_the_edit_form_and_the_api_and_refused_without_a_time(client: Client) -> None:
    person = _person()
    client.force_login(person)
    task = task_create(user=person, title="Dentist", due_date=DAY, due_time=time(9, 0))
    form = client.get(f"/tasks/{task.pk}/edit").content.decode()
    assert 'name="reminder"' in form and "10 minutes before" in form
    fields = {"title": "Dentist", "due_date": DAY.isoformat(), "due_time": "09:00", "reminder": "10"}
    assert client.post(f"/tasks/{task.pk}/edit", fields).status_code == 302
    assert Reminder.objects.get(task=task).remind_at == datetime(2026, 12, 7, 7, 50, tzinfo=UTC)
    refused = client.post(f"/tasks/{task.pk}/edit", {**fields, "due_time": ""})
    assert refused.status_code == 400 and "A reminder needs a time" in refused.content.decode()
    assert Task.objects.get(pk=task.pk).due_time == time(9, 0)  # nothing of the refused edit is kept

    shown = client.get(f"/api/tasks/{task.pk}").json()
    assert shown["reminder_minutes_before"] == 10
    moved = client.patch(f"/api/tasks/{task.pk}", {"reminder_minutes_before": 60}, content_type=JSON)
    assert moved.status_code == 200 and moved.json()["reminder_minutes_before"] == 60
    removed = client.patch(f"/api/tasks/{task.pk}", {"reminder_minutes_before": None}, content_type=JSON)
    assert removed.json()["reminder_minutes_before"] is None and not Reminder.objects.filter(task=task).exists()
    boolean = client.patch(f"/api/tasks/{task.pk}", {"reminder_minutes_before": False}, content_type=JSON)
    assert boolean.status_code == 422  # `false` is not 0 minutes
    untimed = client.post("/api/tasks", {"title": "Someday", "reminder_minutes_before": 5}, content_type=JSON)
    assert untimed.status_code == 422
    made = client.post(
        "/api/tasks",
        {"title": "Standup", "due_date": DAY.isoformat(), "due_time": "09:30", "reminder_minutes_before": 0},
        content_type=JSON,
    )
    assert made.status_code == 201 and made.json()["reminder_minutes_before"] == 0


def test_reminder_of_a_repeating_task_carries_on_to_the_next() -> None:
    person = _person()
    task = task_create(
        user=person, title="Standup", due_date=DAY, due_time=time(9, 30), repeat="FREQ=DAILY", reminder=5
    )
    task_bulk_set_status(user=person, task_ids=[task.pk], status=Task.Status.DONE)
    following = Task.objects.get(user=person, status=Task.Status.OPEN)
    assert Reminder.objects.get(task=following).minutes_before == 5


def test_reminder_email_a_chunk_past_most_of_its_lease_gives_the_rest_back(settings: Any) -> None:
    """A job rings for 0.8 of its lease at most: what it has not reached by then is due again at once, for the
    next claim, and is never rung by two jobs (one past its lease, one that claimed it since)."""
    person = _person()
    tasks = [_call_bob(person) for _ in range(3)]
    settings.REMINDER_LEASE_SECONDS = 0  # the lease is over before the first ring
    result = reminders_send_due(now=RINGS)
    assert (result["claimed"], result["emailed"]) == (3, 0)
    assert not Reminder.objects.filter(task__in=tasks, lease_until__isnull=False).exists()  # given back
    settings.REMINDER_LEASE_SECONDS = 60
    assert reminders_send_due(now=RINGS)["emailed"] == 3
    assert len(_reminders_to(person)) == 3


def test_reminder_in_the_calendar_feed_is_a_valarm_read_back_by_icalendar(client: Client) -> None:
    import re

    import icalendar

    person = _person()
    client.force_login(person)
    task_create(
        user=person, title="Dentist", due_date=date.today() + timedelta(days=2), due_time=time(9, 0), reminder=30
    )
    page = client.post("/settings/calendar")
    [url] = re.findall(rb'value="(http[^"]+\.ics)" id="new-calendar-url"', page.content)
    path = url.decode().split("127.0.0.1:8000", 1)[-1]
    first = Client().get(path)
    [event] = icalendar.Calendar.from_ical(first.content).walk("VEVENT")
    [alarm] = event.walk("VALARM")
    assert str(alarm["ACTION"]) == "DISPLAY" and alarm.decoded("TRIGGER") == -timedelta(minutes=30)
    # The reminder moved: the calendar app's next fetch is not answered "not modified".
    client.patch(
        f"/api/tasks/{Task.objects.get(user=person).pk}",
        {"reminder_minutes_before": 10},
        content_type="application/json",
    )
    again = Client().get(path, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 200
    [event] = icalendar.Calendar.from_ical(again.content).walk("VEVENT")
    assert event.walk("VALARM")[0].decoded("TRIGGER") == -timedelta(minutes=10)


def test_reminder_email_a_chunk_reads_through_indexes_however_many_reminders_rang_before() -> None:
    """Months of reminders rung stay in the table: the claim seeks the due ones through an index that holds only
    those not rung yet (reminder_due), and the rest of a chunk reads by keys, never a table whole."""
    from tests.plans import statements_run, whole_reads

    person = _person()
    _call_bob(person)
    reminders_send_due(now=RINGS)  # one rung before
    _call_bob(person)
    with statements_run() as statements:
        assert reminders_send_due(now=RINGS)["emailed"] == 1
    assert whole_reads(statements) == []
