"""Celery jobs of the extraction app. Each takes ids, re-reads the rows and calls one service."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from accounts.models import AIConsent, User
from extraction.models import ExtractionRun
from extraction.pipeline import LeaseBusy, extraction_run_execute
from extraction.selectors import run_is_being_run
from extraction.services import extraction_run_give_up, extraction_run_request, extraction_runs_reap
from integrations.models import Integration

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=30)
def extraction_run_job(self, run_id: int) -> None:  # type: ignore[no-untyped-def]
    run = ExtractionRun.objects.filter(pk=run_id).first()
    if run is None or run.is_finished:
        return  # deleted, or a redelivered message of a run that already ended
    if run.deliveries >= settings.EXTRACTION_MAX_DELIVERIES:
        # acks_late redelivers a job whose worker died; a job that kills its worker every time stops here.
        extraction_run_give_up(
            run=run,
            code="worker_lost",
            message="The run was interrupted several times and was stopped. No mailbox position moved.",
        )
        return
    try:
        extraction_run_execute(run=run)
    except LeaseBusy as busy:
        if run_is_being_run(run=run):
            return  # a live delivery of this same run holds the lease (a message sent twice): let it finish
        # Another run of this person is in progress: wait for it rather than run beside it.
        # Still waiting, not lost: the reaper sends again only jobs of runs that nobody touched for a while.
        ExtractionRun.objects.filter(pk=run.pk, status=ExtractionRun.Status.QUEUED).update(updated_at=timezone.now())
        if self.request.retries >= self.max_retries:
            extraction_run_give_up(
                run=run, code="busy", message="Another run of yours kept running too long; this one did not start."
            )
            return
        raise self.retry(countdown=30, exc=busy) from busy


@shared_task
def extraction_schedule_job() -> int:
    """The polling safety net: a run for everyone with current consent and an active mailbox."""
    consenting = AIConsent.objects.current().filter(user=OuterRef("pk"))
    active = Integration.objects.filter(user=OuterRef("pk"), status=Integration.Status.ACTIVE)
    queued = 0
    for user in User.objects.filter(Exists(consenting), Exists(active), is_active=True).iterator():
        _, created = extraction_run_request(user=user, trigger=ExtractionRun.Trigger.SCHEDULE)
        queued += int(created)
    logger.info("scheduled %d extraction runs", queued)
    return queued


@shared_task
def extraction_reap_job() -> int:
    """Runs whose runner died (kill -9, a lost worker, the database lost under it) are taken up again
    within a reaper interval, not after the broker's visibility timeout."""
    requeued, given_up = extraction_runs_reap()
    return requeued + given_up
