"""Polling by need (issue 24): what the scan finds due is an idle check, not a run.

What must hold: a mailbox with nothing new costs one provider call per cursor and writes no run row, only
when it was checked; one with mail gets a real run; no consent, no provider call; a mailbox whose push
works is swept every EXTRACTION_SWEEP_MINUTES, one without, or whose push missed mail, every
EXTRACTION_SCHEDULE_MINUTES; one that rang and was not read since gets a run at once; a throttled mailbox
waits; the scan sends one broker message per chunk of due mailboxes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from accounts.models import AIConsent, User
from extraction.idlecheck import mailboxes_idle_check
from extraction.jobs import extraction_idle_check_job, extraction_schedule_job
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.scheduling import CHECK_CHUNK, extraction_scan, mailboxes_claim_due
from integrations.models import FIRST_READ, Integration, PushChannel, SyncCursor
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.extraction.test_scheduling import _people_due
from tests.mail import ask

pytestmark = pytest.mark.django_db


def _early(interval: timedelta, *, poll: bool = False) -> timedelta:
    """When a mailbox claimed now is due again: one interval on, less one scan period (and for a poll, one
    without push, less the time its reading is allowed)."""
    allowance = django_settings.EXTRACTION_READ_ALLOWANCE_SECONDS if poll else 0
    return interval - timedelta(seconds=django_settings.EXTRACTION_SCAN_SECONDS + allowance)


def _read_once(box: GmailBox | OutlookBox, user: User) -> None:
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    box.sandbox.clear_requests()


def _provider_requests(sandbox: SandboxClient, service: str) -> list[str]:
    return [r["path"] for r in sandbox.requests(service) if "/token" not in r["path"]]


def test_a_gmail_mailbox_with_nothing_new_costs_one_history_call_for_both_folders_and_writes_no_run(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    _read_once(gmail, consenting_user)
    assert gmail.integration.cursors.count() == 2  # the inbox's and Sent mail's (consent covers Sent mail)
    runs = ExtractionRun.objects.count()

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    # One history listing over every label answers for both cursors (Gmail's history ids are the mailbox's)
    assert (result.quiet, result.calls, result.runs_queued) == (1, 1, 0)
    assert [p.rsplit("/", 1)[-1] for p in _provider_requests(sandbox, "gmail")] == ["history"]
    assert ExtractionRun.objects.count() == runs
    gmail.integration.refresh_from_db()
    assert gmail.integration.checked_at is not None


@pytest.mark.parametrize(
    ("labels", "new"),
    [(["SENT"], True), (["INBOX"], True), (["DRAFT"], False), (["SPAM"], False)],
)
def test_one_gmail_listing_tells_mail_sent_or_received_from_changes_to_other_labels(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, labels: list[str], new: bool
) -> None:
    _read_once(gmail, consenting_user)
    sandbox.deliver(gmail.address, ask(3), labels=labels)

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert (result.with_mail, result.quiet, result.calls) == ((1, 0, 1) if new else (0, 1, 1))


def test_an_outlook_mailbox_with_nothing_new_costs_one_batch_of_both_deltas_and_writes_no_run(
    sandbox: SandboxClient, outlook: OutlookBox, consenting_user: User
) -> None:
    _read_once(outlook, consenting_user)  # the first run turns the first queries into delta links
    assert outlook.integration.cursors.count() == 2
    runs = ExtractionRun.objects.count()

    result = mailboxes_idle_check(integration_ids=[outlook.integration.pk])

    assert (result.quiet, result.calls, result.runs_queued) == (1, 1, 0)
    requests = [r for r in sandbox.requests("graph") if "/token" not in r["path"]]
    # One HTTP request, the $batch; its two parts (logged apart, as Graph counts them) are the two deltas
    assert [r["path"] for r in requests if not r.get("batch_part")] == ["/v1.0/$batch"]
    parts = sorted(r["path"] for r in requests if r.get("batch_part"))
    assert len(parts) == 2 and all(p.endswith("/messages/delta") for p in parts), parts
    assert ExtractionRun.objects.count() == runs


@pytest.mark.parametrize("folder", ["inbox", "sentitems"])
def test_outlook_mail_received_or_sent_is_found_by_the_batch_of_deltas(
    sandbox: SandboxClient, outlook: OutlookBox, consenting_user: User, folder: str
) -> None:
    _read_once(outlook, consenting_user)
    if folder == "inbox":
        outlook.deliver(ask(4))
    else:
        sandbox.send_outlook(outlook.address, to=["sam@example.com"], body="I will send the figures on Friday.")

    result = mailboxes_idle_check(integration_ids=[outlook.integration.pk])

    assert (result.with_mail, result.calls) == (1, 1)


def test_an_outlook_delta_expired_inside_the_batch_asks_for_a_run_that_resyncs(
    sandbox: SandboxClient, outlook: OutlookBox, consenting_user: User
) -> None:
    _read_once(outlook, consenting_user)
    sandbox.expire_outlook_delta(outlook.address)  # each part answers 410 SyncStateNotFound

    result = mailboxes_idle_check(integration_ids=[outlook.integration.pk])

    assert (result.with_mail, result.failed) == (1, 0)


def test_an_outlook_delta_throttled_inside_the_batch_is_asked_again_on_its_own(
    sandbox: SandboxClient, outlook: OutlookBox, consenting_user: User
) -> None:
    _read_once(outlook, consenting_user)
    sandbox.fault("graph", 429, route="/messages/delta", headers={"Retry-After": "0.05"}, times=1)

    result = mailboxes_idle_check(integration_ids=[outlook.integration.pk])

    assert (result.quiet, result.failed) == (1, 0)
    paths = [r["path"] for r in sandbox.requests("graph") if "/token" not in r["path"] and not r.get("batch_part")]
    assert paths[0] == "/v1.0/$batch" and len(paths) == 2 and paths[1].endswith("/messages/delta"), paths


def test_a_mailbox_with_new_mail_gets_a_real_run(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    _read_once(gmail, consenting_user)
    gmail.deliver(ask(1))

    with django_capture_on_commit_callbacks(execute=True):
        result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert (result.with_mail, result.runs_queued) == (1, 1)
    run = ExtractionRun.objects.get(status=ExtractionRun.Status.QUEUED)
    assert run.trigger == ExtractionRun.Trigger.SCHEDULE
    assert broker_queue() == 1


def test_without_consent_an_idle_check_asks_no_provider(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    _read_once(gmail, consenting_user)
    AIConsent.objects.filter(user=consenting_user).update(revoked_at=timezone.now())

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert (result.skipped, result.calls) == (1, 0)
    assert sandbox.requests("gmail") == []


def test_a_throttled_check_makes_the_mailbox_wait_and_the_scan_leaves_it_until_then(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    _read_once(gmail, consenting_user)
    sandbox.fault("gmail", 429, route="history", headers={"Retry-After": "120"}, times=None)

    mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    gmail.integration.refresh_from_db()
    assert gmail.integration.retry_after is not None
    assert gmail.integration.retry_after > timezone.now() + timedelta(seconds=100)
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=timezone.now())
    (claimed,) = mailboxes_claim_due()
    assert claimed.throttled and not claimed.to_check
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == gmail.integration.retry_after


def _live_channel(integration: Integration, *, rung: bool = True) -> None:
    """A push channel opened a minute ago, that has rung since (or not)."""
    opened = timezone.now() - timedelta(minutes=1)
    channel = PushChannel.objects.create(
        integration=integration, external_id="projects/p/topics/t", expires_at=opened + timedelta(days=7)
    )
    PushChannel.objects.filter(pk=channel.pk).update(created_at=opened, updated_at=opened)
    if rung:
        Integration.objects.filter(pk=integration.pk).update(notified_at=opened + timedelta(seconds=1))
        run = run_extraction(integration.user)  # the ring's run read it
        assert run.status == ExtractionRun.Status.SUCCEEDED


def test_healthy_push_is_swept_every_sweep_interval_and_without_push_every_poll_interval(
    gmail: GmailBox, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_SWEEP_MINUTES, settings.EXTRACTION_SCHEDULE_MINUTES = 60, 10
    _read_once(gmail, consenting_user)
    now = timezone.now() + timedelta(minutes=61)  # past both intervals since the read

    (claimed,) = mailboxes_claim_due(now=now)  # no push channel
    assert claimed.to_check
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == now + _early(timedelta(minutes=10), poll=True)

    _live_channel(gmail.integration, rung=False)  # a channel that never rang: perhaps dropped from the start
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=now)
    mailboxes_claim_due(now=now)
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == now + _early(timedelta(minutes=10), poll=True)

    PushChannel.objects.all().delete()
    _live_channel(gmail.integration)  # it rang since it was opened
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=now)
    mailboxes_claim_due(now=now)
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == now + _early(timedelta(minutes=60))


@pytest.mark.parametrize("read_after_claim_s", [None, 5], ids=["quiet-check", "run-after-check"])
def test_without_push_mail_becomes_tasks_within_one_poll_interval_as_the_next_look_leaves_time_to_read_it(
    gmail: GmailBox, consenting_user: User, settings, read_after_claim_s: int | None
) -> None:
    """Seen in benchmarks/freshness.py --push-dropped: an email 134 s old with a 120 s poll interval. A mailbox
    claimed at a scan was due again one interval on, and the scan of that moment, a few milliseconds earlier in
    its period, missed it; when its check had found mail, the run read it a few seconds after the claim, and
    the scans one interval on found it "read recently" and passed it by. Then, looked at again within one
    interval, mail that came just after a look still waited that interval and then its reading (the check's
    job, the run, its Gemini calls): 134 s. Here scans come every 15 s, each a hair earlier in its period: the
    last one within one interval less the reading's allowance (EXTRACTION_READ_ALLOWANCE_SECONDS) of the
    mailbox's last look claims it, so an email that came just after that look is a task within the interval."""
    settings.EXTRACTION_SCHEDULE_MINUTES, settings.EXTRACTION_SCAN_SECONDS = 2, 15
    settings.EXTRACTION_READ_ALLOWANCE_SECONDS = 30
    _read_once(gmail, consenting_user)
    claimed_at = timezone.now() + timedelta(minutes=61)
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=claimed_at)
    (first,) = mailboxes_claim_due(now=claimed_at)
    assert first.to_check
    looked_at = claimed_at
    if read_after_claim_s is not None:  # the check found mail and its run read the mailbox
        looked_at = claimed_at + timedelta(seconds=read_after_claim_s)
        Integration.objects.filter(pk=gmail.integration.pk).update(last_success_at=looked_at)

    scans = (claimed_at + timedelta(seconds=15 * n, milliseconds=-5) for n in range(1, 20))
    checked_at = next(at for at in scans if any(c.to_check for c in mailboxes_claim_due(now=at)))

    next_look_by = looked_at + timedelta(minutes=2) - timedelta(seconds=30)
    assert next_look_by - timedelta(seconds=15) < checked_at <= next_look_by


