"""Tasks that repeat (issue 34): "pay rent every month on the 1st" typed in any of quick add's languages is an
RRULE; Done makes the next one, once, and its Undo takes it back; the edit form, the API and the calendar feed
carry the rule (the feed's RRULE is read back by dateutil, not by our code)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import icalendar
import pytest
from dateutil.rrule import rrulestr
from django.test import Client

from accounts.models import User
from tasks.models import Task
from tasks.quickadd import quick_add_understand
from tasks.repeat import repeat_next, repeat_words
from tasks.services import task_create
from tasks.snooze import person_today
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

JSON = "application/json"
HTMX = {"HX-Request": "true"}
# Friday 4 December 2026, 09:00 UTC.
NOW = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
MONTHLY_1ST = "FREQ=MONTHLY;BYMONTHDAY=1"
WEEKDAYS = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
FORTNIGHTLY = "FREQ=WEEKLY;INTERVAL=2"


@pytest.fixture
def person(client: Client) -> User:
    user = UserFactory(timezone="Europe/Berlin")
    client.force_login(user)
    return user


@pytest.mark.parametrize(
    ("language", "text", "title", "rule", "due"),
    [
        ("en", "pay rent every month on the 1st", "pay rent", MONTHLY_1ST, date(2027, 1, 1)),
        ("en", "standup every weekday", "standup", WEEKDAYS, date(2026, 12, 4)),
        ("en", "water the plants every 2 weeks", "water the plants", FORTNIGHTLY, date(2026, 12, 4)),
        ("en", "gym every Monday at 7am", "gym", "FREQ=WEEKLY;BYDAY=MO", date(2026, 12, 7)),
        ("en", "back up the server weekly", "back up the server", "FREQ=WEEKLY", date(2026, 12, 4)),
        ("de", "Miete zahlen jeden Monat am 1.", "Miete zahlen", MONTHLY_1ST, date(2027, 1, 1)),
        ("de", "Standup jeden Werktag", "Standup", WEEKDAYS, date(2026, 12, 4)),
        ("de", "Blumen gießen alle 2 Wochen", "Blumen gießen", FORTNIGHTLY, date(2026, 12, 4)),
        ("fr", "payer le loyer tous les mois le 1er", "payer le loyer", MONTHLY_1ST, date(2027, 1, 1)),
        ("fr", "réunion chaque jour ouvré", "réunion", WEEKDAYS, date(2026, 12, 4)),
        ("fr", "arroser les plantes toutes les 2 semaines", "arroser les plantes", FORTNIGHTLY, date(2026, 12, 4)),
        ("es", "pagar el alquiler cada mes el día 1", "pagar el alquiler", MONTHLY_1ST, date(2027, 1, 1)),
        ("es", "reunión cada día laborable", "reunión", WEEKDAYS, date(2026, 12, 4)),
        ("es", "regar las plantas cada 2 semanas", "regar las plantas", FORTNIGHTLY, date(2026, 12, 4)),
        ("it", "pagare l'affitto ogni mese il 1", "pagare l'affitto", MONTHLY_1ST, date(2027, 1, 1)),
        ("it", "riunione ogni giorno feriale", "riunione", WEEKDAYS, date(2026, 12, 4)),
        ("it", "annaffiare le piante ogni 2 settimane", "annaffiare le piante", FORTNIGHTLY, date(2026, 12, 4)),
        ("nl", "huur betalen elke maand op de 1e", "huur betalen", MONTHLY_1ST, date(2027, 1, 1)),
        ("nl", "standup elke werkdag", "standup", WEEKDAYS, date(2026, 12, 4)),
        ("nl", "planten water geven elke 2 weken", "planten water geven", FORTNIGHTLY, date(2026, 12, 4)),
        ("pt", "pagar o aluguel todo mês no dia 1", "pagar o aluguel", MONTHLY_1ST, date(2027, 1, 1)),
        ("pt", "reunião todo dia útil", "reunião", WEEKDAYS, date(2026, 12, 4)),
        ("pt", "regar as plantas a cada 2 semanas", "regar as plantas", FORTNIGHTLY, date(2026, 12, 4)),
    ],
)
def test_repeat_read_by_quick_add_in_each_language(language: str, text: str, title: str, rule: str, due: date) -> None:
    person = UserFactory.build(timezone="Europe/Paris", language=language, date_order="DMY")
    understood = quick_add_understand(text=text, user=person, now=NOW)
    assert (understood.title, understood.repeat, understood.due_date) == (title, rule, due)


@pytest.mark.parametrize("text", ["every day", "Everyday carry bag", "weekly report", "jeden Tag"])
def test_repeat_alone_or_inside_a_word_is_the_title(text: str) -> None:
    """A text that is only a repeat is the title, as a date alone is; and "weekly report" is a report (a
    one-word repeat is taken only at the end: "back up the server weekly")."""
    person = UserFactory.build(timezone="Europe/Paris", language="de", date_order="DMY")
    understood = quick_add_understand(text=text, user=person, now=NOW)
    assert (understood.title, understood.repeat) == (text, "")


def test_repeat_next_day_and_words() -> None:
    assert repeat_next(MONTHLY_1ST, due=date(2026, 12, 1), today=date(2026, 12, 1)) == date(2027, 1, 1)
    # Done three days late, a daily task comes back today, not three times.
    assert repeat_next("FREQ=DAILY", due=date(2026, 12, 1), today=date(2026, 12, 4)) == date(2026, 12, 4)
    # Every two weeks counts from its due date.
    assert repeat_next(FORTNIGHTLY, due=date(2026, 12, 4), today=date(2026, 12, 4)) == date(2026, 12, 18)
    assert repeat_next(WEEKDAYS, due=date(2026, 12, 4), today=date(2026, 12, 4)) == date(2026, 12, 7)
    assert repeat_words(MONTHLY_1ST) == "every month on the 1st"
    assert repeat_words(WEEKDAYS) == "every weekday"
    assert repeat_words(FORTNIGHTLY) == "every 2 weeks"
    assert repeat_words("FREQ=WEEKLY;BYDAY=MO,TH") == "every Monday and Thursday"


def _open(person: User, title: str) -> list[Task]:
    return list(Task.objects.filter(user=person, title=title, status=Task.Status.OPEN).order_by("due_date"))


def test_repeat_done_makes_the_next_once_and_its_undo_takes_it_back(client: Client, person: User) -> None:
    today = person_today(user=person)
    task = task_create(user=person, title="Pay rent", due_date=today, repeat="FREQ=MONTHLY")

    done = client.post(f"/tasks/{task.pk}/status", {"status": "done"}, headers=HTMX)
    assert done.status_code == 200
    [following] = _open(person, "Pay rent")
    assert following.pk != task.pk and following.repeat_rule == "FREQ=MONTHLY"
    assert following.due_date == repeat_next("FREQ=MONTHLY", due=today, today=today)
    # Done sent again (a second click, a retry): still one next.
    client.post("/tasks/bulk", {"task_ids": [task.pk], "status": "done"}, headers=HTMX)
    assert len(_open(person, "Pay rent")) == 1
    assert "every month" in client.get("/tasks/list").content.decode()

    # Undo: the task is open again and the next it made is gone.
    client.post("/tasks/bulk", {"task_ids": [task.pk], "status": "open", "undo": "1"}, headers=HTMX)
    assert [t.pk for t in _open(person, "Pay rent")] == [task.pk]

    # Done again, then the next edited by hand: the person's now, an Undo leaves it.
    client.post(f"/tasks/{task.pk}/status", {"status": "done"}, headers=HTMX)
    [following] = _open(person, "Pay rent")
    client.post(
        f"/tasks/{following.pk}/edit",
        {"title": "Pay rent", "due_date": f"{following.due_date:%Y-%m-%d}", "notes": "by transfer"},
    )
    client.post("/tasks/bulk", {"task_ids": [task.pk], "status": "open", "undo": "1"}, headers=HTMX)
    assert {t.pk for t in _open(person, "Pay rent")} == {task.pk, following.pk}


def test_repeat_set_shown_and_refused_through_the_api(client: Client, person: User) -> None:
    made = client.post("/api/tasks", {"title": "Standup", "repeat": WEEKDAYS}, content_type=JSON)
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["repeat"] == WEEKDAYS and body["repeat_words"] == "every weekday"
    assert body["due_date"] is not None  # the rule's first day from today
    task_id = body["id"]
    done = client.patch(f"/api/tasks/{task_id}", {"status": "done"}, content_type=JSON)
    assert done.status_code == 200
    nexts = client.get("/api/tasks", {"status": "open"}).json()["items"]
    assert [(t["title"], t["repeat"]) for t in nexts] == [("Standup", WEEKDAYS)]
    assert nexts[0]["due_date"] > body["due_date"]
    cleared = client.patch(f"/api/tasks/{nexts[0]['id']}", {"repeat": None}, content_type=JSON)
    assert cleared.status_code == 200 and cleared.json()["repeat"] is None
    bad = client.patch(f"/api/tasks/{task_id}", {"repeat": "FREQ=HOURLY"}, content_type=JSON)
    assert bad.status_code == 422
    never = client.post(
        "/api/tasks",
        {"title": "Leap", "due_date": "2027-02-01", "repeat": "FREQ=MONTHLY;INTERVAL=48;BYDAY=MO;BYMONTHDAY=31"},
        content_type=JSON,
    )
    assert never.status_code == 422 and never.json()["code"] == "invalid_repeat"


def test_repeat_chosen_in_the_edit_form(client: Client, person: User) -> None:
    task = task_create(user=person, title="Water the plants", due_date=person_today(user=person))
    form = client.get(f"/tasks/{task.pk}/edit").content.decode()
    assert 'name="repeat"' in form and "Every weekday" in form
    day = f"{task.due_date:%Y-%m-%d}"
    client.post(f"/tasks/{task.pk}/edit", {"title": "Water the plants", "due_date": day, "repeat": FORTNIGHTLY})
    task.refresh_from_db()
    assert task.repeat_rule == FORTNIGHTLY
    row = re.search(rf'<li class="task[^"]*" id="task-{task.pk}".*?</li>', client.get("/").content.decode(), re.S)
    assert row is not None and "every 2 weeks" in row[0]


def test_repeat_quick_add_saves_the_rule(client: Client, person: User) -> None:
    added = client.post("/tasks/add", {"title": "Pay rent every month on the 1st"})
    assert added.status_code == 302
    task = Task.objects.get(user=person)
    assert task.due_date is not None
    assert (task.title, task.repeat_rule, task.due_date.day) == ("Pay rent", MONTHLY_1ST, 1)
    preview = client.get("/tasks/quick-add", {"title": "Pay rent every month on the 1st"}, headers=HTMX)
    assert "every month on the 1st" in preview.content.decode()


def test_repeat_rule_in_the_calendar_feed_read_back_by_dateutil(client: Client, person: User) -> None:
    today = person_today(user=person)
    task_create(user=person, title="Standup", due_date=today, repeat=WEEKDAYS)
    page = client.post("/settings/calendar")
    [url] = re.findall(rb'value="(http[^"]+\.ics)" id="new-calendar-url"', page.content)
    calendar = icalendar.Calendar.from_ical(Client().get(url.decode().split("127.0.0.1:8000", 1)[-1]).content)
    [event] = calendar.walk("VEVENT")
    written = event["RRULE"].to_ical()
    rule = written.decode() if isinstance(written, bytes) else str(written)
    days = list(
        rrulestr(rule, dtstart=datetime.combine(today, datetime.min.time())).xafter(
            datetime.combine(today, datetime.min.time()), count=5, inc=True
        )
    )
    assert [d.weekday() < 5 for d in days] == [True] * 5
    assert days[0].date() >= today
    assert (days[1] - days[0]) <= timedelta(days=3)
    # The event opens its task, on a page of its own.
    task = Task.objects.get(user=person)
    assert str(event["URL"]).endswith(f"/tasks/{task.pk}")
    assert client.get(f"/tasks/{task.pk}").status_code == 200


def test_repeat_closed_by_an_email_makes_the_next_and_its_undo_takes_it_back(person: User) -> None:
    """This month's invoice paid (the reply says so): next month's comes; the close undone takes it back."""
    from django.db import transaction
    from django.utils import timezone

    from tasks.conversation import EmailChange, conversation_changes_apply
    from tasks.services import task_event_undo
    from tests.factories import IntegrationFactory, email_task

    box = IntegrationFactory(user=person)
    today = person_today(user=person)
    task = email_task(person, box, "m1", "Pay the invoice", due_date=today)
    Task.objects.filter(pk=task.pk).update(repeat_rule="FREQ=MONTHLY")
    change = EmailChange(
        task_id=task.pk,
        outcome="delivered",
        sentence="Paid, thanks!",
        due_date=None,
        integration_id=box.pk,
        message_id="m2",
        web_link="",
        folder="sent",
        sender=f"Me <{person.email}>",
        received_at=timezone.now(),
    )
    with transaction.atomic():
        assert (
            conversation_changes_apply(user_id=person.pk, changes=[change], run_id=None, own=[person.email]).closed == 1
        )
    [following] = _open(person, "Pay the invoice")
    assert following.due_date == repeat_next("FREQ=MONTHLY", due=today, today=today)
    closed = task.events.get()
    task_event_undo(user=person, task_id=task.pk, event_id=closed.pk)
    assert [t.pk for t in _open(person, "Pay the invoice")] == [task.pk]
