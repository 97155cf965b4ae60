"""The polling safety net, the doorbell's limits, and provider-aware backoff (issue 10).

What must hold: a mailbox not read for a poll interval gets a run whatever push does; two scans cannot
queue a mailbox twice; rings never use up a person's "Extract now" presses and presses never silence
rings; a throttled mailbox waits Retry-After or 30 s doubling to an hour, and one success resets it; a
Gemini 429 makes the person's runs wait as long as Gemini asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client, TestCase
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User
from accounts.services import consent_grant
from config.celery import app
from extraction.idlecheck import mailboxes_idle_check
from extraction.jobs import extraction_idle_check_job, extraction_run_job, extraction_schedule_job
from extraction.models import ExtractionRun
from extraction.scheduling import extraction_doorbell, extraction_runs_request_many, mailboxes_claim_due
from integrations.models import Integration
from integrations.services import backoff_seconds
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, connect_gmail, run_extraction
from tests.factories import UserFactory
from tests.mail import ask

pytestmark = pytest.mark.django_db


def _read_long_ago(integration: Integration, minutes: int = 60) -> None:
    Integration.objects.filter(pk=integration.pk).update(last_success_at=timezone.now() - timedelta(minutes=minutes))


# The polling safety net ---------------------------------------------------------------------------------


def scan_and_check() -> int:
    """One scan, then its idle-check jobs taken from the queue and done here, as a worker would. Returns
    how many runs were queued (by the scan and by the checks)."""
    queued = ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED)
    before = queued.count()
    with TestCase.captureOnCommitCallbacks(execute=True):
        extraction_schedule_job()
    for name, ids in _take_queued_jobs():
        if name == extraction_idle_check_job.name:
            with TestCase.captureOnCommitCallbacks(execute=True):
                mailboxes_idle_check(integration_ids=ids)
    return queued.count() - before


def test_a_mailbox_not_read_for_a_poll_interval_with_mail_gets_a_run_and_only_once_across_overlapping_scans(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    gmail.deliver(ask(1))
    _read_long_ago(gmail.integration)

    first = scan_and_check()
    ExtractionRun.objects.update(status=ExtractionRun.Status.FAILED)  # even were the first run over already
    second = scan_and_check()  # a second beat, or a scan overlapping the first

    assert (first, second) == (1, 0)
    assert ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.SCHEDULE).count() == 1


def test_a_mailbox_rung_and_not_read_since_is_claimed_for_a_run_and_only_once(
    gmail: GmailBox, consenting_user: User, settings
) -> None:
    rung = timezone.now() - timedelta(seconds=settings.EXTRACTION_SCAN_SECONDS)
    Integration.objects.filter(pk=gmail.integration.pk).update(
        last_success_at=rung - timedelta(seconds=5), notified_at=rung, next_check_at=rung
    )

    assert [(c.user_id, c.rung_unread) for c in mailboxes_claim_due()] == [(consenting_user.pk, True)]
    assert mailboxes_claim_due() == []  # claimed: not again until it rings again or its interval passes


def test_the_scan_leaves_out_throttled_mailboxes_and_people_gemini_asked_to_wait(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, django_capture_on_commit_callbacks
) -> None:
    other = UserFactory()
    consent_grant(user=other)
    other_box = connect_gmail(sandbox, other, "other@example.com")
    _read_long_ago(gmail.integration)
    _read_long_ago(other_box.integration)
    Integration.objects.filter(pk=gmail.integration.pk).update(retry_after=timezone.now() + timedelta(minutes=5))
    ExtractionRun.objects.create(
        user=other, trigger="manual", status="failed", retry_after=timezone.now() + timedelta(minutes=1)
    )
    gmail.deliver(ask(1))
    other_box.deliver(ask(2))

    assert scan_and_check() == 0


def _people_due(count: int, *, first: int = 0) -> list[int]:
    """`count` consenting people (numbered from `first`), each with a Gmail mailbox last read a day ago
    (written in bulk; their mailboxes are never read). Returns their ids."""
    now = timezone.now()
    users = User.objects.bulk_create(
        [User(email=f"due{n}@example.com", password="!", email_verified_at=now) for n in range(first, first + count)]
    )
    AIConsent.objects.bulk_create([AIConsent(user=u, text_version=CONSENT_VERSION, granted_at=now) for u in users])
    Integration.objects.bulk_create(
        [
            Integration(
                user=u, provider="gmail", account_address=f"due{n}@example.com", last_success_at=now - timedelta(days=1)
            )
            for n, u in enumerate(users, start=first)
        ]
    )
    return [u.pk for u in users]


def _take_queued_jobs() -> list[tuple[str, Any]]:
    """Take every job waiting in the Celery queue as a worker's consumer receives it (kombu decodes the
    message): its task's name and its run id (or, for an idle check, its mailboxes' ids)."""
    jobs: list[tuple[str, Any]] = []
    with (
        app.connection_for_read() as connection,
        connection.SimpleQueue(settings.CELERY_TASK_DEFAULT_QUEUE) as queue,
    ):
        while True:
            try:
                message = queue.get_nowait()
            except queue.Empty:
                return sorted(jobs)
            (run_id,), kwargs, _ = message.decode()
            assert kwargs == {}
            jobs.append((message.headers["task"], run_id))
            message.ack()


def test_runs_requested_in_bulk_send_their_jobs_in_one_broker_round_trip_each_a_job_a_worker_takes(
    redis_pushes: list[int], django_capture_on_commit_callbacks
) -> None:
    people = _people_due(250)

    with django_capture_on_commit_callbacks(execute=True):
        queued = extraction_runs_request_many(user_ids=people, trigger=ExtractionRun.Trigger.SCHEDULE)

    assert queued == 250
    assert redis_pushes == [250]  # one round trip for the scan's chunk of people, not one per person
    runs = ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.SCHEDULE, status=ExtractionRun.Status.QUEUED)
    assert _take_queued_jobs() == sorted((extraction_run_job.name, pk) for pk in runs.values_list("pk", flat=True))


def test_a_broker_that_refuses_bulk_runs_jobs_ends_each_run_with_a_reason_and_the_next_request_queues_anew(
    broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    first = _people_due(1)
    with django_capture_on_commit_callbacks(execute=True):
        # The queue declared, as by any earlier request: the refusal comes at the push.
        extraction_runs_request_many(user_ids=first, trigger=ExtractionRun.Trigger.SCHEDULE)
    people = _people_due(3, first=1)
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.set(settings.CELERY_TASK_DEFAULT_QUEUE, "not a list")  # Redis refuses every push onto the queue

    with django_capture_on_commit_callbacks(execute=True):
        extraction_runs_request_many(user_ids=people, trigger=ExtractionRun.Trigger.SCHEDULE)  # does not fail

    ended = ExtractionRun.objects.filter(user_id__in=people)
    assert sorted((r.status, r.error_code) for r in ended) == [("failed", "queue_unavailable")] * 3

    broker.delete(settings.CELERY_TASK_DEFAULT_QUEUE)
    with django_capture_on_commit_callbacks(execute=True):
        assert extraction_runs_request_many(user_ids=people, trigger=ExtractionRun.Trigger.SCHEDULE) == 3
    assert broker_queue() == 3


# The doorbell's own limit -----------------------------------------------------------------------------


def test_rings_never_use_up_extract_now_and_presses_never_silence_rings(
    client: Client, gmail: GmailBox, consenting_user: User, settings, django_capture_on_commit_callbacks
) -> None:
    client.force_login(consenting_user)

    def press() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            status = client.post("/extract", HTTP_HX_REQUEST="true").status_code
        ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)  # as if it ran
        return status

    presses = [press() for _ in range(settings.EXTRACTION_RUNS_PER_MINUTE - 2)]
    for _ in range(settings.PUSH_RUNS_PER_MINUTE + 5):  # a flood of rings, each finding no run waiting
        with django_capture_on_commit_callbacks(execute=True):
            extraction_doorbell(integration_ids=[gmail.integration.pk])
        ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)
    presses += [press() for _ in range(2)]

    assert ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.WEBHOOK).count() == settings.PUSH_RUNS_PER_MINUTE
    assert presses == [202] * settings.EXTRACTION_RUNS_PER_MINUTE  # every press of the minute is still there
    assert press() == 429  # and the button's own limit is where it was


def test_push_started_runs_are_counted_in_a_sliding_window(
    gmail: GmailBox, consenting_user: User, settings, django_capture_on_commit_callbacks
) -> None:
    """Rings half a window after the limit was reached start nothing; once the first runs are older than the
    window, a ring starts a run again. A ring that finds a run waiting queues nothing and counts nothing."""
    settings.PUSH_RUNS_PER_MINUTE = 2
    settings.RATE_WINDOW_SECONDS = 2

    def ring() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            queued = extraction_doorbell(integration_ids=[gmail.integration.pk])
        ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)  # as if it ran
        return queued

    with django_capture_on_commit_callbacks(execute=True):
        extraction_doorbell(integration_ids=[gmail.integration.pk])
    waiting = [extraction_doorbell(integration_ids=[gmail.integration.pk]) for _ in range(5)]  # the run waits
    ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)
    second = ring()
    time.sleep(1.1)
    halfway = ring()
    time.sleep(1.1)

    assert waiting == [0] * 5 and second == 1
    assert halfway == 0
    assert ring() == 1
    assert ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.WEBHOOK).count() == 3


def test_a_burst_of_rings_queues_one_run_behind_the_one_in_flight(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    ExtractionRun.objects.create(user=consenting_user, trigger="manual", status=ExtractionRun.Status.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        queued = [extraction_doorbell(integration_ids=[gmail.integration.pk]) for _ in range(50)]

    assert sum(queued) == 1
    assert ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).count() == 1
    assert broker_queue() == 1


# Backoff ----------------------------------------------------------------------------------------------


def test_backoff_steps_double_from_30_seconds_to_an_hour_with_jitter() -> None:
    for step, base in enumerate([30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]):
        waits = [backoff_seconds(step) for _ in range(20)]
        assert all(base * 0.9 <= w <= base for w in waits), (step, waits)
        assert len(set(waits)) > 1  # jitter: mailboxes throttled together do not come back together
    assert backoff_seconds(10_000) <= 3600


def test_a_throttled_mailbox_waits_longer_each_time_honours_retry_after_and_a_success_resets_it(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    for base in (30, 60, 120):  # Gmail's 403 userRateLimitExceeded carries no Retry-After
        sandbox.fault("gmail", 403, reason="userRateLimitExceeded", times=None, route="history")
        before = timezone.now()
        run = run_extraction(consenting_user)
        after = timezone.now()
        assert run.status == ExtractionRun.Status.FAILED
        integration = Integration.objects.get(pk=gmail.integration.pk)
        assert integration.retry_after is not None
        # The wait began when the throttle was seen, somewhere between `before` and `after`.
        assert (integration.retry_after - before).total_seconds() >= base * 0.9
        assert (integration.retry_after - after).total_seconds() <= base
        # Neither a ring nor the scan starts a run for it while it waits...
        assert extraction_doorbell(integration_ids=[gmail.integration.pk]) == 0
        Integration.objects.filter(pk=gmail.integration.pk).update(last_success_at=None, next_check_at=timezone.now())
        assert [c.throttled for c in mailboxes_claim_due()] == [True]
        # ...and a run started anyway leaves the mailbox out, untouched and without a call, until the wait is over.
        sandbox.clear_requests()
        assert run_extraction(consenting_user).status == ExtractionRun.Status.FAILED
        assert sandbox.requests("gmail") == []
        assert Integration.objects.get(pk=gmail.integration.pk).throttle_count == integration.throttle_count
        Integration.objects.filter(pk=gmail.integration.pk).update(retry_after=timezone.now())
        sandbox.clear_faults()

    sandbox.fault("gmail", 429, headers={"Retry-After": "7"}, times=None, route="history")
    run_extraction(consenting_user)
    after = timezone.now()
    integration = Integration.objects.get(pk=gmail.integration.pk)
    assert integration.retry_after is not None
    assert 6 <= (integration.retry_after - after).total_seconds() <= 7  # Retry-After honoured, not the 4th step
    sandbox.clear_faults()
    Integration.objects.filter(pk=gmail.integration.pk).update(retry_after=timezone.now())

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED and run.tasks_created == 1
    integration = Integration.objects.get(pk=gmail.integration.pk)
    assert (integration.throttle_count, integration.retry_after) == (0, None)  # one success resets it


def test_a_gemini_429_with_a_retry_delay_makes_the_persons_runs_wait_that_long(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, django_capture_on_commit_callbacks
) -> None:
    gmail.deliver(ask(2))
    # Longer than GEMINI_MAX_RETRY_WAIT_S, so not waited out inside the run.
    sandbox.fault("gemini", 429, headers={"Retry-After": "120"}, times=None)
    before = timezone.now()

    run = run_extraction(consenting_user)
    after = timezone.now()

    assert run.status == ExtractionRun.Status.FAILED and run.error_code == "llm_rate_limited"
    assert run.retry_after is not None
    assert (run.retry_after - before).total_seconds() >= 120 >= (run.retry_after - after).total_seconds()
    _read_long_ago(gmail.integration)
    assert scan_and_check() == 0  # the scan waits for Gemini
    with django_capture_on_commit_callbacks(execute=True):
        assert extraction_doorbell(integration_ids=[gmail.integration.pk]) == 0  # and so does the doorbell
