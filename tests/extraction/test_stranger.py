"""Only the people of a conversation may change its items (issue 32 point 1): Message-IDs travel in every forward
and quoted reply, so anyone can write "Never mind, it is cancelled" into a conversation. An email may close or
re-date an item only when its sender is the person (any of their addresses), one of the people of the email
the item came from (From, To, Cc), or whom a waiting item waits on; anyone else's email leaves a `suggested`
row the person can take or set aside (tasks/conversation.py `may_change`). Read through the run's batches with
the sandbox's Gemini, as tests/extraction/test_conversation_items.py does."""

from __future__ import annotations

import pytest

from integrations.mail.conversation import Recipient
from tasks.models import Task, TaskEvent
from tests.conftest import GmailBox
from tests.extraction.test_conversation_items import ADA, ASK, READER, SAM, email, read

pytestmark = pytest.mark.django_db

EVE = Recipient("Eve", "eve@evil.test")
BOB = Recipient("Bob Cc", "bob@example.org")
CANCELLED = "Never mind, the deck is cancelled."


def the_ask(gmail: GmailBox) -> Task:
    read(gmail, email(1, ASK, cc=(BOB,)))
    task = Task.objects.get(user=gmail.integration.user)
    assert task.participants.split() == ["ada@example.org", "person@example.com", "bob@example.org"]
    return task


def test_a_strangers_never_mind_in_the_conversation_closes_nothing_and_leaves_one_suggestion(
    gmail: GmailBox,
) -> None:
    task = the_ask(gmail)

    run = read(gmail, email(2, CANCELLED, sender=EVE, to=(READER,)))

    task.refresh_from_db()
    assert task.status == Task.Status.OPEN
    (event,) = task.events.all()
    assert (event.action, event.email_sender, event.sentence) == (
        TaskEvent.Action.SUGGESTED,
        str(EVE),
        CANCELLED,
    )
    assert (run.items_closed, run.items_suggested) == (0, 1)


@pytest.mark.parametrize(
    "sender", [ADA, BOB, READER], ids=["the stranger's opposite: who asked", "who was on it", "the person"]
)
def test_the_people_of_the_conversation_close_it_but_not_a_stranger(gmail: GmailBox, sender: Recipient) -> None:
    task = the_ask(gmail)
    read(gmail, email(2, CANCELLED, sender=EVE))
    run = read(gmail, email(3, CANCELLED, sender=sender, to=(READER,) if sender != READER else (ADA,)))
    task.refresh_from_db()
    assert task.status == Task.Status.DONE
    closing = task.events.get(action=TaskEvent.Action.CLOSED)
    assert closing.email_sender == str(sender)
    assert run.items_closed == 1


def test_a_waiting_item_is_closed_by_whom_it_waits_on_and_not_by_a_stranger(gmail: GmailBox) -> None:
    read(gmail, email(1, "Could you send me the Q3 numbers by Friday?", folder="sent", sender=READER, to=(SAM,)))
    waiting = Task.objects.get(user=gmail.integration.user, kind=Task.Kind.WAITING)
    read(gmail, email(2, "Here are the Q3 numbers.", sender=EVE))
    waiting.refresh_from_db()
    assert waiting.status == Task.Status.OPEN
    read(gmail, email(3, "Here are the Q3 numbers.", sender=SAM))
    waiting.refresh_from_db()
    assert waiting.status == Task.Status.DONE
