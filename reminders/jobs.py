"""Celery jobs of reminders: beat's scan for whose morning digest is due."""

from __future__ import annotations

import logging

from celery import shared_task

from reminders.digest import digest_send_due

logger = logging.getLogger(__name__)


@shared_task
def digest_send_job() -> dict[str, int]:
    """Send the digest of everyone whose morning it is. Safe to run twice at once, or again after a crash:
    each person's day is sent at most once (reminders/digest.py)."""
    result = digest_send_due()
    if result["sent"] or result["empty"]:
        logger.info("digests %s", result)
    return result
