"""What a person sees and does of the conversations (issue 22, point 9 and the person's side of point 4): the
"Waiting for" view, the filters by kind, a task's sentence and history, "done by your reply" in the Done view,
Undo of an automatic change, Reopen, and a suggestion shown on a task the person changed by hand.

The automatic changes themselves are the pipeline's (tasks/conversation.py); here they are made as it
records them: a TaskEvent row with the task's change (tests/factories.py `email_closes`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import User
from integrations.models import Integration
from tasks.models import Task, TaskEvent
from tasks.selectors import task_list_version
from tasks.services import task_bulk_set_status, task_event_undo, task_set_status, task_update
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_closes, email_task
from tests.plans import statements_run, whole_reads

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def titles(body: str) -> list[str]:
    return re.findall(r'<strong class="task-title"[^>]*>([^<]*)</strong>', body)


def text(body: str) -> str:
    """The page's words, tags dropped and spaces joined, as a person reads them (inline tags part no words)."""
    inline = re.sub(r"</?(?:bdi|q|span|a|strong|time)\b[^>]*>", "", body)
    return " ".join(re.sub(r"<[^>]+>", " ", inline).split())


def an_hour_ago() -> tuple[datetime, str]:
    """A moment of an hour ago, and how a person in Paris reads it: its weekday and time there ("Tue 10:04")."""
    moment = timezone.now() - timedelta(hours=1)
    return moment, moment.astimezone(ZoneInfo("Europe/Paris")).strftime("%a %H:%M")


@pytest.fixture
def person(client: Client, user: User) -> User:
    user.timezone = "Europe/Paris"
    user.save(update_fields=["timezone"])
    client.force_login(user)
    return user


# The "Waiting for" view and the filters by kind ------------------------------------------------------------


def test_the_waiting_view_lists_whom_what_since_and_due_and_the_open_list_keeps_to_your_own_tasks(
    client: Client, person: User
) -> None:
    box = IntegrationFactory(user=person)
    asked = datetime(2026, 11, 24, 9, 30, tzinfo=UTC)
    # Connected before the mail came (mail from before, past due then, is under a group of its own).
    Integration.objects.filter(pk=box.pk).update(created_at=asked - timedelta(days=1))
    today = timezone.localdate()
    email_task(
        person,
        box,
        "s1",
        "Send the Q3 numbers",
        kind="waiting",
        waiting_on="Sam Lee <sam@example.org>",
        email_received_at=asked,
        due_date=today - timedelta(days=1),
    )
    email_task(person, box, "s2", "Confirm the venue", kind="waiting", waiting_on="kim@example.org")
    email_task(person, box, "m1", "Review the draft")  # asked of the person
    email_task(person, box, "m2", "Send the signed contract", kind="commitment")
    email_task(person, box, "s3", "Answered long ago", kind="waiting", status=Task.Status.DONE)

    waiting = client.get("/?kind=waiting").content.decode()
    assert titles(waiting) == ["Send the Q3 numbers", "Confirm the venue"]  # the overdue one first
    row = text(waiting.split('<li class="task', 2)[1])
    assert "Waiting on Sam Lee since Tue 24 Nov" in row
    assert "was due" in row  # overdue: its date has passed
    assert 'class="task due-overdue' in waiting
    assert 'id="tab-waiting" aria-current="page"' in waiting

    own = client.get("/").content.decode()
    assert set(titles(own)) == {"Review the draft", "Send the signed contract"}
    assert "You promised" in own
    assert titles(client.get("/?kind=commitment").content.decode()) == ["Send the signed contract"]
    assert titles(client.get("/?kind=ask").content.decode()) == ["Review the draft"]
    assert titles(client.get("/?status=done&kind=waiting").content.decode()) == ["Answered long ago"]
    # A kind that is not one is no filter, not an error.
    assert set(titles(client.get("/?kind=bogus").content.decode())) == {"Review the draft", "Send the signed contract"}


