"""The sandbox reader's rules for conversations (sandbox/READER.md section 8), on prompts as Tasklift writes
them: what mail the reader sent holds, and what an email does to the open items it was given."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from extraction.prompt import OpenItem, build_prompt
from integrations.mail.conversation import Recipient
from integrations.mail.message import Email
from sandbox.reader import read_prompt

SAM = Recipient("Sam Lee", "sam@example.org")
ADA = Recipient("Ada Planner", "ada@example.org")
DECK = OpenItem(1, "ask", "Send the deck by Friday", "Could you send the deck by Friday?")
NUMBERS = OpenItem(2, "waiting", "Send me the Q3 numbers", "Could you send me the Q3 numbers?")
INVOICE = OpenItem(3, "ask", "The amount of EUR 480.00 is due by December 11", "The amount is due by December 11.")


def answer(body: str, *, sent: bool, items: tuple[OpenItem, ...] = (), subject: str = "Re: Things") -> dict:
    email = Email(
        provider="gmail",
        message_id="m",
        thread_id="t",
        sender="Person <person@example.com>" if sent else str(ADA),
        subject=subject,
        received_at=datetime(2026, 11, 2, 10, tzinfo=UTC),  # a Monday
        body_text=body,
        web_link="",
        to=(SAM, ADA),
        folder="sent" if sent else "inbox",
    )
    prompt = build_prompt([email], max_body_chars=4000, reader=["person@example.com"], open_items=[list(items)])
    [entry] = read_prompt(prompt.contents).as_dict()["emails"]
    return {
        "tasks": [(t["kind"], t["title"], t["due_date"], t["waiting_on"]) for t in entry["tasks"]],
        "items": [
            (prompt.items[i["item_id"]].task_id, i["outcome"], i["sentence"], i["due_date"]) for i in entry["items"]
        ],
    }


@pytest.mark.parametrize(
    ("body", "tasks"),
    [
        ("Hi Ada,\nI'll send it by Friday.", [("commitment", "Send it by Friday", "2026-11-06", "")]),
        ("Ada, je vais envoyer le contrat vendredi.", [("commitment", "Envoyer le contrat vendredi", None, "")]),
        ("Could you send me the Q3 numbers?", [("waiting", "Send me the Q3 numbers", None, "sam@example.org")]),
        ("Ada, can you book the room?", [("waiting", "Book the room", None, "ada@example.org")]),
        ("I'll look at it next week.", []),
        ("I'll get back to you.", []),
    ],
)  # fmt: skip
def test_sent_mail_holds_commitments_and_waiting_items_never_asks(body: str, tasks: list) -> None:
    assert answer(body, sent=True)["tasks"] == tasks


@pytest.mark.parametrize(
    ("body", "sent", "changes"),
    [
        ("Here is the deck.", True, [(1, "delivered", "Here is the deck.", None)]),
        ("Here is the deck.", False, []),  # an ask is delivered by the reader's mail only, and no word is shared
        ("Here are the Q3 numbers.", False, [(2, "delivered", "Here are the Q3 numbers.", None)]),
        ("Never mind, we found the deck.", False, [(1, "delivered", "Never mind, we found the deck.", None)]),
        ("I'll check the deck next week.", True, [(1, "updated", "I'll check the deck next week.", "2026-11-09")]),
        ("I'll look at it next week.", True, []),  # no word shared, and two items
        ("I'll check the deck by Thursday.", True, [(1, "updated", "I'll check the deck by Thursday.", "2026-11-05")]),
        ("I'll look at it.", True, []),
        ("Nice weather today.", True, []),
    ],
)  # fmt: skip
def test_what_an_email_does_to_its_open_items(body: str, sent: bool, changes: list) -> None:
    assert answer(body, sent=sent, items=(DECK, NUMBERS))["items"] == changes


def test_with_one_item_given_a_sentence_sharing_no_word_is_about_it() -> None:
    assert answer("I'll look at it next week.", sent=True, items=(DECK,))["items"] == [
        (1, "updated", "I'll look at it next week.", "2026-11-09")
    ]
    assert answer("Here is the file.", sent=False, items=(DECK,))["items"] == []  # an ask: not by received mail


def test_a_receipt_settles_what_was_to_be_paid_quoting_its_subject() -> None:
    found = answer(
        "Thank you for your business.", sent=False, items=(DECK, INVOICE), subject="Receipt for invoice 1142"
    )

    assert found["items"] == [(3, "delivered", "Receipt for invoice 1142", None)]
    assert found["tasks"] == []
