"""One run over Gmail and Outlook together: mixed batches, and every cursor committed in one step."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, connect_gmail, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db


@pytest.fixture
def both(sandbox: SandboxClient, consenting_user: User, outlook: OutlookBox) -> tuple[GmailBox, OutlookBox]:
    gmail = connect_gmail(sandbox, consenting_user, "person@gmail.example.com")
    sandbox.clear_requests()
    return gmail, outlook


def gemini_prompts(sandbox: SandboxClient) -> list[str]:
    return [
        json.loads(r["body"])["contents"][0]["parts"][0]["text"]
        for r in sandbox.requests("gemini")
        if r["method"] == "POST"
    ]


def minutes_ago(n: int, seconds: int = 0) -> datetime:
    """A run reads its mailboxes' mail oldest first across them: each message is dated (Graph to the second), so
    that the Outlook mail is later than all the Gmail mail, and the batches' layout is known however slow the
    deliveries are."""
    return timezone.now().replace(microsecond=0) - timedelta(minutes=n) + timedelta(seconds=seconds)


def test_one_run_reads_both_mailboxes_and_moves_both_cursors(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    gmail_ids = [gmail.deliver(ask(n), at=minutes_ago(10, n)) for n in range(12)]
    outlook_ids = [outlook.deliver(ask(100 + n), at=minutes_ago(5, n)) for n in range(9)]
    gmail_before, outlook_before = gmail.cursor, outlook.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    prompts = gemini_prompts(sandbox)
    # batches of ten, sent in parallel: they may arrive in any order
    assert sorted((p.count('<email id="email_') for p in prompts), reverse=True) == [10, 10, 1]
    read = [n for p in prompts for n in [*range(12), *range(100, 109)] if f"project {n} " in p]
    assert sorted(read) == [*range(12), *range(100, 109)]  # each email once, in batches mixing both mailboxes
    assert set(Task.objects.filter(integration=gmail.integration).values_list("source_id", flat=True)) == set(gmail_ids)
    for n, message_id in enumerate(outlook_ids):  # each task belongs to its own email
        assert Task.objects.get(source_id=message_id).title == f"Send the report for project {100 + n} by Friday"
    assert set(Task.objects.filter(integration=outlook.integration).values_list("source_id", flat=True)) == set(
        outlook_ids
    )
    assert gmail.cursor == gmail.history_id() != gmail_before
    assert outlook.cursor != outlook_before and "deltatoken" in outlook.cursor.lower()
    cursors = SyncCursor.objects.filter(integration__user=consenting_user)
    assert {c.updated_at for c in cursors} == {cursors[0].updated_at}  # one statement time: one transaction
    outlook_task = Task.objects.filter(integration=outlook.integration).first()
    assert outlook_task is not None and outlook_task.email_link.startswith("https://outlook.office365.com/")


def test_gemini_failing_on_the_last_batch_moves_neither_cursor(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    for n in range(12):
        gmail.deliver(ask(n), at=minutes_ago(10, n))
    for n in range(9):
        outlook.deliver(ask(100 + n), at=minutes_ago(5, n))
    gmail_before, outlook_before = gmail.cursor, outlook.cursor
    # Gemini's quota runs out at batch 3 (the last email, alone there): the same for every email.
    sandbox.fault("gemini", 429, times=None, match="project 108 ", headers={"Retry-After": "0"})

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.FAILED
    assert (gmail.cursor, outlook.cursor) == (gmail_before, outlook_before)
    assert Task.objects.count() == 20  # the two batches before are kept, and the ledger says so
    assert ProcessedEmail.objects.count() == 20


def test_one_email_that_makes_gemini_fail_blocks_neither_mailbox(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    for n in range(12):
        gmail.deliver(ask(n))
    poison = outlook.deliver(ask(104))
    for n in range(5):
        outlook.deliver(ask(110 + n))
    sandbox.fault("gemini", 500, times=None, match="project 104 ")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert Task.objects.count() == 17
    assert ProcessedEmail.objects.get(outcome="quarantined").message_id == poison
    assert gmail.cursor == gmail.history_id()
    assert "deltatoken" in outlook.cursor.lower()


def test_outlook_messages_marked_read_come_back_but_are_not_read_again(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [outlook.deliver(ask(n)) for n in range(5)]
    run_extraction(consenting_user)
    sandbox.mark_outlook_read(outlook.address, ids)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert (run.emails_fetched, run.emails_already_done) == (5, 5)  # they came back in the delta
    assert gemini_prompts(sandbox) == []
    assert Task.objects.count() == 5


def test_an_expired_outlook_delta_link_is_resynced_by_itself_and_gmail_is_still_read(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    gmail.deliver(ask(1))
    outlook_ids = [outlook.deliver(ask(2 + n)) for n in range(12)]
    outlook_before = outlook.cursor
    sandbox.expire_outlook_delta(outlook.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert set(Task.objects.filter(integration=outlook.integration).values_list("source_id", flat=True)) == set(
        outlook_ids
    )
    cursor = SyncCursor.objects.get(integration=outlook.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION)
    assert cursor.value != outlook_before and "deltatoken" in cursor.value.lower()
    assert cursor.generation == 2
    assert gmail.cursor == gmail.history_id()
    outlook.integration.refresh_from_db()
    assert outlook.integration.status == "active"
    assert run.mailboxes[str(outlook.integration.pk)]["resync"] == "expired"


def test_an_outlook_message_moved_into_the_inbox_becomes_a_task_whatever_its_received_time(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from datetime import UTC, datetime, timedelta

    old = sandbox.deliver_outlook(
        outlook.address,
        subject="Old claim",
        body="Please file the insurance claim.",
        received_at=datetime.now(UTC) - timedelta(days=60),
        folder="archive",
    )["id"]
    sandbox.move_outlook(outlook.address, [old], "inbox")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.get(source_id=old).title == "File the insurance claim"


def test_a_gmail_message_labelled_into_the_inbox_becomes_a_task(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, _ = both
    spam = sandbox.deliver(gmail.address, ask(7), labels=["SPAM"])["id"]
    run_extraction(consenting_user)
    assert not Task.objects.exists()

    sandbox.modify_labels(gmail.address, spam, add=["INBOX"], remove=["SPAM"])  # "Not spam"
    run_extraction(consenting_user)

    assert Task.objects.get(source_id=spam).title == "Send the report for project 7 by Friday"


def test_mail_arriving_after_an_outlook_connect_is_all_read_whatever_the_backfill_bound(
    sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.conftest import connect_outlook

    settings.MAIL_BACKFILL_MAX_MESSAGES = 0  # no backfill of mail from before the connect
    sandbox.create_outlook_mailbox("late@outlook.example.com")
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    sandbox.deliver_outlook("late@outlook.example.com", ask(1), received_at=an_hour_ago)  # before: not owed
    box = connect_outlook(sandbox, consenting_user, "late@outlook.example.com")
    now = datetime.now(UTC)
    after = [  # after the connect, before any run
        sandbox.deliver_outlook(box.address, ask(n), received_at=now)["id"] for n in range(2, 6)
    ]

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert set(Task.objects.values_list("source_id", flat=True)) == set(after)


def test_a_refused_outlook_refresh_leaves_it_out_and_gmail_is_still_read(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    gmail.deliver(ask(1))
    outlook.deliver(ask(2))
    outlook_before = outlook.cursor
    sandbox.revoke_microsoft(address=outlook.address)
    sandbox.expire_microsoft_token(address=outlook.address)

    run = run_extraction(consenting_user)

    outlook.integration.refresh_from_db()
    assert outlook.integration.status == "needs_reauth"
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert run.error_code == "partial"
    assert f"Outlook {outlook.address} was left out" in run.error_message
    report = run.mailboxes[str(outlook.integration.pk)]
    assert (report["status"], report["error_code"], report["after"]) == ("failed", "provider_auth", None)
    assert outlook.cursor == outlook_before
    assert gmail.cursor == gmail.history_id()
    assert Task.objects.filter(integration=gmail.integration).count() == 1
    assert not Task.objects.filter(integration=outlook.integration).exists()


def test_the_first_outlook_run_reads_recent_mail_only(sandbox: SandboxClient, consenting_user: User, settings) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.conftest import connect_outlook

    sandbox.create_outlook_mailbox("new@outlook.example.com")
    old = datetime.now(UTC) - timedelta(days=settings.MAIL_BACKFILL_DAYS + 3)
    sandbox.deliver_outlook("new@outlook.example.com", ask(1), received_at=old)
    recent = sandbox.deliver_outlook("new@outlook.example.com", ask(2))["id"]
    connect_outlook(sandbox, consenting_user, "new@outlook.example.com")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert list(Task.objects.values_list("source_id", flat=True)) == [recent]


def test_outlook_tokens_are_refreshed_silently_and_saved_encrypted(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from integrations.services import integration_credentials

    outlook.deliver(ask(1))
    before = outlook.integration.credentials_encrypted
    sandbox.expire_microsoft_token(address=outlook.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    outlook.integration.refresh_from_db()
    assert outlook.integration.credentials_encrypted != before
    cache = integration_credentials(integration=outlook.integration)["msal_cache"]
    assert "RefreshToken" in cache
    token_requests = [r for r in sandbox.requests("microsoft") if r["path"].endswith("/token")]
    assert len(token_requests) == 1
    refresh_tokens = json.loads(cache)["RefreshToken"].values()
    assert all(t["secret"] not in outlook.integration.credentials_encrypted for t in refresh_tokens)


def test_the_first_outlook_read_is_bounded_to_the_newest_messages(
    sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.conftest import connect_outlook

    settings.MAIL_BACKFILL_MAX_MESSAGES = 2
    sandbox.create_outlook_mailbox("busy@outlook.example.com")
    now = datetime.now(UTC)
    ids = [
        sandbox.deliver_outlook("busy@outlook.example.com", ask(n), received_at=now - timedelta(hours=5 - n))["id"]
        for n in range(4)
    ]
    connect_outlook(sandbox, consenting_user, "busy@outlook.example.com")

    run = run_extraction(consenting_user)

    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids[-2:])
    assert run.emails_fetched == 2


def test_a_mailbox_the_provider_asked_to_wait_is_left_out_until_then(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from integrations.models import Integration

    gmail, outlook = both
    gmail.deliver(ask(1))
    outlook.deliver(ask(2))
    Integration.objects.filter(pk=outlook.integration.pk).update(retry_after=timezone.now() + timedelta(minutes=5))
    outlook_before = outlook.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert run.mailboxes[str(outlook.integration.pk)]["error_code"] == "provider_rate_limited"
    assert outlook.cursor == outlook_before
    assert [r for r in sandbox.requests("graph")] == []
    assert Task.objects.filter(integration=gmail.integration).count() == 1


def test_mail_in_both_mailboxes_in_one_run_is_read_once(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    mail = [ask(n) for n in range(30)]
    gmail_ids = [gmail.deliver(raw) for raw in mail]  # the same thirty messages reach both mailboxes
    outlook_ids = [outlook.deliver(raw) for raw in mail]

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    prompts = gemini_prompts(sandbox)
    # Thirty emails read once, not sixty: 3 calls, or 4 when a copy read in time order between the others
    # took a batch's place (it rides on its original and is not sent).
    assert len(prompts) in (3, 4)
    read = [n for p in prompts for n in range(30) if f"project {n} " in p]
    assert sorted(read) == list(range(30))
    assert (run.emails_sent_to_llm, run.emails_already_done, run.tasks_created) == (30, 30, 30)
    for n in range(30):  # one task per email, reachable through both mailboxes
        task = Task.objects.get(user=consenting_user, title__contains=f"project {n} ")
        assert {link.message_id for link in task.links.all()} == {gmail_ids[n], outlook_ids[n]}
    handled = set(ProcessedEmail.objects.values_list("message_id", flat=True))
    assert handled == set(gmail_ids) | set(outlook_ids)
    assert gmail.cursor == gmail.history_id()


def test_an_email_in_both_mailboxes_that_makes_gemini_fail_is_set_aside_in_both(
    both: tuple[GmailBox, OutlookBox], sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail, outlook = both
    mail = [ask(n) for n in range(4)]
    gmail_ids = [gmail.deliver(raw) for raw in mail]
    outlook_ids = [outlook.deliver(raw) for raw in mail]
    sandbox.fault("gemini", 500, times=None, match="project 2 ")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    set_aside = set(ProcessedEmail.objects.filter(outcome="quarantined").values_list("message_id", flat=True))
    assert set_aside == {gmail_ids[2], outlook_ids[2]}  # each mailbox shows it, each may replay it
    assert run.emails_quarantined == 2
    assert Task.objects.count() == 3
    assert ProcessedEmail.objects.count() == 8
    assert gmail.cursor == gmail.history_id()
