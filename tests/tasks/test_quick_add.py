"""Quick add understands dates: the new-task field's "Call Sam tomorrow 3pm" is "Call Sam", due tomorrow in
the person's time zone, and the page shows what it understood before the task is saved."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.test import Client

from accounts.models import User
from tasks.models import Task
from tasks.quickadd import quick_add_understand
from tasks.snooze import person_today
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# Tuesday 1 December 2026, 16:00 UTC: already Wednesday 2 December (01:00) in Tokyo; 08:00 Tuesday in Los Angeles.
NOW = datetime(2026, 12, 1, 16, 0, tzinfo=UTC)


def test_quick_add_reads_the_phrases_relative_to_the_persons_time_zone() -> None:
    tokyo, los_angeles = UserFactory.build(timezone="Asia/Tokyo"), UserFactory.build(timezone="America/Los_Angeles")
    call = quick_add_understand(text="Call Sam tomorrow 3pm", user=tokyo, now=NOW)
    assert (call.title, call.due_date, f"{call.at:%H:%M}") == ("Call Sam", date(2026, 12, 3), "15:00")
    call = quick_add_understand(text="Call Sam tomorrow 3pm", user=los_angeles, now=NOW)
    assert (call.title, call.due_date) == ("Call Sam", date(2026, 12, 2))
    report = quick_add_understand(text="Send the report by Friday", user=tokyo, now=NOW)
    assert (report.title, report.due_date, report.at) == ("Send the report", date(2026, 12, 4), None)


def test_quick_add_leaves_numbers_and_names_that_are_no_date_in_the_title() -> None:
    person = UserFactory.build(timezone="Europe/Paris")
    for text in ("Read 1984", "Ask May about the budget", "Buy 2 apples", "Meet now", "tomorrow"):
        understood = quick_add_understand(text=text, user=person, now=NOW)
        assert (understood.title, understood.due_date) == (text, None), text
    review = quick_add_understand(text="Review PR 123 next week", user=person, now=NOW)
    assert (review.title, review.due_date) == ("Review PR 123", date(2026, 12, 8))


def _tokyo(client: Client) -> User:
    user = UserFactory(timezone="Asia/Tokyo")
    client.force_login(user)
    return user


def test_the_quick_add_preview_shows_what_was_understood_before_saving(client: Client) -> None:
    _tokyo(client)
    page = client.get("/").content.decode()
    assert 'id="quick-add-preview"' in page and 'hx-get="/tasks/quick-add"' in page
    preview = client.get("/tasks/quick-add", {"title": "Send the report by Friday"}, HTTP_HX_REQUEST="true")
    assert preview.status_code == 200
    text = preview.content.decode()
    assert "Send the report" in text and 'data-due="20' in text and "Friday" in text and "Asia/Tokyo" in text
    assert not Task.objects.exists()  # nothing saved by a preview
    kept = client.get("/tasks/quick-add", {"title": "Send the report by Friday", "keep_as_typed": "on"})
    assert 'data-due=""' in kept.content.decode()


def test_quick_add_of_call_sam_tomorrow_3pm_saves_the_due_date_and_the_time(client: Client) -> None:
    user = _tokyo(client)
    assert client.post("/tasks/add", {"title": "Call Sam tomorrow 3pm"}).status_code == 302
    task = Task.objects.get(user=user)
    assert (task.title, task.notes, f"{task.due_time:%H:%M}") == ("Call Sam", "", "15:00")  # a time, not a note
    assert task.due_date == person_today(user=user) + timedelta(days=1)  # tomorrow in Tokyo


def test_quick_add_lets_a_chosen_due_date_or_keep_as_typed_win_over_the_words(client: Client) -> None:
    user = _tokyo(client)
    client.post("/tasks/add", {"title": "Send the report by Friday", "due_date": "2027-03-01"})
    client.post("/tasks/add", {"title": "Read Friday Night Lights tomorrow", "keep_as_typed": "on"})
    saved = dict(Task.objects.filter(user=user).values_list("title", "due_date"))
    assert saved == {"Send the report by Friday": date(2027, 3, 1), "Read Friday Night Lights tomorrow": None}
