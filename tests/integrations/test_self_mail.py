"""Issue 32 point 8, through full extraction runs: a note to oneself, as each service really stores it (Gmail: one
message carrying SENT and INBOX, listed by both cursors under one id; Outlook: a Sent Items item and an Inbox item
sharing a Message-ID), is the person's own mail and a task source like any other (tests/extraction/
test_own_address.py: their own mail goes on reaching Gemini). Read through the inbox its asks are theirs, through
Sent its promises; neither read duplicates a task, neither folder loses the note, and both cursors move past it."""

from __future__ import annotations

import pytest

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction

pytestmark = pytest.mark.django_db

NOTE = "Please renew the passport by Friday.\nI'll call the bank on Monday.\n"
INBOX = SyncCursor.Purpose.TASK_EXTRACTION
SENT = SyncCursor.Purpose.SENT_MAIL


@pytest.fixture(params=["gmail", "outlook"])
def box(request: pytest.FixtureRequest) -> GmailBox | OutlookBox:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def send_to_self(sandbox: SandboxClient, box: GmailBox | OutlookBox) -> tuple[str, str]:
    """Send the note to oneself; the ids it has in the inbox and in Sent (one id at Gmail, two at Outlook)."""
    if isinstance(box, GmailBox):
        sent = sandbox.send_gmail(box.address, to=[f"Me <{box.address}>"], subject="Note to self", body=NOTE)
        assert sent["labelIds"] == ["UNREAD", "SENT", "INBOX"]
        return str(sent["id"]), str(sent["id"])
    sent = sandbox.send_outlook(box.address, to=[box.address], subject="Note to self", body=NOTE)
    (inbox_copy,) = sent["delivered"]
    return str(inbox_copy["id"]), str(sent["id"])


def ledger() -> list[tuple[str, str, str]]:
    rows = ProcessedEmail.objects.order_by("purpose").values_list("purpose", "message_id", "outcome")
    return [(purpose, message_id, outcome) for purpose, message_id, outcome in rows]


def test_a_note_to_oneself_gives_its_ask_and_its_promise_once_each_and_both_cursors_move(
    box: GmailBox | OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)  # Sent mail's first read (nothing sent yet): both folders have a position
    inbox_before, sent_before = box.cursor, box.sent_cursor
    in_inbox, in_sent = send_to_self(sandbox, box)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    tasks = sorted(Task.objects.filter(user=consenting_user).values_list("kind", "title", "source_id"))
    assert tasks == [
        (Task.Kind.ASK, "Renew the passport by Friday", in_inbox),  # asked of the reader: theirs to do
        (Task.Kind.COMMITMENT, "Call the bank on Monday", in_sent),  # promised in their own sent mail
    ]  # and no second task for the ask, read again through Sent (a waiting item on oneself)
    assert run.tasks_created == 2
    assert ledger() == sorted([(SENT, in_sent, "tasks"), (INBOX, in_inbox, "tasks")])  # one row per folder
    assert box.cursor != inbox_before and box.sent_cursor != sent_before

    again = run_extraction(consenting_user)
    assert again.status == ExtractionRun.Status.SUCCEEDED, again.error_message
    assert (again.emails_fetched, again.llm_calls, again.tasks_created) == (0, 0, 0)
    assert len(ledger()) == 2 and Task.objects.filter(user=consenting_user).count() == 2


def test_gmail_a_note_to_oneself_is_read_once_per_folder_from_one_history_record(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run_extraction(consenting_user)
    note, _ = send_to_self(sandbox, gmail)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert (run.emails_fetched, run.emails_sent_to_llm) == (2, 2)  # the one message, once for each folder
    reads = [r for r in sandbox.requests("gmail") if r.get("batch_part") and note in r["path"]]
    assert len(reads) == 2  # one messages.get per folder that listed it; nothing else was there to read
    assert sorted(ProcessedEmail.objects.values_list("purpose", "message_id")) == sorted([(INBOX, note), (SENT, note)])


LABELLED_NOTES = ["Note: please renew the passport by Friday.\n", "Grace, please renew the passport.\n"]


@pytest.mark.parametrize("note", LABELLED_NOTES)
def test_a_note_to_oneself_whose_ask_reads_otherwise_through_sent_is_still_one_task(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, note: str
) -> None:
    """Read through Sent, the note's ask is a waiting item on its writer, under another title than the inbox
    read's ask (a label or a name before it): nobody waits on themselves, so it is not made."""
    run_extraction(consenting_user)
    sandbox.send_gmail(gmail.address, to=[f"Me <{gmail.address}>"], subject="Note to self", body=note)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    kinds = list(Task.objects.filter(user=consenting_user).values_list("kind", flat=True))
    assert kinds == [Task.Kind.ASK]
    assert not Task.objects.filter(user=consenting_user, waiting_on__icontains=gmail.address).exists()