def test_a_waiting_item_is_closed_by_hand_like_a_task(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    item = email_task(person, box, "s1", "Send the Q3 numbers", kind="waiting", waiting_on="sam@example.org")
    response = client.post(f"/tasks/{item.pk}/status", {"status": "done"}, headers=HTMX)
    assert response.status_code == 200
    item.refresh_from_db()
    assert item.status == Task.Status.DONE
    assert titles(client.get("/?kind=waiting").content.decode()) == []
    assert "You are not waiting for anything" in client.get("/?kind=waiting").content.decode()


# History and "done by your reply" -------------------------------------------------------------------------


def test_the_done_view_says_done_by_your_reply_in_your_time_zone_with_the_sentence_and_the_email(
    client: Client, person: User
) -> None:
    box = IntegrationFactory(user=person)
    task = email_task(person, box, "m1", "Send the deck", sentence="Could you send me the deck?")
    replied, shown = an_hour_ago()
    email_closes(task, at=replied, email_received_at=replied, message_id="r1", sentence="Here is the deck.")
    other = email_task(person, box, "m2", "Pay the invoice", sentence="Please pay by Friday.")
    email_closes(
        other,
        email_folder="inbox",
        email_sender="Billing Team <billing@example.org>",
        message_id="r2",
        email_received_at=replied,
        sentence="Payment received, thank you.",
    )

    body = client.get("/?status=done").content.decode()
    words = text(body)
    assert f"Done by your reply, {shown}" in words
    assert "Here is the deck." in words
    assert 'href="https://mail.google.com/mail/u/0/#all/r1"' in body
    assert f"Closed by Billing Team\u2019s email, {shown}" in words
    assert "Payment received, thank you." in words
    # The history: each change, when, which email, its sentence; and the task's own sentence.
    assert "Could you send me the deck?" in words
    assert re.search(r'<details class="task-history"', body)


def test_undo_of_a_close_by_reply_puts_the_task_back_and_no_email_closes_it_again(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    due = timezone.localdate() + timedelta(days=3)
    task = email_task(person, box, "m1", "Send the deck", due_date=due)
    event = email_closes(task)
    version = task_list_version(user=person)

    response = client.post(f"/tasks/{task.pk}/history/{event.pk}/undo", headers=HTMX)

    assert response.status_code == 200
    assert response["HX-Trigger"] == "tasksChanged"
    task.refresh_from_db()
    event.refresh_from_db()
    assert (task.status, task.due_date, task.completed_at, task.hand_changed) == (Task.Status.OPEN, due, None, True)
    assert event.undone_at is not None
    undone = task.events.get(action=TaskEvent.Action.UNDONE)
    assert undone.by == TaskEvent.By.PERSON
    assert task_list_version(user=person) != version
    assert titles(client.get("/").content.decode()) == ["Send the deck"]
    assert "Undone" in text(client.get("/").content.decode())  # in its history

    again = client.post(f"/tasks/{task.pk}/history/{event.pk}/undo", headers=HTMX)
    assert again.status_code == 400
    assert "already undone" in again.content.decode()


def test_undo_of_a_due_date_an_email_moved(person: User) -> None:
    box = IntegrationFactory(user=person)
    before, after = timezone.localdate() + timedelta(days=1), timezone.localdate() + timedelta(days=8)
    task = email_task(person, box, "m1", "Send the deck", due_date=after)
    event = TaskEventFactory(
        task=task, action=TaskEvent.Action.UPDATED, due_date_before=before, due_date_after=after, status_before=""
    )
    task = task_event_undo(user=person, task_id=task.pk, event_id=event.pk)
    assert (task.due_date, task.status, task.hand_changed) == (before, Task.Status.OPEN, True)


def test_undo_is_refused_for_what_no_email_did_and_for_another_persons_task(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    task = email_task(person, box, "m1", "Send the deck")
    reopened = TaskEventFactory(task=task, action=TaskEvent.Action.REOPENED, by=TaskEvent.By.PERSON)
    assert client.post(f"/tasks/{task.pk}/history/{reopened.pk}/undo", headers=HTMX).status_code == 400
    stranger = UserFactory()
    theirs = email_task(stranger, IntegrationFactory(user=stranger), "x1", "Their task")
    their_event = email_closes(theirs)
    assert client.post(f"/tasks/{theirs.pk}/history/{their_event.pk}/undo", headers=HTMX).status_code == 404
    assert client.post(f"/tasks/{task.pk}/history/{their_event.pk}/undo", headers=HTMX).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == Task.Status.DONE
    # Without htmx: back to the list with the message.
    response = client.post(f"/tasks/{task.pk}/history/{reopened.pk}/undo")
    assert response.status_code == 302


def test_a_hand_edit_or_reopen_marks_the_task_changed_by_hand_and_reopen_is_in_its_history(person: User) -> None:
    box = IntegrationFactory(user=person)
    edited = email_task(person, box, "m1", "Send the deck")
    task_update(task=edited, notes="After lunch")
    assert Task.objects.get(pk=edited.pk).hand_changed

    closed = email_task(person, box, "m2", "Pay the invoice")
    email_closes(closed)
    task_set_status(task=closed, status=Task.Status.OPEN)
    closed.refresh_from_db()
    assert closed.hand_changed and closed.status == Task.Status.OPEN
    assert [(e.action, e.by) for e in closed.events.all()] == [
        (TaskEvent.Action.CLOSED, TaskEvent.By.EMAIL),
        (TaskEvent.Action.REOPENED, TaskEvent.By.PERSON),
    ]

    many = [email_task(person, box, f"b{n}", f"Bulk {n}", status=Task.Status.DONE) for n in range(2)]
    task_bulk_set_status(user=person, task_ids=[t.pk for t in many], status=Task.Status.OPEN)
    assert all(t.hand_changed for t in Task.objects.filter(pk__in=[t.pk for t in many]))
    assert TaskEvent.objects.filter(task__in=many, action=TaskEvent.Action.REOPENED).count() == 2

    # Done by hand, then its own Undo: the person changed nothing the pipeline should keep away from.
    untouched = email_task(person, box, "m3", "Book the room")
    task_bulk_set_status(user=person, task_ids=[untouched.pk], status=Task.Status.DONE)
    task_bulk_set_status(user=person, task_ids=[untouched.pk], status=Task.Status.OPEN, by_hand=False)
    untouched.refresh_from_db()
    assert not untouched.hand_changed and not untouched.events.exists()


# A suggestion on a task changed by hand -------------------------------------------------------------------


def test_a_suggestion_is_shown_and_mark_done_closes_the_task(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    task = email_task(person, box, "m1", "Send the deck", hand_changed=True)
    replied, shown = an_hour_ago()
    suggestion = TaskEventFactory(
        task=task, action=TaskEvent.Action.SUGGESTED, email_received_at=replied, sentence="Here is the deck."
    )
    words = text(client.get("/").content.decode())
    assert f"Your reply of {shown} seems to deliver this: Here is the deck." in words

    response = client.post(f"/tasks/{task.pk}/suggestion/{suggestion.pk}", {"answer": "accept"}, headers=HTMX)
    assert response.status_code == 200
    task.refresh_from_db()
    assert task.status == Task.Status.DONE
    assert "seems to deliver" not in text(client.get("/?status=done").content.decode())


def test_a_dismissed_suggestion_goes_and_the_task_stays(client: Client, person: User) -> None:
    box = IntegrationFactory(user=person)
    task = email_task(person, box, "m1", "Send the deck", hand_changed=True)
    suggestion = TaskEventFactory(task=task, action=TaskEvent.Action.SUGGESTED, sentence="Here is the deck.")
    version = task_list_version(user=person)

    response = client.post(f"/tasks/{task.pk}/suggestion/{suggestion.pk}", {"answer": "dismiss"}, headers=HTMX)

    assert response.status_code == 200
    task.refresh_from_db()
    assert task.status == Task.Status.OPEN
    assert "seems to deliver" not in text(client.get("/").content.decode())
    assert task_list_version(user=person) != version, "another tab shows the suggestion gone too"
    bad = client.post(f"/tasks/{task.pk}/suggestion/{suggestion.pk}", {"answer": "maybe"}, headers=HTMX)
    assert bad.status_code == 400


def test_a_history_row_alone_moves_the_list_version(person: User) -> None:
    """A suggestion changes nothing of the task, yet an open list must show it: the version moves."""
    task = email_task(person, IntegrationFactory(user=person), "m1", "Send the deck", hand_changed=True)
    version = task_list_version(user=person)
    TaskEventFactory(task=task, action=TaskEvent.Action.SUGGESTED)
    assert task_list_version(user=person) != version


def test_the_list_with_history_stays_constant_in_queries(
    client: Client, person: User, django_assert_max_num_queries: object
) -> None:
    box = IntegrationFactory(user=person)
    for n in range(30):
        task = email_task(person, box, f"m{n}", f"Task {n}")
        email_closes(task, message_id=f"r{n}")
        TaskEventFactory(task=task, action=TaskEvent.Action.REOPENED, by=TaskEvent.By.PERSON, message_id="")
    Task.objects.filter(user=person).update(status=Task.Status.DONE)
    # 15: one of them marks when the person last looked at the list (the run line sums every run since)
    with django_assert_max_num_queries(15):  # type: ignore[operator]
        assert len(titles(client.get("/?status=done").content.decode())) == 30


def test_the_waiting_view_seeks_its_few_items_and_reads_none_of_the_persons_other_tasks(
    client: Client, person: User
) -> None:
    box = IntegrationFactory(user=person)
    Task.objects.bulk_create(
        Task(user=person, source=Task.Source.MANUAL, source_id=f"h{n}", title=f"Own {n}", title_key=f"own {n}")
        for n in range(3000)
    )
    for n in range(3):
        email_task(person, box, f"s{n}", f"Waiting {n}", kind="waiting", waiting_on="sam@example.org")
    with connection.cursor() as cursor:
        # The planner knows waiting items are few among the person's tasks; and every table is analyzed as
        # autovacuum may have done before (the one mailbox then made a walk of the mailboxes cost nothing).
        cursor.execute("ANALYZE")
    with statements_run() as statements:
        body = client.get("/?kind=waiting").content.decode()
    assert len(titles(body)) == 3
    reads = [(sql, params) for sql, params in statements if '"tasks_task' in sql]
    assert reads
    # A person's tasks are many; the view seeks by person, kind and status (tasks/models.py task_kind_order).
    assert whole_reads(reads, many={"tasks_task": ["user_id"]}) == []
