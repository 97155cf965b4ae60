"""Leases, races and revocations: these need real transactions (TransactionTestCase semantics)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import User
from accounts.services import consent_revoke
from extraction.jobs import extraction_run_job
from extraction.models import ExtractionLease, ExtractionRun, ProcessedEmail
from extraction.services import extraction_runs_reap, lease_acquire, lease_alive, lease_release
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask
from tests.processes import run_extract
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def cut_off_lease_holders() -> None:
    """End every lease connection of this database, as PostgreSQL does when it loses a runner."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'tasklift-lease' AND datname = current_database()"
        )


def gemini_posts(sandbox: SandboxClient) -> int:
    return sum(1 for r in sandbox.requests("gemini") if r["method"] == "POST")


def in_thread(target, *args) -> tuple[threading.Thread, list]:  # type: ignore[no-untyped-def]
    results: list = []

    def body() -> None:
        try:
            results.append(target(*args))
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, results


def test_one_lease_per_user_and_the_token_only_grows(consenting_user: User) -> None:
    first = ExtractionRun.objects.create(user=consenting_user, trigger="manual")
    second = ExtractionRun.objects.create(user=consenting_user, trigger="manual")
    token = lease_acquire(run=first)
    assert token == 1
    assert lease_acquire(run=second) is None
    assert lease_acquire(run=first) is None  # a live runner's lease is not taken, not even by its own run
    lease_release(user_id=consenting_user.pk, token=1)
    assert lease_acquire(run=second) == 2
    assert not lease_alive(user_id=consenting_user.pk, token=1)
    assert lease_alive(user_id=consenting_user.pk, token=2)
    lease_release(user_id=consenting_user.pk, token=2)