def test_a_mailbox_counts_as_read_from_when_its_run_listed_it_not_from_when_the_run_ended(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    """Mail that came while the run was reading (after its listing) is not in it: the next look is counted from
    the listing. Counted from the run's end, it came a run's length late (the freshness benchmark's 134 s)."""
    gmail.deliver(ask(1))
    sandbox.set_gemini_latency(400)

    run = run_extraction(consenting_user)

    gmail.integration.refresh_from_db()
    read_at = gmail.integration.last_success_at
    assert run.status == ExtractionRun.Status.SUCCEEDED and run.tasks_created == 1
    assert run.started_at is not None and run.finished_at is not None and read_at is not None
    assert run.started_at <= read_at
    assert run.finished_at - read_at >= timedelta(milliseconds=400)  # the Gemini call came after the listing


def test_a_mailbox_read_within_its_interval_is_not_asked_again(gmail: GmailBox, consenting_user: User) -> None:
    _read_once(gmail, consenting_user)
    gmail.integration.refresh_from_db()
    read_at = gmail.integration.last_success_at
    assert read_at is not None

    (claimed,) = mailboxes_claim_due(now=read_at + timedelta(minutes=3))

    assert claimed.read_recently and not claimed.to_check
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == read_at + _early(timedelta(minutes=10), poll=True)


def test_push_that_missed_mail_counts_as_no_push_until_it_rings_again(
    gmail: GmailBox, consenting_user: User, settings, django_capture_on_commit_callbacks
) -> None:
    _read_once(gmail, consenting_user)
    _live_channel(gmail.integration)
    gmail.deliver(ask(1))  # no ring came for it

    with django_capture_on_commit_callbacks(execute=True):
        mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    gmail.integration.refresh_from_db()
    assert gmail.integration.push_missed_at is not None
    now = timezone.now() + timedelta(minutes=61)
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=now)
    mailboxes_claim_due(now=now)
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == now + _early(
        timedelta(minutes=settings.EXTRACTION_SCHEDULE_MINUTES), poll=True
    )

    Integration.objects.filter(pk=gmail.integration.pk).update(notified_at=now, next_check_at=now)  # it rang
    mailboxes_claim_due(now=now)
    gmail.integration.refresh_from_db()
    assert gmail.integration.next_check_at == now + _early(timedelta(minutes=settings.EXTRACTION_SWEEP_MINUTES))


