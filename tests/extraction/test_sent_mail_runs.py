"""Runs that read Sent mail as a second cursor purpose of every mailbox (issue 22 point 1): its own cursor,
ledger rows, first read and resync, each sent email read once and marked `folder="sent"`, and one purpose
failing holding back only its own cursor."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from extraction.llm import GeminiClient, LLMResult
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.pipeline import extraction_run_execute
from extraction.prompt import Prompt
from extraction.services import ledger_replay
from integrations.mail.message import Email
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.extraction.test_conversations import prompts
from tests.extraction.test_views import _mailbox_item
from tests.mail import ask, rfc822

pytestmark = pytest.mark.django_db

SAM = "Sam Lee <sam@example.org>"
SENT = SyncCursor.Purpose.SENT_MAIL
INBOX = SyncCursor.Purpose.TASK_EXTRACTION


class Recording(GeminiClient):
    """The real client, noting which emails each call was given (and from which folder)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Email] = []

    def extract(self, emails: Sequence[Email], *, prompt: Prompt | None = None) -> LLMResult:
        self.seen.extend(emails)
        return super().extract(emails, prompt=prompt)


def run_recorded(user: User) -> tuple[ExtractionRun, Recording]:
    llm = Recording()
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)
    return extraction_run_execute(run=run, llm=llm), llm


def send(sandbox: SandboxClient, box: GmailBox | OutlookBox, body: str, **extra: Any) -> str:
    sender = sandbox.send_gmail if isinstance(box, GmailBox) else sandbox.send_outlook
    return str(sender(box.address, to=[SAM], body=body, **extra)["id"])


def ledger(purpose: str) -> set[str]:
    return set(ProcessedEmail.objects.filter(purpose=purpose).values_list("message_id", flat=True))


@pytest.fixture(params=["gmail", "outlook"])
def box(request: pytest.FixtureRequest) -> GmailBox | OutlookBox:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def test_a_sent_email_reaches_gemini_once_marked_sent_and_both_cursors_move_in_one_run(
    box: GmailBox | OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)  # the first read of Sent mail (nothing sent yet) and of the inbox
    assert box.sent_cursor  # a position now, no longer the first read's mark
    sent_before, inbox_before = box.sent_cursor, box.cursor
    sent_id = send(sandbox, box, "I'll send the signed contract by Friday.")
    received_id = box.deliver(ask(101))
    sandbox.clear_requests()

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert sorted((e.message_id, e.folder) for e in llm.seen) == sorted([(received_id, "inbox"), (sent_id, "sent")])
    assert sum("signed contract" in p for p in prompts(sandbox)) == 1
    assert ledger(SENT) == {sent_id} and ledger(INBOX) == {received_id}
    assert box.sent_cursor != sent_before and box.cursor != inbox_before
    reports = run.mailboxes
    sent_report = reports[f"{box.integration.pk}:sent"]
    assert sent_report["folder"] == "sent" and sent_report["after"] == box.sent_cursor
    assert reports[str(box.integration.pk)]["folder"] == "inbox"

    again = run_extraction(consenting_user)
    assert (again.emails_fetched, again.llm_calls) == (0, 0)


