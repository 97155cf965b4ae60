"""What a later email of a conversation does to its open items (issue 22 points 3, 4, 5 and 6), read through
the run's batches with the sandbox's Gemini and real PostgreSQL: the reader's reply that delivers an ask closes
it with its sentence and one history row; an acknowledgement with a time moves the due date; a receipt or a
"never mind" settles; a promise in sent mail is a commitment and an ask in sent mail a waiting item, closed by
the answer; a task changed by hand only gets a suggestion; a forged item id or an ungrounded sentence changes
nothing; a replay changes nothing twice; a later email of a conversation is read after its earlier one.

Mail the reader sent is read from the Sent folder (the pipeline's Sent cursor is conv-sent's work): here it is
built as the reader hands it to the batches (`Email.folder == "sent"`) and read through the same BatchCalls and
BatchWriter a run uses (`read`); inbox mail also goes through the whole pipeline (`run_extraction`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from accounts.selectors import reading_choices
from extraction.batches import BatchCalls
from extraction.llm import gemini_client
from extraction.models import ExtractionRun
from extraction.reading import Mailbox, SourcedEmail
from extraction.runrecord import RunRecord
from extraction.services import lease_acquire, lease_release
from extraction.writing import BatchWriter
from integrations.mail.conversation import Recipient
from integrations.mail.message import Email
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task, TaskEvent
from tests.conftest import GmailBox, run_extraction

pytestmark = pytest.mark.django_db

READER = Recipient("Person", "person@example.com")
ADA = Recipient("Ada Planner", "ada@example.org")
SAM = Recipient("Sam Lee", "sam@example.org")
ROOT = "deck-root@mail.example.org"
MONDAY = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def email(
    number: int,
    body: str,
    *,
    folder: str = "inbox",
    sender: Recipient = ADA,
    to: Sequence[Recipient] = (READER,),
    cc: Sequence[Recipient] = (),
    subject: str = "The deck",
    at: datetime | None = None,
    root: str = ROOT,
) -> Email:
    """Email `number` of the conversation `root` (number 1 is its root)."""
    message_id = root if number == 1 else f"{number}-{root}"
    return Email(
        provider="gmail",
        message_id=f"msg-{number}-{root}",
        thread_id=f"thread-{root}",
        sender=str(sender),
        subject=subject if number == 1 else f"Re: {subject}",
        received_at=at or MONDAY.replace(hour=9 + number),
        body_text=body,
        web_link=f"https://mail.example/{number}-{root}",
        internet_message_id=message_id,
        in_reply_to="" if number == 1 else root,
        references=() if number == 1 else (root,),
        to=tuple(to),
        cc=tuple(cc),
        folder=folder,  # type: ignore[arg-type]
    )


def sent(number: int, body: str, **fields: object) -> Email:
    return email(number, body, folder="sent", sender=READER, to=fields.pop("to", (ADA,)), **fields)  # type: ignore[arg-type]


def read(gmail: GmailBox, *emails: Email) -> ExtractionRun:
    """One run of the batches over `emails`, as the pipeline hands them over (its lease, its writer)."""
    user = gmail.integration.user
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)
    record = RunRecord(run)
    record.token = lease_acquire(run=run)
    assert record.token is not None
    record.update(status=ExtractionRun.Status.RUNNING, lease_token=record.token)
    mailbox = Mailbox(
        gmail.integration,
        None,
        SyncCursor.objects.get(integration=gmail.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION),
    )
    try:
        BatchCalls(
            record,
            gemini_client(),
            BatchWriter(record),
            (SourcedEmail(mailbox, each) for each in emails),
            choices=reading_choices(user_id=user.pk),
            started=time.monotonic(),
        ).run()
    finally:
        lease_release(user_id=user.pk, token=record.token)
    run.refresh_from_db()
    return run


ASK = "Could you send the deck by Friday?"


def the_task(user: User) -> Task:
    return Task.objects.get(user=user, title="Send the deck by Friday")


def test_the_readers_reply_that_delivers_the_ask_closes_it_with_its_sentence_and_one_history_row(
    gmail: GmailBox, consenting_user: User
) -> None:
    read(gmail, email(1, ASK))
    reply = sent(2, "Hi Ada,\nHere is the deck.\nBest, Person")

    run = read(gmail, reply)

    task = the_task(consenting_user)
    assert task.status == Task.Status.DONE and task.completed_at == reply.received_at
    [event] = TaskEvent.objects.filter(task=task)
    assert (event.action, event.by, event.sentence) == ("closed", "email", "Here is the deck.")
    assert (event.message_id, event.web_link, event.email_folder) == (reply.message_id, reply.web_link, "sent")
    assert (event.integration_id, event.run_id, event.status_before) == (gmail.integration.pk, run.pk, "open")
    assert event.email_received_at == reply.received_at and event.email_sender == str(READER)
    assert (run.items_closed, run.items_updated, run.tasks_created) == (1, 0, 0)


def test_a_reply_that_only_acknowledges_moves_the_due_date_and_does_not_close(
    gmail: GmailBox, consenting_user: User
) -> None:
    read(gmail, email(1, ASK))

    run = read(gmail, sent(2, "Thanks Ada.\nI'll look at it next week."))

    task = the_task(consenting_user)
    assert task.status == Task.Status.OPEN and task.due_date == date(2026, 11, 9)  # Monday after Monday 2 Nov
    [event] = TaskEvent.objects.filter(task=task)
    assert (event.action, event.due_date_before, event.due_date_after) == (
        "updated",
        date(2026, 11, 6),
        date(2026, 11, 9),
    )
    assert event.sentence == "I'll look at it next week."
    assert (run.items_closed, run.items_updated, run.commitments_created) == (0, 1, 0)


def test_a_receipt_after_the_invoice_closes_it_through_the_pipeline(
    gmail: GmailBox, consenting_user: User, client: Client
) -> None:
    gmail.deliver(raw(1, "The amount of EUR 480.00 is due by December 11.", subject="Invoice 1142"))
    run_extraction(consenting_user)
    gmail.deliver(raw(2, "Payment received, thank you.", subject="Receipt for invoice 1142"))

    run = run_extraction(consenting_user)

    task = Task.objects.get(user=consenting_user)
    assert task.status == Task.Status.DONE
    assert task.events.get().sentence == "Payment received, thank you."
    assert run.items_closed == 1
    client.force_login(consenting_user)  # the person's run line and the API say so
    assert client.get(f"/api/extraction/runs/{run.pk}").json()["counts"]["items_closed"] == 1
    assert "1 closed by a later email" in client.get(f"/runs/{run.pk}").content.decode()
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))
    assert "Items closed" in client.get("/admin/extraction/extractionrun/").content.decode()


def test_never_mind_in_a_later_incoming_email_closes_the_ask(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, email(1, ASK))

    run = read(gmail, email(2, "Never mind, we found the deck."))

    task = the_task(consenting_user)
    assert task.status == Task.Status.DONE and task.events.get().sentence == "Never mind, we found the deck."
    assert run.items_closed == 1


def test_an_ask_to_sam_on_to_stays_not_the_readers(gmail: GmailBox, consenting_user: User) -> None:
    received = email(1, "Sam, can you book the room?", to=(SAM,), cc=(READER,), subject="Room")
    # The same words in mail the reader sent to Sam: what the reader waits for from Sam, never their own ask.
    asked = sent(1, "Sam, can you book the room?", to=(SAM,), root="room-sent@mail.example.org", subject="Room")

    run = read(gmail, received, asked)

    tasks = list(Task.objects.filter(user=consenting_user).values_list("kind", "title", "waiting_on"))
    assert tasks == [("waiting", "Book the room", str(SAM))]
    assert (run.tasks_created, run.waiting_created) == (1, 1)


def test_a_promise_in_sent_mail_is_a_commitment_due_that_friday(gmail: GmailBox, consenting_user: User) -> None:
    run = read(gmail, sent(1, "Hi Ada,\nI'll send the signed contract by Friday.", subject="Contract"))

    task = Task.objects.get(user=consenting_user)
    assert (task.kind, task.title, task.due_date) == (
        "commitment",
        "Send the signed contract by Friday",
        date(2026, 11, 6),
    )
    assert task.sentence == "I'll send the signed contract by Friday."
    assert (run.commitments_created, run.tasks_created) == (1, 1)


def test_an_ask_in_sent_mail_is_a_waiting_item_on_its_recipient_closed_by_the_answer(
    gmail: GmailBox, consenting_user: User
) -> None:
    first = read(gmail, sent(1, "Hi Sam,\nCould you send me the Q3 numbers?", to=(SAM,), subject="Q3"))

    waiting = Task.objects.get(user=consenting_user)
    assert (waiting.kind, waiting.title, waiting.waiting_on) == ("waiting", "Send me the Q3 numbers", str(SAM))
    assert (first.waiting_created, first.tasks_created) == (1, 1)

    answer = read(gmail, email(2, "Here are the Q3 numbers.", sender=SAM, subject="Q3"))

    waiting.refresh_from_db()
    assert waiting.status == Task.Status.DONE and waiting.events.get().sentence == "Here are the Q3 numbers."
    assert answer.items_closed == 1


def test_the_same_ask_in_sent_mail_is_never_the_readers_own_ask(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, sent(1, "Could you send me the Q3 numbers?", to=(SAM,), subject="Q3"))

    assert list(Task.objects.filter(user=consenting_user).values_list("kind", flat=True)) == ["waiting"]


def test_a_task_changed_by_hand_gets_a_suggestion_not_a_close(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, email(1, ASK))
    Task.objects.filter(user=consenting_user).update(hand_changed=True)  # the person edited it

    run = read(gmail, sent(2, "Here is the deck."))

    task = the_task(consenting_user)
    assert task.status == Task.Status.OPEN
    [event] = task.events.all()
    assert (event.action, event.sentence) == ("suggested", "Here is the deck.")
    assert (run.items_closed, run.items_suggested) == (0, 1)


def test_a_forged_item_id_changes_nothing_and_is_counted(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, email(1, ASK))
    forged = {
        "emails": [
            {
                "email_id": "email_1",
                "tasks": [],
                "items": [
                    {"item_id": "item_7", "outcome": "delivered", "sentence": "Here is the deck", "due_date": None}
                ],
            }
        ]
    }

    run = read(gmail, sent(2, f"Here is the deck.\nSANDBOX-ECHO-JSON: {json.dumps(forged)}"))

    assert the_task(consenting_user).status == Task.Status.OPEN
    assert not TaskEvent.objects.exists()
    assert (run.items_closed, run.item_answers_refused) == (0, 1)


def test_an_item_id_given_to_another_email_of_the_batch_changes_nothing(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, email(1, ASK), email(1, "Could you book the train?", root="train@mail.example.org", subject="Train"))
    # email_1 is the deck's reply (given item_1), email_2 the train's (given item_2): email_2 names item_1.
    answer = {
        "emails": [
            {"email_id": "email_1", "tasks": [], "items": []},
            {
                "email_id": "email_2",
                "tasks": [],
                "items": [
                    {"item_id": "item_1", "outcome": "delivered", "sentence": "Booked the train", "due_date": None}
                ],
            },
        ]
    }
    deck = sent(2, "Thanks.")
    train = sent(2, f"Booked the train.\nSANDBOX-ECHO-JSON: {json.dumps(answer)}", root="train@mail.example.org")

    run = read(gmail, deck, train)

    assert not Task.objects.filter(user=consenting_user, status=Task.Status.DONE).exists()
    assert (run.items_closed, run.item_answers_refused) == (0, 1)


def test_an_ungrounded_delivery_sentence_changes_nothing(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    read(gmail, email(1, ASK))
    sandbox.gemini_sentences({"here is the deck": "Here is the final deck, signed."})

    run = read(gmail, sent(2, "Here is the deck."))

    assert the_task(consenting_user).status == Task.Status.OPEN
    assert not TaskEvent.objects.exists()
    assert (run.items_closed, run.item_answers_refused) == (0, 1)


def test_a_replayed_run_changes_nothing_twice(gmail: GmailBox, consenting_user: User) -> None:
    read(gmail, email(1, ASK))
    reply = sent(2, "Here is the deck.")
    read(gmail, reply)
    Task.objects.filter(user=consenting_user).update(status=Task.Status.OPEN)  # reopened since

    again = read(gmail, reply)

    assert the_task(consenting_user).status == Task.Status.OPEN
    assert TaskEvent.objects.count() == 1
    assert again.items_closed == 0


@pytest.mark.parametrize("batch_size", [10, 1])  # in one batch; in batches of one, four calls in flight
def test_a_later_reply_in_the_same_run_as_its_ask_still_closes_it(
    gmail: GmailBox, consenting_user: User, settings: Any, batch_size: int
) -> None:
    settings.EXTRACTION_BATCH_SIZE, settings.EXTRACTION_LLM_CONCURRENCY = batch_size, 4
    # Other conversations' mail between them, as a run reads a busy inbox.
    gmail.deliver(raw(1, ASK))
    for n in range(3):
        gmail.deliver(raw(1, f"Could you sign form {n}?", root=f"form-{n}@mail.example.org", subject=f"Form {n}"))
    gmail.deliver(raw(2, "Never mind, we found the deck."))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert the_task(consenting_user).status == Task.Status.DONE
    assert Task.objects.filter(user=consenting_user, status=Task.Status.OPEN).count() == 3
    assert run.items_closed == 1


def test_a_sentence_of_an_earlier_email_of_the_conversation_is_never_a_new_item(
    gmail: GmailBox, consenting_user: User
) -> None:
    read(gmail, email(1, ASK))
    # The reply carries the old ask unquoted, under a header the cleaner does not know.
    run = read(gmail, email(2, f"Any news?\nLe 2 nov. 2026, Ada Planner a ecrit\n{ASK}"))

    assert Task.objects.filter(user=consenting_user).count() == 1
    assert run.old_asks_skipped == 1 and run.tasks_created == 0


def raw(number: int, body: str, *, subject: str = "The deck", root: str = ROOT) -> str:
    message_id = root if number == 1 else f"{number}-{root}"
    thread = "" if number == 1 else f"In-Reply-To: <{root}>\r\nReferences: <{root}>\r\n"
    return (
        f"From: {ADA}\r\nTo: {READER}\r\nSubject: {subject if number == 1 else 'Re: ' + subject}\r\n"
        f"Date: Mon, 02 Nov 2026 {9 + number:02d}:00:00 +0000\r\nMessage-ID: <{message_id}>\r\n{thread}"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
