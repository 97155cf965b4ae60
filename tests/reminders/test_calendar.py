"""The private calendar feed: made and shown once in Settings, read back by `icalendar` as RFC 5545 with one
all-day event per dated open task of its owner only, and a 404 once revoked or for a wrong secret."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import icalendar
import pytest
from django.test import Client

from accounts.models import User
from reminders.models import CalendarFeed
from tasks.models import Task
from tasks.services import task_create
from tasks.snooze import person_today
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _make_link(client: Client) -> str:
    page = client.post("/settings/calendar")
    assert page.status_code == 201 and page["Cache-Control"] == "no-store"
    urls = re.findall(rb'value="(http[^"]+\.ics)" id="new-calendar-url"', page.content)
    assert len(urls) == 1, page.content
    return urls[0].decode().split("127.0.0.1:8000", 1)[-1]


def test_the_calendar_feed_parses_and_carries_only_its_owners_dated_open_tasks(client: Client, user: User) -> None:
    client.force_login(user)
    today = person_today(user=user)
    task_create(user=user, title="Send the report, today", due_date=today)
    task_create(user=user, title="No date", due_date=None)
    done = task_create(user=user, title="Done already", due_date=today + timedelta(days=1))
    Task.objects.filter(pk=done.pk).update(status=Task.Status.DONE)
    task_create(user=UserFactory(), title="Someone else's", due_date=today)
    path = _make_link(client)

    answer = Client().get(path)  # a calendar app: no session
    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/calendar; charset=utf-8"
    calendar = icalendar.Calendar.from_ical(answer.content)
    assert calendar["VERSION"] == "2.0" and calendar["PRODID"]
    events = calendar.walk("VEVENT")
    assert [str(e["SUMMARY"]) for e in events] == ["Send the report, today"]
    [event] = events
    assert event.decoded("DTSTART") == today  # a date, not a time: an all-day event
    assert event.decoded("DTEND") == today + timedelta(days=1)
    assert event["UID"] and event["DTSTAMP"]


def test_the_feed_holds_the_window_from_30_days_ago_to_a_year_ahead_and_says_so(client: Client, user: User) -> None:
    client.force_login(user)
    today = person_today(user=user)
    for days in (-31, -30, 0, 365, 366):
        task_create(user=user, title=f"Due {days:+d} days", due_date=today + timedelta(days=days))
    calendar = icalendar.Calendar.from_ical(Client().get(_make_link(client)).content)
    assert [str(e["SUMMARY"]) for e in calendar.walk("VEVENT")] == ["Due -30 days", "Due +0 days", "Due +365 days"]
    assert str(calendar["X-WR-CALDESC"]) == "Your open Tasklift tasks due from 30 days ago to a year ahead."


def test_the_calendar_secret_is_shown_once_and_only_its_hash_is_kept(client: Client, user: User) -> None:
    client.force_login(user)
    path = _make_link(client)
    secret = path.removeprefix("/calendar/").removesuffix(".ics")
    feed = CalendarFeed.objects.get(user=user)
    assert feed.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(list(CalendarFeed.objects.values()))
    assert secret.encode() not in client.get("/settings/").content  # not shown again


def test_a_revoked_or_wrong_calendar_url_answers_404(client: Client, user: User) -> None:
    client.force_login(user)
    task_create(user=user, title="Due", due_date=person_today(user=user))
    path = _make_link(client)
    assert Client().get(path).status_code == 200
    assert Client().get(path[:-8] + "xxxx.ics").status_code == 404  # a wrong secret
    assert Client().get("/calendar/nothing.ics").status_code == 404
    feed = CalendarFeed.objects.get(user=user)
    assert client.post(f"/settings/calendar/{feed.pk}/revoke").status_code == 302
    assert Client().get(path).status_code == 404


def test_another_person_cannot_revoke_my_calendar(client: Client, user: User) -> None:
    client.force_login(user)
    path = _make_link(client)
    other = Client()
    other.force_login(UserFactory())
    other.post(f"/settings/calendar/{CalendarFeed.objects.get(user=user).pk}/revoke")
    assert Client().get(path).status_code == 200


def test_a_calendar_url_never_reaches_a_log_line(client: Client, user: User) -> None:
    from config.logfilters import redact

    client.force_login(user)
    path = _make_link(client)
    secret = path.removeprefix("/calendar/").removesuffix(".ics")
    line = f'127.0.0.1 - - "GET {path} HTTP/1.1" 200 "-" "Google-Calendar-Importer"'
    assert secret not in redact(line) and "/calendar/" in redact(line)


def test_admin_revokes_a_calendar_link_and_never_shows_its_hash(client: Client, user: User) -> None:
    from reminders.calendar import calendar_feed_create

    feed, secret = calendar_feed_create(user=user)
    admin = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(admin)
    for path in ("/admin/reminders/calendarfeed/", f"/admin/reminders/calendarfeed/{feed.pk}/change/"):
        page = client.get(path)
        assert (
            page.status_code == 200
            and feed.secret_hash.encode() not in page.content
            and secret.encode() not in page.content
        )
    assert client.get("/admin/reminders/digestday/").status_code == 200
    assert client.get("/admin/reminders/digestsubscription/").status_code == 200
    client.post("/admin/reminders/calendarfeed/", {"action": "revoke", "_selected_action": [feed.pk]})
    assert Client().get(f"/calendar/{secret}.ics").status_code == 404
