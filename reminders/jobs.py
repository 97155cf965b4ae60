"""Celery jobs of reminders: beat's scan for whose morning digest is due, and the chunk jobs it sends."""

from __future__ import annotations

import logging
import math

from celery import shared_task
from django.conf import settings

from reminders.digest import digest_due_count, digest_send_due

logger = logging.getLogger(__name__)

MAX_CHUNK_JOBS = 500  # a scan's jobs; more due than that many chunks are sent by the next scan


@shared_task
def digest_send_job() -> dict[str, int]:
    """Beat's scan: one chunk job per DIGEST_CHUNK people whose digest is due. It claims nobody itself: each
    job claims its own chunk, so a job that is lost, or runs twice, or finds its people taken by another
    job, costs nothing but its claim."""
    due = digest_due_count(most=MAX_CHUNK_JOBS * settings.DIGEST_CHUNK)
    jobs = math.ceil(due / settings.DIGEST_CHUNK)
    for _ in range(jobs):
        digest_chunk_job.delay()
    return {"due": due, "jobs": jobs}


@shared_task
def digest_chunk_job() -> dict[str, int]:
    """Handle chunks of due people until nobody is due or half a scan interval went by (the jobs of one scan
    share the work; any one of them may find it all done). Safe to run twice at once, or again after a
    crash: each person's day is sent once (reminders/digest.py)."""
    result = digest_send_due(budget_s=settings.DIGEST_SCAN_SECONDS / 2)
    if result["claimed"]:
        logger.info("digests %s", result)
    return result