@contextlib.contextmanager
def busy_database_server(*, sessions: int) -> Iterator[None]:
    """`sessions` PostgreSQL backends counting as fast as they can (each a process of the server, so they take
    the machine's cores, not this process's), until the block ends."""
    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    busy = [psycopg.connect(**params, autocommit=True) for _ in range(sessions)]

    def count(session: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(psycopg.errors.QueryCanceled):
            session.execute("SELECT count(*) FROM generate_series(1, 10000000000)")

    threads = [threading.Thread(target=count, args=(session,)) for session in busy]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for session in busy:
            session.cancel_safe()
        for thread in threads:
            thread.join(timeout=30)
        for session in busy:
            session.close()


def test_a_lease_given_back_is_free_the_moment_it_is_given_back(consenting_user: User) -> None:
    """Closing the lock's connection frees the lock only once PostgreSQL's backend for it has exited, a moment
    later: a person's next run, started at once, could find their lease still busy (the crash matrix's last
    run did, on a loaded machine)."""
    run = ExtractionRun.objects.create(user=consenting_user, trigger="manual")
    with busy_database_server(sessions=3):  # as on a loaded machine: a backend's exit waits for a core
        for attempt in range(300):
            token = lease_acquire(run=run)
            assert token is not None, f"the lease given back was still busy at attempt {attempt + 1}"
            lease_release(user_id=consenting_user.pk, token=token)


def test_a_long_call_never_costs_a_live_runner_its_lease(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.GEMINI_TIMEOUT_S = 30
    gmail.deliver(ask(1))
    sandbox.set_gemini_latency(3000)  # longer than anything that could expire
    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)

    second = ExtractionRun.objects.create(user=consenting_user, trigger="manual")
    assert lease_acquire(run=second) is None  # the live runner keeps it, however long its call

    thread.join(timeout=30)
    assert results[0].status == ExtractionRun.Status.SUCCEEDED


def test_a_runner_whose_lock_connection_was_dropped_stops_before_its_next_batch(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # one call at a time (in parallel: test_parallel.py)
    for n in range(25):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(700)
    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)

    cut_off_lease_holders()  # PostgreSQL dropped its lock: another runner may take the lease now
    thread.join(timeout=30)

    assert (results[0].status, results[0].error_code) == ("cancelled", "lease_lost")
    assert gemini_posts(sandbox) == 1


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_a_dead_runners_lease_is_free_at_once(gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(ask(1))
    killed = run_extract(consenting_user.email, crash_point="llm_call")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    dead = ExtractionRun.objects.get()
    assert dead.status == ExtractionRun.Status.RUNNING  # nothing could record its death

    run = run_extraction(consenting_user)  # at once: no lease timeout to wait out

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 1


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_a_finished_runs_lease_never_blocks_the_next_one(gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(ask(1))
    killed = run_extract(consenting_user.email, crash_point="after_commit")  # dies holding the lease
    assert killed.returncode == -signal.SIGKILL
    assert ExtractionRun.objects.get().status == ExtractionRun.Status.SUCCEEDED

    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_the_reaper_takes_up_a_run_whose_runner_died(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int]
) -> None:
    for n in range(3):
        gmail.deliver(ask(n))
    assert run_extract(consenting_user.email, crash_point="batch_tx").returncode == -signal.SIGKILL
    dead = ExtractionRun.objects.get()

    assert extraction_runs_reap() == (1, 0)
    assert broker_queue() == 1
    dead.refresh_from_db()
    assert dead.status == ExtractionRun.Status.QUEUED
    extraction_run_job.apply(args=[dead.pk])  # what the worker does with the queued job

    dead.refresh_from_db()
    assert dead.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 3
    assert gmail.cursor == gmail.history_id()
    assert extraction_runs_reap() == (0, 0)


def test_the_reaper_leaves_a_live_run_alone(gmail: GmailBox, sandbox: SandboxClient, consenting_user: User) -> None:
    gmail.deliver(ask(1))
    sandbox.set_gemini_latency(1500)
    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)

    assert extraction_runs_reap() == (0, 0)

    thread.join(timeout=30)
    assert results[0].status == ExtractionRun.Status.SUCCEEDED


def test_the_reaper_gives_up_a_run_whose_worker_keeps_dying_and_a_new_run_reads_the_mail_at_once(
    consenting_user: User, settings, broker_queue: Callable[[], int]
) -> None:
    run = ExtractionRun.objects.create(
        user=consenting_user, trigger="manual", status="running", deliveries=settings.EXTRACTION_MAX_DELIVERIES
    )
    assert extraction_runs_reap() == (0, 1)
    run.refresh_from_db()
    assert (run.status, run.error_code) == ("failed", "worker_lost")
    assert "a new run reads the mail again now" in run.error_message
    # Issue 35: the person does not wait for the next poll.
    again = ExtractionRun.objects.exclude(pk=run.pk).get()
    assert (again.status, again.trigger) == ("queued", "retry")
    assert broker_queue() == 1


def test_a_retry_whose_worker_keeps_dying_is_not_retried_again_and_waits_for_the_poll(
    consenting_user: User, settings, broker_queue: Callable[[], int]
) -> None:
    run = ExtractionRun.objects.create(
        user=consenting_user, trigger="retry", status="running", deliveries=settings.EXTRACTION_MAX_DELIVERIES
    )
    assert extraction_runs_reap() == (0, 1)
    run.refresh_from_db()
    assert (run.status, run.error_code) == ("failed", "worker_lost")
    assert "the next regular check reads the mail again" in run.error_message
    assert not ExtractionRun.objects.exclude(pk=run.pk).exists()  # a message that kills its runner makes no loop
    assert broker_queue() == 0


def test_revoking_consent_stops_the_run_before_its_next_batch(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # one call at a time (in parallel: test_parallel.py)
    for n in range(25):
        gmail.deliver(ask(n))
    before = gmail.cursor
    sandbox.set_gemini_latency(700)

    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)
    consent_revoke(user=consenting_user)
    thread.join(timeout=30)

    run = results[0]
    assert run.status == ExtractionRun.Status.CANCELLED
    assert run.error_code == "consent_revoked"
    assert gemini_posts(sandbox) == 1
    assert gmail.cursor == before
    assert Task.objects.count() == 10  # the batch in flight when consent was revoked is kept


def test_a_stale_runner_cannot_commit_and_no_task_is_duplicated(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # one call at a time (in parallel: test_parallel.py)
    for n in range(25):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(500)

    stale_thread, stale_results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)
    cut_off_lease_holders()  # as if its connection to PostgreSQL was lost while it kept working
    fresh = run_extraction(consenting_user)
    stale_thread.join(timeout=30)
    stale = stale_results[0]

    assert fresh.status == ExtractionRun.Status.SUCCEEDED
    assert stale.status == ExtractionRun.Status.CANCELLED
    assert stale.error_code == "lease_lost"
    assert Task.objects.count() == 25
    assert ProcessedEmail.objects.count() == 25
    assert gmail.cursor == gmail.history_id()


def test_a_redelivered_job_of_a_dead_worker_finishes_the_run(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(3):
        gmail.deliver(ask(n))
    run = ExtractionRun.objects.create(user=consenting_user, trigger="manual", status="running")
    ExtractionLease.objects.create(user=consenting_user, token=4, run=run)  # its worker died holding the lease

    extraction_run_job.apply(args=[run.pk])

    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 3


def test_a_finished_run_is_not_run_again_by_a_duplicate_message(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    run = run_extraction(consenting_user)
    sandbox.clear_requests()
    extraction_run_job.apply(args=[run.pk])
    assert sandbox.requests() == []
    run.refresh_from_db()
    assert run.deliveries == 1  # its own run; the duplicate message took nothing


def test_a_cursor_changed_during_the_run_is_not_overwritten(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from integrations.models import SyncCursor

    for n in range(3):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(500)

    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=10, what="Gemini asked once", interval=0.02)
    SyncCursor.objects.filter(integration=gmail.integration).update(value="12345")  # someone else moved it
    thread.join(timeout=30)

    assert results[0].error_code == "cursor_conflict"
    assert gmail.cursor == "12345"


def test_no_mail_is_fetched_after_consent_is_revoked(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # one call at a time (in parallel: test_parallel.py)
    for n in range(25):  # bodies come in chunks of 20: batch 3 needs a second fetch
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(700)

    thread, results = in_thread(run_extraction, consenting_user)
    wait_for(lambda: gemini_posts(sandbox) == 2, timeout=10, what="Gemini asked twice", interval=0.02)
    # The run fetches the next batch while this call is in flight (under consent): let that fetch land.
    seen: list[int] = []

    def settled() -> bool:
        seen.append(len(sandbox.requests("gmail")))
        return len(seen) > 10 and seen[-1] == seen[-10]

    wait_for(settled, timeout=10, what="the run waits (no Gmail request for ten looks)", interval=0.02)
    consent_revoke(user=consenting_user)
    gmail_requests_at_revoke = len(sandbox.requests("gmail"))
    thread.join(timeout=30)

    assert results[0].error_code == "consent_revoked"
    assert len(sandbox.requests("gmail")) == gmail_requests_at_revoke
    assert gemini_posts(sandbox) == 2


def test_a_replay_made_during_a_run_is_kept_for_the_next_one(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    from extraction.services import ledger_replay
    from tests.mail import rfc822

    settings.EXTRACTION_MAX_BODY_CHARS = 20_000
    poison = gmail.deliver(rfc822("Odd one", "Please look.\nSANDBOX-ECHO-TEXT: not json\n"))
    run_extraction(consenting_user)
    for n in range(10):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(500)

    thread, _ = in_thread(run_extraction, consenting_user)
    # the run has listed its mail and is reading it
    wait_for(lambda: gemini_posts(sandbox) >= 3, timeout=10, what="Gemini asked three times", interval=0.02)
    ledger_replay(entries=list(ProcessedEmail.objects.filter(outcome="quarantined")))
    thread.join(timeout=30)

    gmail.integration.refresh_from_db()
    assert gmail.integration.backfill_pending == [poison]


def test_a_run_whose_worker_keeps_dying_is_stopped(gmail: GmailBox, consenting_user: User, settings) -> None:
    run = ExtractionRun.objects.create(
        user=consenting_user, trigger="manual", status="running", deliveries=settings.EXTRACTION_MAX_DELIVERIES
    )
    extraction_run_job.apply(args=[run.pk])
    run.refresh_from_db()
    assert (run.status, run.error_code) == ("failed", "worker_lost")
    assert ExtractionRun.objects.filter(trigger="retry", status="queued").count() == 1


def test_a_mailbox_disconnected_during_a_run_does_not_get_its_sign_in_back(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from integrations.services import (
        integration_disconnect,
        integration_provider,
        integration_save_refreshed_credentials,
    )

    sandbox.expire_token(address=gmail.address)
    provider = integration_provider(integration=gmail.integration)
    provider.fetch_delta(gmail.cursor)  # refreshes the access token, as a run would
    integration_disconnect(integration=gmail.integration)

    integration_save_refreshed_credentials(integration=gmail.integration, provider=provider)

    gmail.integration.refresh_from_db()
    assert (gmail.integration.status, gmail.integration.credentials_encrypted) == ("disconnected", "")


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_a_broker_that_refuses_the_job_ends_the_run_with_a_reason_not_a_500(consenting_user: User) -> None:
    """The web process with its broker down: the press is answered and the run does not block later ones."""
    import subprocess
    import sys

    from tests.processes import process_env

    script = (
        "import django; django.setup();"
        "from accounts.models import User; from extraction.services import extraction_run_request;"
        f"run, _ = extraction_run_request(user=User.objects.get(pk={consenting_user.pk}), trigger='manual');"
        "run.refresh_from_db(); print(run.status, run.error_code)"
    )
    env = process_env(REDIS_URL="redis://127.0.0.1:1/0")  # nothing listens there
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["failed", "queue_unavailable"]
    assert ExtractionRun.objects.get().error_message.startswith("The run could not be queued")


def test_the_reaper_sends_again_the_job_of_a_run_that_no_worker_took_up(
    gmail: GmailBox, consenting_user: User, broker_queue: Callable[[], int], settings
) -> None:
    gmail.deliver(ask(1))
    lost = ExtractionRun.objects.create(user=consenting_user, trigger="manual")  # its message died with a worker
    fresh = ExtractionRun.objects.create(user=consenting_user, trigger="manual")
    stale = timezone.now() - timedelta(seconds=settings.EXTRACTION_QUEUED_STALE_SECONDS + 1)
    ExtractionRun.objects.filter(pk=lost.pk).update(updated_at=stale)

    assert extraction_runs_reap() == (1, 0)
    assert broker_queue() == 1  # only the lost one: the fresh one's job is still on its way
    assert extraction_runs_reap() == (0, 0)  # sent again once, not at every tick

    extraction_run_job.apply(args=[lost.pk])
    lost.refresh_from_db()
    assert lost.status == ExtractionRun.Status.SUCCEEDED
    fresh.refresh_from_db()
    assert fresh.status == ExtractionRun.Status.QUEUED


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_a_run_whose_database_was_lost_under_it_is_taken_up_again(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    import subprocess
    import sys

    from tests.processes import ROOT, process_env

    for n in range(3):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(1500)
    child = subprocess.Popen(
        [sys.executable, "manage.py", "extract", consenting_user.email],
        cwd=ROOT,
        env=process_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: gemini_posts(sandbox) == 1, timeout=60, what="Gemini asked once", interval=0.02)
    with connection.cursor() as cursor:  # PostgreSQL drops every connection but this test's
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    child.communicate(timeout=60)
    sandbox.set_gemini_latency(0)

    # Whether the runner could still record its failure or died with the run `running`, the reaper
    # (what beat calls every EXTRACTION_REAPER_SECONDS) leaves no run running and the work gets done.
    extraction_runs_reap()
    for run in ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED):
        extraction_run_job.apply(args=[run.pk])
    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).exists()
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 3
    assert gmail.cursor == gmail.history_id()