def test_a_mailbox_that_rang_and_was_not_read_since_gets_a_run_from_the_scan_at_once(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    _read_once(gmail, consenting_user)
    gmail.integration.refresh_from_db()
    rung = timezone.now()
    Integration.objects.filter(pk=gmail.integration.pk).update(notified_at=rung, next_check_at=rung)

    with django_capture_on_commit_callbacks(execute=True):
        result = extraction_scan(check_job=extraction_idle_check_job)

    assert (result.claimed, result.runs_queued, result.jobs_sent) == (1, 1, 0)
    assert broker_queue() == 1
    assert ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).count() == 1


def test_the_scan_sends_one_job_per_chunk_of_due_mailboxes_and_claims_each_once(
    redis_pushes: list[int], broker_queue: Callable[[], int]
) -> None:
    _people_due(250)

    first = extraction_schedule_job()
    second = extraction_schedule_job()  # a second beat, or a scan overlapping the first

    assert (first, second) == (250, 0)
    assert broker_queue() == -(-250 // CHECK_CHUNK) == 3
    assert redis_pushes == [3]  # one round trip for the chunk's jobs
    assert ExtractionRun.objects.count() == 0


def test_a_person_whose_consent_is_to_an_earlier_text_is_still_checked(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    # A consent to text version 2 stays in force for what it said (inbox only): its mailbox is polled.
    _read_once(gmail, consenting_user)
    AIConsent.objects.filter(user=consenting_user).update(text_version="2")
    gmail.integration.cursors.filter(purpose=SyncCursor.Purpose.SENT_MAIL).delete()

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert (result.checked, result.skipped, result.quiet, result.calls) == (1, 0, 1, 1)


def test_sent_mail_not_read_yet_after_consent_to_it_asks_for_a_run_without_a_call(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    _read_once(gmail, consenting_user)
    gmail.integration.cursors.filter(purpose=SyncCursor.Purpose.SENT_MAIL).update(value=FIRST_READ)

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert (result.with_mail, result.calls) == (1, 0)
    assert _provider_requests(sandbox, "gmail") == []


def test_mail_to_oneself_read_as_inbox_mail_is_still_new_to_the_sent_cursor(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    _read_once(gmail, consenting_user)
    note = sandbox.deliver(gmail.address, ask(7), labels=["SENT", "INBOX"])
    ProcessedEmail.objects.create(
        integration=gmail.integration, message_id=note["id"], outcome=ProcessedEmail.Outcome.NO_TASKS
    )  # read through the inbox already; the Sent ledger does not hold it

    result = mailboxes_idle_check(integration_ids=[gmail.integration.pk])

    assert result.with_mail == 1
