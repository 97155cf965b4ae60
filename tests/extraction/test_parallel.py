"""Gemini calls of one run in flight together (issue 12): up to EXTRACTION_LLM_CONCURRENCY batches at
once, each written in its own transaction, the cursor moved only after all; a failure stops the calls not
yet started and moves nothing; a revoked consent sends nothing more."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from django.db import connection

from accounts.models import User
from accounts.services import consent_revoke
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db(transaction=True)  # a run in a thread of its own sees the test's rows


def gemini_calls(sandbox: SandboxClient) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests("gemini") if "generateContent" in r["path"]]


def test_batches_are_read_together_and_written_each_once(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 4
    for n in range(40):
        gmail.deliver(ask(n))
    # Long enough that the fetching and writing around the calls, slow on a loaded machine (0.9 s was seen for
    # what takes 0.1 s idle), stay well within it: one after the other, the calls would start 4.5 s apart.
    sandbox.set_gemini_latency(1500)
    before = gmail.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    calls = gemini_calls(sandbox)
    assert len(calls) == run.llm_calls == 4
    # The calls were made while each other were waiting on Gemini: at least three at once in flight (each is for
    # 1.5 s), and all four begun in less time than three calls one after the other take (4.5 s). A loaded machine
    # may start the fourth a hair after the first answer (1.507 s was seen in CI): that is still in parallel.
    starts = sorted(call["at"] for call in calls)
    in_flight = max(sum(1 for start in starts if start <= moment < start + 1.5) for moment in starts)
    assert in_flight >= 3, starts
    assert starts[-1] - starts[0] < 3 * 1.5, starts
    assert Task.objects.filter(user=consenting_user).count() == 40
    assert ProcessedEmail.objects.filter(integration=gmail.integration).count() == 40
    assert gmail.cursor != before


def test_with_concurrency_one_the_calls_are_one_after_another(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1
    for n in range(30):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(200)

    run = run_extraction(consenting_user)

    starts = sorted(call["at"] for call in gemini_calls(sandbox))
    assert run.status == ExtractionRun.Status.SUCCEEDED and len(starts) == 3
    assert all(b - a >= 0.2 for a, b in itertools.pairwise(starts))


def test_an_outage_stops_the_calls_not_yet_started_and_moves_no_cursor(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 2
    for n in range(80):  # eight batches
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(200)
    sandbox.fault("gemini", 429, headers={"Retry-After": "120"}, times=None)
    before = gmail.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.FAILED and run.error_code == "llm_rate_limited"
    assert len(gemini_calls(sandbox)) <= 3  # the two in flight (and the next one at most), not eight
    assert gmail.cursor == before
    assert not Task.objects.exists()


def test_a_poison_email_in_one_of_the_parallel_batches_is_set_aside_and_the_rest_written(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 4
    for n in range(40):
        gmail.deliver(ask(n))
    sandbox.fault("gemini", 500, match="project 17 ", times=None)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.emails_quarantined == 1
    assert Task.objects.filter(user=consenting_user).count() == 39
    assert ProcessedEmail.objects.filter(outcome=ProcessedEmail.Outcome.QUARANTINED).count() == 1


def _started(sandbox: SandboxClient, calls: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while len(gemini_calls(sandbox)) < calls:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_revoked_consent_sends_nothing_more_and_writes_the_answers_already_asked_for(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 2
    for n in range(60):  # six batches
        gmail.deliver(ask(n))
    before = gmail.cursor
    sandbox.set_gemini_latency(1500)
    runner = threading.Thread(target=lambda: results.append(run_extraction(consenting_user)))
    results: list[ExtractionRun] = []
    runner.start()
    _started(sandbox, 2)  # two calls in flight, the third waits for a free place

    consent_revoke(user=consenting_user)
    runner.join(timeout=30)

    (run,) = results
    assert (run.status, run.error_code) == (ExtractionRun.Status.CANCELLED, "consent_revoked")
    assert len(gemini_calls(sandbox)) == 2  # nothing more was sent
    assert Task.objects.filter(user=consenting_user).count() == 20  # what was asked under consent is kept
    assert gmail.cursor == before


def test_a_lost_lease_starts_no_new_call_and_writes_nothing_more(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 2
    for n in range(60):
        gmail.deliver(ask(n))
    before = gmail.cursor
    sandbox.set_gemini_latency(1500)
    results: list[ExtractionRun] = []
    runner = threading.Thread(target=lambda: results.append(run_extraction(consenting_user)))
    runner.start()
    _started(sandbox, 2)

    with connection.cursor() as cursor:  # PostgreSQL drops the runner's lock (its connection is gone)
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'tasklift-lease' AND datname = current_database()"
        )
    runner.join(timeout=30)

    (run,) = results
    assert (run.status, run.error_code) == (ExtractionRun.Status.CANCELLED, "lease_lost")
    assert len(gemini_calls(sandbox)) == 2  # no call started after the lock was lost
    # An answer that was on its way may still be written: no other runner has taken the lease, so its token
    # still fences; at most the two batches in flight, each with its ledger rows, and no cursor moves.
    assert Task.objects.count() == ProcessedEmail.objects.count() <= 20
    assert gmail.cursor == before
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 60
