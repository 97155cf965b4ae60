"""A resync (an expired cursor, DESIGN §6) reads what is in the inbox *now* and what the ledger does not hold,
not only what was received since the last successful read: old mail moved into the inbox before the cursor
expired becomes a task, while old inbox mail that was never owed (it was there before the mailbox was
connected, beyond the connect-time backfill) is neither read nor counted as "not read"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, connect_gmail, connect_outlook, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db

THREE_DAYS_AGO = datetime.now(UTC) - timedelta(days=3)


def gemini_calls(sandbox: SandboxClient) -> int:
    return len([r for r in sandbox.requests("gemini") if r["method"] == "POST"])


def test_gmail_mail_unarchived_before_the_history_expired_becomes_a_task(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    old = sandbox.deliver(gmail.address, ask(7), labels=["Label_7"], internal_date=THREE_DAYS_AGO)["id"]
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # not in the inbox yet
    sandbox.modify_labels(gmail.address, old, add=["INBOX"])  # un-archived after that read
    sandbox.expire_history(gmail.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    report = run.mailboxes[str(gmail.integration.pk)]
    assert report["resync"] == "expired"
    assert list(Task.objects.values_list("source_id", flat=True)) == [old]
    assert ProcessedEmail.objects.get(message_id=old).outcome == "tasks"
    assert report["not_read"] == 0
    assert (
        SyncCursor.objects.get(integration=gmail.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION).value
        == gmail.history_id()
    )


def test_outlook_mail_moved_into_the_inbox_before_the_delta_expired_becomes_a_task(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    old = sandbox.deliver_outlook(outlook.address, ask(8), folder="archive", received_at=THREE_DAYS_AGO)["id"]
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # not in the inbox yet
    sandbox.move_outlook(outlook.address, [old], "inbox")
    sandbox.expire_outlook_delta(outlook.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    report = run.mailboxes[str(outlook.integration.pk)]
    assert report["resync"] == "expired"
    assert list(Task.objects.values_list("source_id", flat=True)) == [old]
    assert report["not_read"] == 0


def test_old_inbox_mail_from_before_the_connection_is_not_read_by_a_resync(
    sandbox: SandboxClient, consenting_user: User
) -> None:
    address = "keeper@example.com"
    sandbox.create_mailbox(address)
    month_ago = datetime.now(UTC) - timedelta(days=30)  # beyond the connect-time backfill's days
    for n in range(5):
        sandbox.deliver(address, ask(n), internal_date=month_ago + timedelta(minutes=n))
    gmail = connect_gmail(sandbox, consenting_user, address)
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    new = gmail.deliver(ask(50))
    sandbox.expire_history(address)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert list(Task.objects.values_list("source_id", flat=True)) == [new]  # never owed: not read now
    assert gemini_calls(sandbox) == 1
    assert run.mailboxes[str(gmail.integration.pk)]["not_read"] == 0  # and not counted as not read


def test_old_outlook_inbox_mail_from_before_the_connection_is_not_read_by_a_resync(
    sandbox: SandboxClient, consenting_user: User
) -> None:
    address = "keeper@outlook.example.com"
    sandbox.create_outlook_mailbox(address)
    month_ago = datetime.now(UTC) - timedelta(days=30)
    for n in range(5):
        sandbox.deliver_outlook(address, ask(n), received_at=month_ago + timedelta(minutes=n))
    outlook = connect_outlook(sandbox, consenting_user, address)
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    new = outlook.deliver(ask(50))
    sandbox.expire_outlook_delta(address)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert list(Task.objects.values_list("source_id", flat=True)) == [new]
    assert gemini_calls(sandbox) == 1
    assert run.mailboxes[str(outlook.integration.pk)]["not_read"] == 0


def test_a_resync_over_its_bound_counts_the_moved_in_mail_it_did_not_read(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_RESYNC_MAX_MESSAGES = 3
    old = [
        sandbox.deliver(gmail.address, ask(n), labels=["Label_7"], internal_date=THREE_DAYS_AGO)["id"] for n in range(5)
    ]
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    for message_id in old:
        sandbox.modify_labels(gmail.address, message_id, add=["INBOX"])
    sandbox.expire_history(gmail.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert Task.objects.count() == 3
    report = run.mailboxes[str(gmail.integration.pk)]
    assert report["not_read"] == 2
    assert "2 older emails" in report["note"]
    gmail.integration.refresh_from_db()
    assert gmail.integration.resync_not_read == 2


def test_a_resync_of_an_inbox_already_read_reads_nothing_and_looks_at_nothing(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(30)]
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    sandbox.modify_labels(gmail.address, ids[3], add=["STARRED"])  # history moves on, then is forgotten
    sandbox.expire_history(gmail.address)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.mailboxes[str(gmail.integration.pk)]["resync"] == "expired"
    reads = [r for r in sandbox.requests("gmail") if "/messages/" in r["path"]]
    assert reads == []  # the ledger holds the whole inbox: no message is looked at, none read
    assert gemini_calls(sandbox) == 0
    assert Task.objects.count() == 30