def test_mail_sent_to_oneself_in_gmail_is_read_once_as_inbox_mail_and_once_as_sent_mail(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    raw = rfc822("Note to self", "Please renew the passport by Friday.", sender=f"Person <{gmail.address}>")
    note = sandbox.deliver(gmail.address, raw, labels=["SENT", "INBOX"])["id"]

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert sorted((e.message_id, e.folder) for e in llm.seen) == [(note, "inbox"), (note, "sent")]
    assert ledger(SENT) == ledger(INBOX) == {note}
    assert run_extraction(consenting_user).llm_calls == 0


def test_the_first_read_of_sent_mail_covers_14_days_before_connect_bounded_and_counted(
    box: GmailBox | OutlookBox, sandbox: SandboxClient, consenting_user: User, settings: Any
) -> None:
    settings.MAIL_SENT_BACKFILL_MAX_MESSAGES = 3
    if isinstance(box, OutlookBox):  # its fixture's first run read Sent already: a mailbox connected now
        SyncCursor.objects.filter(integration=box.integration, purpose=SENT).update(value="")
    now = datetime.now(UTC)
    send(sandbox, box, "I'll send the old plan.", sent_at=now - timedelta(days=15))  # before the window
    window = [send(sandbox, box, f"I'll send plan {n}.", sent_at=now - timedelta(days=13 - n)) for n in range(5)]

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert [e.message_id for e in llm.seen if e.folder == "sent"] == window[-3:]  # the newest three
    report = run.mailboxes[f"{box.integration.pk}:sent"]
    assert report["not_read"] == 2
    assert "First read of your Sent mail" in report["note"] and "2 older sent emails" in report["note"]
    assert ledger(SENT) == set(window[-3:])


def test_a_person_whose_mailbox_has_no_sent_cursor_gets_inbox_only_runs(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    SyncCursor.objects.filter(purpose=SENT).delete()
    send(sandbox, gmail, "I'll send the plan.")
    sandbox.clear_requests()

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert llm.seen == [] and ledger(SENT) == set()
    assert not [r for r in sandbox.requests("gmail") if "SENT" in r["query"]]


def test_a_failing_sent_read_holds_back_only_the_sent_cursor(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    sent_before = gmail.sent_cursor
    sent_id = send(sandbox, gmail, "I'll send the budget by Monday.")
    received_id = gmail.deliver(ask(102))
    sandbox.fault("gmail", 503, route="labelId=SENT", times=None)

    held = run_extraction(consenting_user)

    assert held.status == ExtractionRun.Status.SUCCEEDED and held.error_code == "partial", held.error_message
    assert "(Sent mail) was left out" in held.error_message
    assert gmail.cursor == gmail.history_id() and gmail.sent_cursor == sent_before
    assert ledger(INBOX) == {received_id} and ledger(SENT) == set()
    assert held.mailboxes[f"{gmail.integration.pk}:sent"]["status"] == "failed"
    gmail.integration.refresh_from_db()
    assert gmail.integration.last_error_code == "provider_unavailable"  # not read wholly: not a success

    sandbox.clear_faults("gmail")
    run, llm = run_recorded(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED and run.error_code == "", run.error_message
    assert [(e.message_id, e.folder) for e in llm.seen] == [(sent_id, "sent")]
    assert gmail.sent_cursor == f"sent:{gmail.history_id()}"
    gmail.integration.refresh_from_db()
    assert gmail.integration.last_error_code == ""


def test_an_expired_sent_cursor_resyncs_sent_mail_only(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    sandbox.fault("gmail", 503, route="labelId=SENT", times=None)
    sent_id = send(sandbox, gmail, "I'll book the flights.")
    received_id = gmail.deliver(ask(103))
    assert run_extraction(consenting_user).error_code == "partial"  # the inbox moves, Sent stays behind
    sandbox.clear_faults("gmail")
    sandbox.expire_history(gmail.address)  # Gmail forgot the Sent cursor's history; the inbox's is now

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.mailboxes[f"{gmail.integration.pk}:sent"]["resync"] == "expired"
    assert run.mailboxes[str(gmail.integration.pk)]["resync"] == ""
    assert [(e.message_id, e.folder) for e in llm.seen] == [(sent_id, "sent")]
    cursors = dict(SyncCursor.objects.filter(integration=gmail.integration).values_list("purpose", "generation"))
    assert cursors == {INBOX: 1, SENT: 2}
    assert ledger(INBOX) == {received_id} and ledger(SENT) == {sent_id}


def test_sent_mail_left_out_of_the_last_run_is_a_warning_naming_it(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    sandbox.fault("gmail", 503, route="labelId=SENT", times=None)
    assert run_extraction(consenting_user).error_code == "partial"
    client.force_login(consenting_user)

    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)
    home = client.get("/").content.decode()

    assert 'data-healthy="false"' in item
    assert f"not all of Gmail {gmail.address} (Sent mail)" in home


def test_a_quarantined_sent_email_replayed_is_read_again_as_sent_mail(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    sent_id = send(sandbox, gmail, "I'll send the poisoned draft tonight.")
    sandbox.fault("gemini", 400, match="poisoned draft", times=None)  # Gemini refuses this email every time
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    quarantined = ProcessedEmail.objects.get(message_id=sent_id)
    assert (quarantined.purpose, quarantined.outcome) == (SENT, ProcessedEmail.Outcome.QUARANTINED)
    sandbox.clear_faults("gemini")

    assert ledger_replay(entries=[quarantined]) == 1
    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert [(e.message_id, e.folder) for e in llm.seen] == [(sent_id, "sent")]  # as sent mail, once
    row = ProcessedEmail.objects.get(message_id=sent_id)
    assert row.purpose == SENT and row.outcome != ProcessedEmail.Outcome.QUARANTINED
    gmail.integration.refresh_from_db()
    assert gmail.integration.backfill_pending == []


def test_an_ask_sent_and_its_answer_received_read_in_one_run_close_the_waiting_item_in_time_order(
    box: GmailBox | OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    # The inbox is listed before Sent mail; read in that order, the answer would reach Gemini before the ask
    # it answers exists as a waiting item, and the item would stay open although answered.
    from tasks.models import Task

    run_extraction(consenting_user)
    asked_at = datetime.now(UTC) - timedelta(hours=2)
    sent_id = send(sandbox, box, "Could you send me the Q3 numbers?", sent_at=asked_at)
    if isinstance(box, GmailBox):
        sandbox.deliver_gmail_reply(
            box.address,
            sent_id,
            sender=SAM,
            body="Here are the Q3 numbers.",
            internal_date=asked_at + timedelta(hours=1),
        )
    else:
        sandbox.deliver_outlook_reply(
            box.address, sent_id, sender=SAM, body="Here are the Q3 numbers.", received_at=asked_at + timedelta(hours=1)
        )

    run, llm = run_recorded(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert [e.folder for e in llm.seen] == ["sent", "inbox"]  # the ask first, then its answer
    waiting = Task.objects.get(user=consenting_user)
    assert (waiting.kind, waiting.status) == (Task.Kind.WAITING, Task.Status.DONE)
    assert waiting.events.get().sentence == "Here are the Q3 numbers."
