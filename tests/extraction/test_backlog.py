"""A backlog bigger than one run (issue 12): a run reads at most a slice (EXTRACTION_RUN_MAX_EMAILS, or
EXTRACTION_RUN_SECONDS of time), writes it, moves no cursor, ends as "continued" and queues its
continuation at once; the continuations read on from the ledger, nothing is read twice and nothing lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accounts.models import User
from extraction.jobs import extraction_run_job
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db


def test_a_backlog_is_read_in_slices_that_end_continued_and_the_last_one_moves_the_cursor(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_RUN_MAX_EMAILS = 20
    settings.EXTRACTION_LLM_CONCURRENCY = 2
    for n in range(45):
        gmail.deliver(ask(n))
    before = gmail.cursor

    first, second = run_extraction(consenting_user), run_extraction(consenting_user)

    for run in (first, second):
        assert (run.status, run.error_code) == (ExtractionRun.Status.CONTINUED, "continued")
        assert run.emails_sent_to_llm == 20
    assert gmail.cursor == before  # the ledger carries the progress
    assert Task.objects.filter(user=consenting_user).count() == 40

    last = run_extraction(consenting_user)

    assert last.status == ExtractionRun.Status.SUCCEEDED and last.emails_sent_to_llm == 5
    assert gmail.cursor != before
    assert Task.objects.filter(user=consenting_user).count() == 45
    assert ProcessedEmail.objects.filter(integration=gmail.integration).count() == 45
    prompts = [r["body"] for r in sandbox.requests("gemini") if "generateContent" in r["path"]]
    assert all(sum(f"project {n} " in p for p in prompts) == 1 for n in range(45))  # none read twice


def test_a_mailbox_of_exactly_one_slice_is_read_in_one_run_that_succeeds(
    gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_RUN_MAX_EMAILS = 20
    for n in range(20):
        gmail.deliver(ask(n))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED and run.emails_sent_to_llm == 20


def test_a_run_out_of_time_ends_continued_not_failed(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_RUN_SECONDS = 1
    settings.EXTRACTION_LLM_CONCURRENCY = 1
    for n in range(40):
        gmail.deliver(ask(n))
    sandbox.set_gemini_latency(600)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.CONTINUED
    assert 10 <= run.emails_sent_to_llm < 40
    assert Task.objects.filter(user=consenting_user).count() == run.emails_sent_to_llm


def test_the_job_queues_the_continuation_at_once(
    gmail: GmailBox,
    consenting_user: User,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.EXTRACTION_RUN_MAX_EMAILS = 10
    for n in range(15):
        gmail.deliver(ask(n))
    run = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.MANUAL)

    with django_capture_on_commit_callbacks(execute=True):
        extraction_run_job(run.pk)

    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.CONTINUED
    queued = ExtractionRun.objects.get(status=ExtractionRun.Status.QUEUED)
    assert queued.trigger == ExtractionRun.Trigger.CONTINUATION
    assert broker_queue() >= 1
