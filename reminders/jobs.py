"""Celery jobs of reminders: beat's scans for whose morning digest is due and which reminders ring, and the
chunk jobs they send."""

from __future__ import annotations

import logging
import math
from typing import Any

from celery import shared_task
from django.conf import settings

from reminders.digest import digest_due_count, digest_send_due
from reminders.ring import reminders_due_count, reminders_send_due

logger = logging.getLogger(__name__)

MAX_CHUNK_JOBS = 500  # a scan's jobs; more due than that many chunks are sent by the next scan


@shared_task
def digest_send_job() -> dict[str, int]:
    """Beat's scan: one chunk job per DIGEST_CHUNK people whose digest is due. It claims nobody itself: each
    job claims its own chunk, so a job that is lost, or runs twice, or finds its people taken by another
    job, costs nothing but its claim."""
    return _fan_out(
        digest_due_count(most=MAX_CHUNK_JOBS * settings.DIGEST_CHUNK), settings.DIGEST_CHUNK, digest_chunk_job
    )


def _fan_out(due: int, chunk: int, job: Any) -> dict[str, int]:
    jobs = math.ceil(due / chunk)
    for _ in range(jobs):
        job.delay()
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


@shared_task
def reminder_send_job() -> dict[str, int]:
    """Beat's scan for reminders: one chunk job per REMINDER_CHUNK due ones (each job claims its own)."""
    due = reminders_due_count(most=MAX_CHUNK_JOBS * settings.REMINDER_CHUNK)
    return _fan_out(due, settings.REMINDER_CHUNK, reminder_chunk_job)


@shared_task
def reminder_chunk_job() -> dict[str, object]:
    """Ring due reminders until none is due or a scan interval went by; safe twice at once or after a crash
    (reminders/ring.py)."""
    result = reminders_send_due(budget_s=settings.REMINDER_SCAN_SECONDS)
    if result["claimed"]:
        logger.info("reminders %s", {key: value for key, value in result.items() if key != "late_s"})
    return result
