"""Snoozing a task to a date: it leaves the open list until that date comes in the person's time zone, and
is back that morning (and in that morning's digest)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.models import User
from reminders.digest import digest_send_due, digest_set
from tasks.models import Task
from tasks.selectors import task_list
from tasks.services import task_create
from tasks.snooze import person_today, task_snooze

pytestmark = pytest.mark.django_db


def test_a_snoozed_task_leaves_the_list_and_comes_back_on_its_date(client: Client, user: User) -> None:
    client.force_login(user)
    task = task_create(user=user, title="Renew the passport")
    tomorrow = person_today(user=user) + timedelta(days=1)
    answer = client.post(f"/tasks/{task.pk}/snooze", {"snoozed_until": tomorrow.isoformat()}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and b"snoozed until" in answer.content
    assert b"Renew the passport" not in client.get("/").content
    assert list(task_list(user=user)) == []

    Task.objects.filter(pk=task.pk).update(snoozed_until=person_today(user=user))  # its date has come
    assert b"Renew the passport" in client.get("/").content


def test_the_snooze_control_is_on_each_open_task(client: Client, user: User) -> None:
    client.force_login(user)
    task = task_create(user=user, title="Renew the passport")
    page = client.get("/").content.decode()
    assert f'action="/tasks/{task.pk}/snooze"' in page and 'name="snoozed_until"' in page


def test_snooze_returns_on_the_persons_morning_in_their_time_zone(user: User) -> None:
    User.objects.filter(pk=user.pk).update(timezone="Asia/Tokyo")
    user.refresh_from_db()
    digest_set(user=user, enabled=True)
    task = task_create(user=user, title="Back on Wednesday")
    monday_evening_utc = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # 21:00 Monday in Tokyo
    task_snooze(task=task, until=date(2026, 12, 2), now=monday_evening_utc)
    digest_send_due(now=datetime(2026, 11, 30, 22, 30, tzinfo=UTC))  # Tuesday 07:30 in Tokyo
    assert mail.outbox == []
    digest_send_due(now=datetime(2026, 12, 1, 22, 30, tzinfo=UTC))  # Wednesday 07:30 in Tokyo
    [message] = mail.outbox
    assert "Back from snooze" in message.body and "Back on Wednesday" in message.body


def test_snooze_to_today_or_the_past_or_nonsense_is_refused_with_a_message(client: Client, user: User) -> None:
    client.force_login(user)
    task = task_create(user=user, title="Renew the passport")
    today = timezone.localdate()
    for value in (today.isoformat(), "2001-01-01", "not a date", ""):
        answer = client.post(f"/tasks/{task.pk}/snooze", {"snoozed_until": value}, HTTP_HX_REQUEST="true")
        assert answer.status_code == 400, value
        assert b"Snooze until" in answer.content or b"Choose the date" in answer.content
        assert f'id="task-{task.pk}"'.encode() in answer.content  # the row stays, with the message beside it
    task.refresh_from_db()
    assert task.snoozed_until is None
    assert (
        client.post("/tasks/999999/snooze", {"snoozed_until": "2030-01-01"}, HTTP_HX_REQUEST="true").status_code == 404
    )


def test_a_snooze_can_be_undone_and_snoozed_tasks_are_listed_with_their_date(client: Client, user: User) -> None:
    client.force_login(user)
    task = task_create(user=user, title="Renew the passport")
    back = person_today(user=user) + timedelta(days=3)
    notice = client.post(f"/tasks/{task.pk}/snooze", {"snoozed_until": back.isoformat()}, HTTP_HX_REQUEST="true")
    assert f'action="/tasks/{task.pk}/unsnooze"'.encode() in notice.content and b'id="undo-button"' in notice.content
    listed = client.get("/tasks/snoozed").content
    assert b"Renew the passport" in listed and b'id="no-snoozed"' not in listed

    undone = client.post(f"/tasks/{task.pk}/unsnooze", HTTP_HX_REQUEST="true")
    assert undone.status_code == 200 and b"back on your list" in undone.content
    assert b"Renew the passport" in client.get("/").content
    assert b'id="no-snoozed"' in client.get("/tasks/snoozed").content


def test_another_persons_task_cannot_be_snoozed_or_unsnoozed(client: Client, user: User) -> None:
    from tests.factories import UserFactory

    theirs = task_create(user=UserFactory(), title="Not yours")
    client.force_login(user)
    later = (person_today(user=user) + timedelta(days=3)).isoformat()
    assert (
        client.post(f"/tasks/{theirs.pk}/snooze", {"snoozed_until": later}, HTTP_HX_REQUEST="true").status_code == 404
    )
    assert client.post(f"/tasks/{theirs.pk}/unsnooze", HTTP_HX_REQUEST="true").status_code == 404
    theirs.refresh_from_db()
    assert theirs.snoozed_until is None
