"""The demo shows everything (issue 31): the demo mailboxes carry the person's own Sent mail, so a newcomer's
first "Extract now" shows a promise ("You promised"), an ask of someone still unanswered ("Waiting for") and an
ask of the inbox closed by the person's reply ("Done by your reply"). Read by the real extraction against the
sandbox's Gmail, Graph and Gemini, as a newcomer's first run reads it: the demo is in the mailbox before it is
connected, so the inbox is the backfill and the Sent mail the first read of Sent mail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import parseaddr

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.client import SandboxClient
from sandbox.demo import demo_fill_if_empty, load_demo_mailbox, load_demo_outlook
from sandbox.demo.messages import (
    CLOSED_BY_REPLY,
    DEMO_ADDRESS,
    EXPECTED_ASKS,
    EXPECTED_OPEN,
    EXPECTED_PROMISES,
    EXPECTED_TASKS,
    EXPECTED_WAITING,
    demo_mail,
    demo_messages,
)
from sandbox.server import SandboxServer
from tasks.models import Task, TaskEvent, TaskLink
from tests.conftest import connect_gmail, connect_outlook, run_extraction

ADDRESS = "newcomer@example.org"
NOW = datetime(2025, 12, 5, 14, 37, 12, tzinfo=UTC)

PROMISE = ("Nordlys studio fit-out", "Send you the revised quote by Friday")
WAITING = ("Customer day in Lisbon: venue", "Confirm the venue by Tuesday", "Tiago Costa <tiago.costa@example.com>")
CLOSED = ("Q4 budget deck review", "Review the Q4 budget deck by Friday", "Jane Doe <jane.doe@example.com>")
REPLY_SENTENCE = (
    "Here are my comments on the Q4 budget deck: slides 4 and 9 need updated numbers; everything else looks good to me."
)


def _parse(raw: bytes) -> EmailMessage:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def _sent(now: datetime = NOW, owner: str = DEMO_ADDRESS) -> list[EmailMessage]:
    return [_parse(mail.raw) for mail in demo_mail(now, owner=owner) if mail.folder == "sent"]


def _first_run(user: User) -> ExtractionRun:
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.error_code == "", run.error_message  # both folders of every mailbox read wholly
    return run


def _assert_the_demo_shows_everything(user: User) -> None:
    """The promise, the waiting item and the ask closed by the reply, with their titles, senders and sentences;
    and the first run's totals as the demo's constants say."""
    promise = Task.objects.get(user=user, kind=Task.Kind.COMMITMENT)
    assert (promise.email_subject, promise.title, promise.status) == (*PROMISE, Task.Status.OPEN)
    assert promise.sentence == "I'll send you the revised quote by Friday."
    assert parseaddr(promise.email_sender)[1] == user.email  # the person's own mail

    waiting = Task.objects.get(user=user, kind=Task.Kind.WAITING)
    assert (waiting.email_subject, waiting.title, waiting.waiting_on) == WAITING
    assert waiting.status == Task.Status.OPEN  # nobody has answered it in the demo
    assert waiting.sentence == "Could you confirm the venue by Tuesday?"

    closed = Task.objects.get(user=user, kind=Task.Kind.ASK, email_subject=CLOSED[0])
    assert (closed.title, closed.email_sender, closed.status) == (CLOSED[1], CLOSED[2], Task.Status.DONE)
    event = TaskEvent.objects.get(task=closed)
    assert (event.action, event.by, event.email_folder) == (TaskEvent.Action.CLOSED, TaskEvent.By.EMAIL, "sent")
    assert event.sentence == REPLY_SENTENCE
    assert closed.completed_at == event.email_received_at  # when the reply was sent, not when it was read

    assert Task.objects.filter(user=user).count() == EXPECTED_TASKS
    assert Task.objects.filter(user=user, status=Task.Status.DONE).count() == sum(CLOSED_BY_REPLY.values())
    open_own = Task.objects.filter(user=user, status=Task.Status.OPEN).exclude(kind=Task.Kind.WAITING)
    assert sorted(open_own.values_list("email_subject", flat=True)) == sorted(
        subject for subject, count in EXPECTED_OPEN.items() for _ in range(count)
    )


# The demo's Sent mail, as written ------------------------------------------------------------------------
def test_the_constants_name_the_three_threads_and_the_first_runs_totals() -> None:
    assert {PROMISE[0]: 1} == EXPECTED_PROMISES
    assert {WAITING[0]: 1} == EXPECTED_WAITING
    assert {CLOSED[0]: 1} == CLOSED_BY_REPLY
    # The inbox's 30 asks, a promise and a waiting item; the open list keeps 30: one ask done, one promise more.
    assert (sum(EXPECTED_ASKS.values()), EXPECTED_TASKS, sum(EXPECTED_OPEN.values())) == (30, 32, 30)
    assert CLOSED[0] not in EXPECTED_OPEN
    assert EXPECTED_OPEN[PROMISE[0]] == 1


def test_the_sent_mail_is_the_owners_own_and_every_subject_is_unique() -> None:
    sent = _sent(owner=ADDRESS)
    assert len(sent) == 3
    assert all(message["From"].addresses[0].addr_spec == ADDRESS for message in sent)
    assert all(message["To"].addresses[0].addr_spec != ADDRESS for message in sent)
    subjects = [str(m["Subject"]) for m in sent] + [str(_parse(raw)["Subject"]) for raw in demo_messages(NOW)]
    assert len(set(subjects)) == len(subjects)  # a subject names one message, in either folder
    assert [m["Message-ID"] for m in _sent(NOW + timedelta(days=2), owner=ADDRESS)] == [m["Message-ID"] for m in sent]


@pytest.mark.parametrize(
    "now",
    [
        NOW,
        datetime(2026, 1, 1, 0, 0, tzinfo=UTC),
        datetime(2025, 3, 1, 6, 30, 59, tzinfo=timezone(timedelta(hours=-8))),
    ],
)
def test_the_reply_lies_between_the_ask_it_answers_and_janes_answer_to_it(now: datetime) -> None:
    mail = demo_mail(now)
    assert [m.at for m in mail] == sorted(m.at for m in mail)
    assert all(now - timedelta(days=6) <= m.at <= now for m in mail)  # inside both first reads' windows
    by_id = {str(_parse(m.raw)["Message-ID"]): (m, _parse(m.raw)) for m in mail}
    ask, _ = by_id["<demo.q4-budget-deck@example.com>"]
    reply, reply_message = by_id["<demo.q4-budget-deck-mine@tasklift.test>"]
    answer, answer_message = by_id["<demo.q4-budget-deck-reply@example.com>"]
    assert ask.at < reply.at < answer.at
    assert reply.folder == "sent" and reply_message["In-Reply-To"] == "<demo.q4-budget-deck@example.com>"
    assert answer_message["References"].split() == ["<demo.q4-budget-deck@example.com>", reply_message["Message-ID"]]
    # Jane's answer quotes the reply the Sent folder holds, as it was sent.
    body = answer_message.get_body(preferencelist=("plain",))
    assert body is not None
    assert REPLY_SENTENCE.split(":")[0] in body.get_content()


# In the sandbox's mailboxes -----------------------------------------------------------------------------
def test_the_demo_gmail_holds_the_sent_mail_under_sent_only(
    sandbox: SandboxClient, sandbox_server: SandboxServer
) -> None:
    load_demo_mailbox(sandbox_server.state, ADDRESS)

    listed = sandbox.mailbox_messages(ADDRESS)
    sent = [m for m in listed if "SENT" in m["labelIds"]]
    assert sorted(m["subject"] for m in sent) == sorted([PROMISE[0], WAITING[0], "Re: Q4 budget deck review"])
    assert all(m["labelIds"] == ["SENT"] for m in sent)
    assert len(listed) - len(sent) == len(EXPECTED_ASKS)
    threads = {m["subject"]: m["threadId"] for m in listed}
    assert threads["Re: Q4 budget deck review"] == threads[CLOSED[0]] == threads["Re: Re: Q4 budget deck review"]


def test_the_demo_outlook_holds_the_sent_mail_in_sentitems_once(
    sandbox: SandboxClient, sandbox_server: SandboxServer
) -> None:
    load_demo_outlook(sandbox_server.state, ADDRESS)
    load_demo_outlook(sandbox_server.state, ADDRESS)  # a second seeding adds nothing

    listed = sandbox.outlook_messages(ADDRESS)
    sent = [m for m in listed if m["folder"] == "sentitems"]
    assert sorted(m["subject"] for m in sent) == sorted([PROMISE[0], WAITING[0], "Re: Q4 budget deck review"])
    assert all(m["isRead"] and m["from"] == ADDRESS for m in sent)
    assert len(listed) == len(demo_mail(NOW))
    conversations = {m["subject"]: m["conversationId"] for m in listed}
    assert conversations["Re: Q4 budget deck review"] == conversations[CLOSED[0]]
    assert conversations["Re: Re: Q4 budget deck review"] == conversations[CLOSED[0]]


def test_filling_a_mailbox_with_the_demo_counts_its_sent_mail(
    sandbox: SandboxClient, sandbox_server: SandboxServer
) -> None:
    """On a sandbox reset for the test (`sandbox`): another test of this process may have filled the address."""
    assert demo_fill_if_empty(sandbox_server.state, "gmail", ADDRESS) == len(demo_mail(NOW)) == len(EXPECTED_ASKS) + 3
    assert demo_fill_if_empty(sandbox_server.state, "gmail", ADDRESS) == 0


# A newcomer's first run ---------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["gmail", "outlook"])
def test_the_first_run_on_the_demo_shows_a_promise_a_waiting_item_and_an_ask_done_by_the_reply(
    provider: str, sandbox: SandboxClient, sandbox_server: SandboxServer, consenting_user: User
) -> None:
    address = consenting_user.email
    if provider == "gmail":
        load_demo_mailbox(sandbox_server.state, address)
        connect_gmail(sandbox, consenting_user, address)
    else:
        load_demo_outlook(sandbox_server.state, address)
        connect_outlook(sandbox, consenting_user, address)

    run = _first_run(consenting_user)

    assert run.tasks_created == EXPECTED_TASKS
    assert run.items_closed == sum(CLOSED_BY_REPLY.values())
    _assert_the_demo_shows_everything(consenting_user)


def test_the_demo_in_gmail_and_outlook_at_once_gives_each_item_once_with_both_links(
    sandbox: SandboxClient, sandbox_server: SandboxServer, consenting_user: User
) -> None:
    address = consenting_user.email
    load_demo_mailbox(sandbox_server.state, address)
    load_demo_outlook(sandbox_server.state, address)
    gmail = connect_gmail(sandbox, consenting_user, address)
    outlook = connect_outlook(sandbox, consenting_user, address)

    _first_run(consenting_user)

    _assert_the_demo_shows_everything(consenting_user)
    for integration in (gmail.integration, outlook.integration):
        assert TaskLink.objects.filter(task__user=consenting_user, integration=integration).count() == EXPECTED_TASKS


def test_the_pages_show_you_promised_waiting_for_and_done_by_your_reply(
    client: Client, sandbox: SandboxClient, sandbox_server: SandboxServer, consenting_user: User
) -> None:
    load_demo_mailbox(sandbox_server.state, consenting_user.email)
    connect_gmail(sandbox, consenting_user, consenting_user.email)
    _first_run(consenting_user)
    client.force_login(consenting_user)

    def row(page: str, subject: str) -> str:
        found = [chunk for chunk in page.split('<li class="task')[1:] if subject in chunk]
        assert len(found) == 1, f"{len(found)} rows of {subject!r}"
        return found[0]

    open_list = client.get("/").content.decode()
    assert "You promised" in row(open_list, PROMISE[0]) and PROMISE[1] in row(open_list, PROMISE[0])
    assert f">{CLOSED[0]}<" not in open_list and WAITING[0] not in open_list
    waiting = row(client.get("/?kind=waiting").content.decode(), WAITING[0])
    assert WAITING[1] in waiting and "Tiago Costa" in waiting
    done = row(client.get("/?status=done").content.decode(), f">{CLOSED[0]}<")
    assert CLOSED[1] in done and "Done by your reply" in done
