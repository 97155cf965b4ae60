"""Conversations through a run (issue 22 points 2 and 3): tasks and ledger rows keep the conversation key of
their email, whichever mailbox or provider it came through; the prompt knows its reader (their own addresses,
each email's To and Cc) and never a provider id; an ask of someone else on To or Cc is not the reader's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tasks.selectors import task_open_in_conversations
from tests.conftest import GmailBox, OutlookBox, connect_gmail, run_extraction
from tests.factories import IntegrationFactory, UserFactory
from tests.plans import statements_run, whole_reads

pytestmark = pytest.mark.django_db

ROOT_ID = "room-booking-root@mail.example.org"
READER = "person@example.com"


def mail(*, to: str, cc: str = "", body: str, message_id: str = ROOT_ID, extra: str = "") -> str:
    return (
        "From: Ada Planner <ada@example.org>\r\n"
        f"To: {to}\r\n" + (f"Cc: {cc}\r\n" if cc else "") + "Subject: Offsite\r\n"
        "Date: Mon, 02 Nov 2026 10:00:00 +0000\r\n"
        f"Message-ID: <{message_id}>\r\n{extra}"
        "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        f"{body}\r\n"
    )


def prompts(sandbox: SandboxClient) -> list[str]:
    calls = [r for r in sandbox.requests("gemini") if r["method"] == "POST"]
    return ["".join(p["text"] for p in json.loads(c["body"])["contents"][0]["parts"]) for c in calls]


def test_tasks_and_ledger_rows_keep_the_conversation_of_their_email_across_mailboxes_and_providers(
    gmail: GmailBox, outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    original = gmail.deliver(mail(to=f"Person <{READER}>", body="Please send the agenda by Friday."))
    sandbox.deliver_gmail_reply(
        gmail.address, original, sender="Ada Planner <ada@example.org>", body="Please also book the train."
    )
    # A later message of the same conversation reaches the Outlook mailbox only.
    outlook.deliver(
        mail(
            to=f"Person <{outlook.address}>",
            body="Please bring the slides.",
            message_id="third@mail.example.org",
            extra=f"In-Reply-To: <{ROOT_ID}>\r\nReferences: <{ROOT_ID}>\r\n",
        )
    )
    unrelated = gmail.deliver(mail(to=READER, body="Please renew the lease.", message_id="lease@mail.example.org"))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    keys = dict(Task.objects.filter(user=consenting_user).values_list("title", "conversation_key"))
    assert keys == {
        "Send the agenda by Friday": ROOT_ID,
        "Book the train": ROOT_ID,
        "Bring the slides": ROOT_ID,
        "Renew the lease": "lease@mail.example.org",
    }
    ledger = dict(ProcessedEmail.objects.values_list("message_id", "conversation_key"))
    assert len(ledger) == 4
    assert ledger[unrelated] == "lease@mail.example.org"
    assert sorted(ledger.values()).count(ROOT_ID) == 3
    assert {t.title for t in task_open_in_conversations(user_id=consenting_user.pk, keys=[ROOT_ID])} == {
        "Send the agenda by Friday",
        "Book the train",
        "Bring the slides",
    }


def test_the_prompt_names_the_reader_and_each_emails_to_and_cc_but_no_provider_id(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    home = connect_gmail(sandbox, consenting_user, "person.at.home@example.com")
    message_id = gmail.deliver(
        mail(
            to="Sam Lee <sam@example.org>, Person <person@example.com>", cc="Chris Doe <chris@example.org>", body="Hi."
        )
    )
    thread_id = next(m["threadId"] for m in sandbox.mailbox_messages(gmail.address) if m["id"] == message_id)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    [prompt] = prompts(sandbox)
    assert prompt.startswith(f'Reader: {READER}, {home.address}\n<email id="email_1">\n')
    assert "\nTo: Sam Lee <sam@example.org>, Person <person@example.com>\n" in prompt
    assert "\nCc: Chris Doe <chris@example.org>\n" in prompt
    for provider_id in (message_id, thread_id, f"gmail:{thread_id}"):
        assert provider_id not in prompt


def test_an_ask_of_someone_else_on_to_is_not_the_readers_task_and_the_same_ask_to_the_reader_is(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(mail(to="Sam Lee <sam@example.org>", cc=f"Person <{READER}>", body="Sam, can you book the room?"))
    gmail.deliver(
        mail(
            to=f"Sam Person <{READER}>",
            cc="Ada Planner <ada@example.org>",
            body="Sam, can you book the room?",
            message_id="to-the-reader@mail.example.org",
        )
    )

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    tasks = list(Task.objects.filter(user=consenting_user).values_list("title", "conversation_key"))
    assert tasks == [("Sam, can you book the room", "to-the-reader@mail.example.org")]
    assert run.emails_sent_to_llm == 2


def test_open_items_of_a_conversation_are_found_through_its_index(consenting_user: User) -> None:
    others = [IntegrationFactory(user=UserFactory()) for _ in range(2)]
    mine = IntegrationFactory(user=consenting_user)
    Task.objects.bulk_create(
        Task(
            user_id=mailbox.user_id, source=Task.Source.EMAIL_AI, source_id=f"m-{mailbox.pk}-{n}", integration=mailbox,
            title=f"Ask {n}", title_key=f"ask {n}", conversation_key=f"c{n % 300}@example.org",
            status=Task.Status.OPEN if n % 3 else Task.Status.DONE,
            email_received_at=datetime(2026, 11, 2, tzinfo=UTC),
        )
        for mailbox in (*others, mine)
        for n in range(1500)
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    with statements_run() as statements:
        found = list(task_open_in_conversations(user_id=consenting_user.pk, keys=["c1@example.org", ""]))

    assert len(found) == 5 and all(t.status == Task.Status.OPEN and t.user_id == consenting_user.pk for t in found)
    assert whole_reads(statements, many={"tasks_task": {"user_id", "status"}}) == []


def test_a_prompt_built_without_a_reader_sends_no_recipient(consenting_user: User) -> None:
    from extraction.prompt import build_prompt
    from integrations.mail.conversation import Recipient
    from integrations.mail.message import Email

    email = Email(
        provider="gmail", message_id="m1", thread_id="t1", sender="Ada <ada@example.org>", subject="Offsite",
        received_at=datetime(2026, 11, 2, 10, tzinfo=UTC), body_text="Sam, can you book the room?", web_link="",
        to=(Recipient("Sam Lee", "sam@example.org"),), cc=(Recipient("Person", READER),),
    )  # fmt: skip

    without = build_prompt([email], max_body_chars=1_000).contents
    with_reader = build_prompt([email], max_body_chars=1_000, reader=[READER]).contents

    assert "sam@example.org" not in without and READER not in without  # what a version 1 consent covers
    assert "To: Sam Lee <sam@example.org>\n" in with_reader and f"Cc: Person <{READER}>\n" in with_reader


def test_the_consent_page_says_whom_each_email_was_sent_to_is_sent(client: Client, user: User) -> None:
    client.force_login(user)
    body = client.get("/consent/").content.decode()

    assert "names and addresses on its To and Cc lines" in body
    assert "the email addresses of other recipients" not in body


def test_to_and_cc_lines_are_bounded_whatever_the_recipients() -> None:
    from extraction.prompt import EMAIL_BLOCK_OVERHEAD, MAX_RECIPIENTS_CHARS, build_prompt
    from integrations.mail.conversation import Recipient
    from integrations.mail.message import Email

    many = tuple(Recipient("N" * 200, f"{'a' * 60}{n}@example.org") for n in range(50))
    email = Email(
        provider="gmail", message_id="m1", thread_id="t1", sender="Ada <ada@example.org>", subject="Offsite",
        received_at=datetime(2026, 11, 2, 10, tzinfo=UTC), body_text="Hello. " * 500, web_link="", to=many, cc=many,
    )  # fmt: skip

    content = build_prompt([email], max_body_chars=1_000, reader=[]).contents
    lines = {line.split(":", 1)[0]: line for line in content.splitlines() if line.startswith(("To:", "Cc:"))}

    assert len(content) <= 1_000 + EMAIL_BLOCK_OVERHEAD
    assert set(lines) == {"To", "Cc"}
    assert all(len(line) <= len("To: ") + MAX_RECIPIENTS_CHARS for line in lines.values())
    assert all(line.endswith(" more") and "@example.org" in line for line in lines.values())
