"""Celery jobs of the extraction app. Each takes ids, re-reads the rows and calls one service."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from config.logcontext import log_context
from config.metrics import REAPER
from extraction.idlecheck import mailboxes_idle_check
from extraction.models import ExtractionRun
from extraction.pipeline import LeaseBusy, extraction_run_execute
from extraction.retention import retention_apply
from extraction.scheduling import extraction_scan
from extraction.selectors import run_is_being_run
from extraction.services import (
    extraction_run_give_up,
    extraction_run_give_up_lost,
    extraction_run_request,
    extraction_run_send,
    extraction_runs_reap,
)

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=30)
def extraction_run_job(self, run_id: int) -> None:  # type: ignore[no-untyped-def]
    run = ExtractionRun.objects.filter(pk=run_id).first()
    if run is None or run.is_finished:
        return  # deleted, or a redelivered message of a run that already ended
    with log_context(run_id=run.pk, user_id=run.user_id):
        _run(self, run)


def _run(job: Any, run: ExtractionRun) -> None:
    """The job's work, with the run's ids on every line it logs; `job` is the bound task (its retries)."""
    if run.deliveries >= settings.EXTRACTION_MAX_DELIVERIES:
        # acks_late redelivers a job whose worker died; a job that kills its worker every time stops here.
        extraction_run_give_up_lost(run=run)
        return
    try:
        done = extraction_run_execute(run=run)
        if done.status == ExtractionRun.Status.CONTINUED:
            # The rest of a backlog: a run of its own, queued behind other people's (at the end of the queue).
            _, created = extraction_run_request(user=done.user, trigger=ExtractionRun.Trigger.CONTINUATION)
            if not created:  # a run was waiting already (a doorbell): it continues, now
                _start_waiting(run.user_id)
        elif done.status != ExtractionRun.Status.QUEUED:  # queued: interrupted, the reaper sends it again
            _start_waiting(run.user_id)
    except LeaseBusy as busy:
        if run_is_being_run(run=run):
            return  # a live delivery of this same run holds the lease (a message sent twice): let it finish
        # Another run of this person is in progress: wait for it rather than run beside it.
        # Still waiting, not lost: the reaper sends again only jobs of runs that nobody touched for a while.
        ExtractionRun.objects.filter(pk=run.pk, status=ExtractionRun.Status.QUEUED).update(updated_at=timezone.now())
        if job.request.retries >= job.max_retries:
            extraction_run_give_up(
                run=run, code="busy", message="Another run of yours kept running too long; this one did not start."
            )
            return
        raise job.retry(countdown=30, exc=busy) from busy


def _start_waiting(user_id: int) -> None:
    """A run of this person queued behind the one that just ended (a doorbell rang meanwhile) starts now,
    not when its job's retry comes round: a second message of a run is harmless."""
    waiting = ExtractionRun.objects.filter(user_id=user_id, status=ExtractionRun.Status.QUEUED).first()
    if waiting is not None:
        extraction_run_send(waiting, extraction_run_job)


@shared_task
def extraction_schedule_job() -> int:
    """The polling safety net (every EXTRACTION_SCAN_SECONDS): the due mailboxes claimed, a run at once for
    those rung and not read since, an idle-check job per chunk of the others (extraction/scheduling.py).
    Returns how many mailboxes were due."""
    result = extraction_scan(check_job=extraction_idle_check_job)
    logger.info(
        "scan: %d mailboxes due, %d runs queued, %d idle checks in %d jobs",
        result.claimed,
        result.runs_queued,
        result.checked,
        result.jobs_sent,
    )
    return result.claimed


@shared_task
def extraction_idle_check_job(integration_ids: list[int]) -> int:
    """Whether anything changed in these mailboxes, one provider call per cursor; a run only where there is
    mail (extraction/idlecheck.py). A job lost is made up by the scan within an interval. Returns the runs
    queued."""
    return mailboxes_idle_check(integration_ids=[int(i) for i in integration_ids]).runs_queued


@shared_task
def extraction_reap_job() -> int:
    """Runs whose runner died (kill -9, a lost worker, the database lost under it) are taken up again
    within a reaper interval, not after the broker's visibility timeout."""
    requeued, given_up = extraction_runs_reap()
    REAPER.labels("requeued").inc(requeued)
    REAPER.labels("given_up").inc(given_up)
    return requeued + given_up


@shared_task
def extraction_retention_job() -> int:
    """Old run records removed and old ledger rows compacted, in short batches (extraction/retention.py)."""
    result = retention_apply()
    return result.runs_removed + result.ledger_compacted
