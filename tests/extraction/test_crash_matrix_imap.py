"""The crash-point matrix for an IMAP mailbox (a real Dovecot), Inbox and Sent read in one run: killed with
SIGKILL at each named point of extraction/crashpoints.py (tests/extraction/test_crash_matrix.py says how), then
taken up by the reaper and a worker with no person involved. Neither folder's cursor is ever ahead of its
handled mail, every email is in the ledger once under its purpose, no task is made twice, a reply from Sent
closes its task once, and a clean rerun finds nothing to do."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task, TaskEvent
from tests.conftest import ImapBox, run_extraction
from tests.extraction.test_crash_matrix import (
    BOTH_CASES,
    DELIVERED,
    INBOX_MAIL,
    SENT_MAIL,
    Case,
    assert_every_close_once_with_its_history,
    assert_every_row_once_with_its_tasks,
    forker,  # noqa: F401 (the module's forking process)
    gemini_emails,
    killed_then_taken_up,
)
from tests.mail import ask, no_ask, rfc822
from tests.processes import Forker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def positions(box: ImapBox) -> tuple[str, str]:
    """Each folder's UIDVALIDITY and UIDNEXT now, as the cursors begin: what a cursor reads up to."""
    with box.dovecot.client(box.address) as client:
        inbox = client.folder_status("INBOX", ["UIDVALIDITY", "UIDNEXT"])
        sent = client.folder_status("Sent", ["UIDVALIDITY", "UIDNEXT"])
    return (
        f"{inbox[b'UIDVALIDITY']}:{inbox[b'UIDNEXT']}:",
        f"sent:{sent[b'UIDVALIDITY']}:{sent[b'UIDNEXT']}:",
    )


@pytest.mark.parametrize("case", BOTH_CASES)
def test_an_imap_run_reading_inbox_and_sent_killed_anywhere_moves_neither_cursor_ahead_and_loses_nothing(
    case: Case,
    imap: ImapBox,
    sandbox: SandboxClient,
    consenting_user: User,
    forker: Forker,  # noqa: F811
    broker_queue: Callable[[], int],
) -> None:
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # both cursors at a position
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)  # each email a second apart: the
    inbox: dict[str, int] = {}  # batches' layout is the same whatever the speed of the deliveries
    asking: set[str] = set()
    for k, (n, asks) in enumerate(INBOX_MAIL):
        message_id = imap.deliver(ask(n) if asks else no_ask(n), at=start + timedelta(seconds=k))
        inbox[message_id] = n
        if asks:
            asking.add(message_id)
    by_number = {n: message_id for message_id, n in inbox.items()}
    sent = {
        imap.deliver(
            rfc822(f"Project {n}", f"I'll send project {n} soon.", sender=imap.address),
            folder="Sent",
            at=start + timedelta(seconds=100 + k),
        ): n
        for k, n in enumerate(SENT_MAIL)
    }
    replies = {}
    for k, n in enumerate(DELIVERED):
        reply = rfc822("The report", "Here is the report you asked for.", sender=imap.address)
        reply = reply.replace("Subject: The report", f"Subject: The report\nIn-Reply-To: <{by_number[n]}>", 1)
        replies[imap.deliver(reply, folder="Sent", at=start + timedelta(seconds=200 + k))] = by_number[n]
    before = (imap.cursor, imap.sent_cursor)
    assert before[1] and before[1].startswith("sent:")
    sandbox.clear_requests()

    lost_batch = killed_then_taken_up(
        case, user=consenting_user, forker=forker, sandbox=sandbox, broker_queue=broker_queue,
        cursors=lambda: (imap.cursor, imap.sent_cursor),
    )  # fmt: skip

    # Every email handled once under its purpose, no duplicate, both cursors where the mail is --------------
    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).exists()
    inbox_rows = set(ProcessedEmail.objects.filter(purpose="task_extraction").values_list("message_id", flat=True))
    sent_rows = set(ProcessedEmail.objects.filter(purpose="sent_mail").values_list("message_id", flat=True))
    assert (inbox_rows, sent_rows) == (set(inbox), {*sent, *replies})
    assert_every_row_once_with_its_tasks()
    assert_every_close_once_with_its_history()
    closed = Task.objects.filter(status=Task.Status.DONE)
    assert set(closed.values_list("source_id", flat=True)) == set(replies.values())  # each delivered ask, once
    assert asking <= set(Task.objects.values_list("source_id", flat=True))
    assert not Task.objects.values("user", "source", "source_id", "title_key").annotate(n=Count("id")).filter(n__gt=1)
    inbox_now, sent_now = positions(imap)
    assert imap.cursor.startswith(inbox_now) and imap.sent_cursor.startswith(sent_now)  # type: ignore[union-attr]
    sent_counts = Counter(n for call in gemini_emails(sandbox) for n in call)
    assert set(sent_counts) == {*inbox.values(), *sent.values()}
    assert {n for n, times in sent_counts.items() if times > 1} <= lost_batch
    assert max(sent_counts.values()) <= 2
    assert set(TaskEvent.objects.values_list("message_id", flat=True)) == set(replies)

    # A clean rerun finds nothing to do and moves nothing ---------------------------------------------------
    fresh = run_extraction(consenting_user)
    assert fresh.status == ExtractionRun.Status.SUCCEEDED, fresh.error_message
    assert (fresh.emails_fetched, fresh.llm_calls) == (0, 0)
