"""A message read that answers 404 is a deletion only when the provider's own record says so, or when a read
in a later run (not the same second) still fails (DESIGN §6). Until then it is a fetch failure of that
message: counted across runs, set aside after EXTRACTION_FETCH_ATTEMPTS, its mailbox's cursor held."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionRun, FetchFailure, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db


def gmail_reads(sandbox: SandboxClient, message_id: str) -> list[dict]:
    return [r for r in sandbox.requests("gmail") if r["path"] == f"/gmail/v1/users/me/messages/{message_id}"]


def a_minute_passes() -> None:
    """What a later run sees of the failed reads before it: they are a minute old."""
    FetchFailure.objects.update(updated_at=timezone.now() - timedelta(minutes=1))


def test_gmail_two_quick_404s_of_a_message_are_not_a_deletion(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(3)]
    sandbox.fault("gmail", 404, route=f"^GET /gmail/v1/users/me/messages/{ids[1]}\\?", times=2)
    before = gmail.cursor

    first = run_extraction(consenting_user)

    assert [r["status"] for r in gmail_reads(sandbox, ids[1])] == [404, 404]  # read twice in the same second
    assert first.status == ExtractionRun.Status.SUCCEEDED
    assert first.mailboxes[str(gmail.integration.pk)]["unread"] == 1
    assert not ProcessedEmail.objects.filter(message_id=ids[1]).exists()  # not recorded as deleted
    assert gmail.cursor == before  # the message is not handled: the cursor waits for it

    second = run_extraction(consenting_user)

    assert second.status == ExtractionRun.Status.SUCCEEDED
    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
    assert gmail.cursor == gmail.history_id()


def test_outlook_two_quick_404s_of_a_message_are_not_a_deletion(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [outlook.deliver(ask(n)) for n in range(3)]
    sandbox.fault("graph", 404, route=f"^GET /v1.0/me/messages/{ids[1]}\\?", times=2)
    before = outlook.cursor

    first = run_extraction(consenting_user)

    assert first.status == ExtractionRun.Status.SUCCEEDED
    assert first.mailboxes[str(outlook.integration.pk)]["unread"] == 1
    assert not ProcessedEmail.objects.filter(message_id=ids[1]).exists()
    assert outlook.cursor == before

    run_extraction(consenting_user)

    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
    assert outlook.cursor != before


def test_a_message_still_missing_in_a_later_run_is_recorded_as_deleted(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(3)]
    sandbox.fault("gmail", 404, route=f"^GET /gmail/v1/users/me/messages/{ids[1]}\\?", times=None)
    before = gmail.cursor

    run_extraction(consenting_user)
    again = run_extraction(consenting_user)  # at once: a fault may last that long

    assert again.mailboxes[str(gmail.integration.pk)]["unread"] == 1
    assert gmail.cursor == before
    assert FetchFailure.objects.get(message_id=ids[1]).attempts == 2

    a_minute_passes()
    later = run_extraction(consenting_user)

    assert later.status == ExtractionRun.Status.SUCCEEDED
    assert later.error_code == ""
    entry = ProcessedEmail.objects.get(message_id=ids[1])
    assert (entry.outcome, entry.last_error) == ("no_tasks", "deleted")
    assert later.emails_quarantined == 0  # a deletion is not mail set aside for the person
    assert gmail.cursor == gmail.history_id()
    assert not FetchFailure.objects.exists()


def test_gmail_mail_deleted_by_the_person_is_known_from_history_without_reading_it(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(3)]
    sandbox.delete_gmail(gmail.address, [ids[1]])

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert run.error_code == ""
    assert gmail_reads(sandbox, ids[1]) == []  # history said it was deleted: no read
    assert set(Task.objects.values_list("source_id", flat=True)) == {ids[0], ids[2]}
    assert gmail.cursor == gmail.history_id()
