"""When runs start without a person asking: a provider's doorbell (push), and the polling safety net.

A doorbell only says "read this mailbox" (DESIGN §2): it requests a run, never reads anything itself, so a
duplicated, late, forged or lost ring can neither create nor lose anything. A burst of rings for one
person becomes at most one run in flight plus one queued (the coalescing of `extraction_run_request`),
and push-triggered runs count against a limit of their own (PUSH_RUNS_PER_MINUTE), apart from the
person's "Extract now" presses. A mailbox rung but not read (over that limit, in backoff, a lost job) and
every mailbox not read successfully for a poll interval are picked up by beat's scan.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django_ratelimit.core import get_usage

from accounts.models import AIConsent, User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import Integration, SyncCursor

logger = logging.getLogger(__name__)

PUSH_GROUP = "extraction-push"
SCAN_CHUNK = 1000  # people per statement and per broker round in the scan


def extraction_doorbell(*, integration_ids: Iterable[int]) -> int:
    """Providers rang for these mailboxes: note it, and request a run for each person it concerns who may
    run now. Returns how many runs were newly queued."""
    now = timezone.now()
    ids = sorted(set(integration_ids))
    if not ids:
        return 0
    Integration.objects.filter(pk__in=ids, status=Integration.Status.ACTIVE).update(notified_at=now)
    ready = Integration.objects.filter(pk__in=ids, status=Integration.Status.ACTIVE).filter(
        Q(retry_after__isnull=True) | Q(retry_after__lte=now)
    )
    user_ids = set(ready.values_list("user_id", flat=True))
    queued = 0
    for user_id in sorted(_may_run(user_ids, now)):
        if _push_count(user_id, increment=False) >= settings.PUSH_RUNS_PER_MINUTE:
            continue  # over the push limit: the scan reads this mailbox soon (rung, not read since)
        user = User(pk=user_id)
        from extraction.services import extraction_run_request

        _, created = extraction_run_request(user=user, trigger=ExtractionRun.Trigger.WEBHOOK)
        if created:
            _push_count(user_id, increment=True)
            queued += 1
    return queued


def _push_count(user_id: int, *, increment: bool) -> int:
    """How many push-triggered runs this person had this minute (counting one more first, if asked)."""
    usage = get_usage(
        None,
        group=PUSH_GROUP,
        key=lambda _group, _request: str(user_id),
        rate=f"{settings.PUSH_RUNS_PER_MINUTE}/m",
        increment=increment,
    )
    return int(usage["count"]) if usage else 0


def _may_run(user_ids: set[int], now: Any) -> set[int]:
    """The people among `user_ids` whose runs may start now: active, with current AI consent, and not
    asked by Gemini to wait."""
    if not user_ids:
        return set()
    # Any consent in force: one to an earlier text reads as that text says (accounts/consent.py).
    consenting = AIConsent.objects.in_force().filter(user=OuterRef("pk"))
    waiting = ExtractionRun.objects.filter(user=OuterRef("pk"), retry_after__gt=now)
    return set(
        User.objects.filter(pk__in=user_ids, is_active=True)
        .filter(Exists(consenting))
        .exclude(Exists(waiting))
        .values_list("pk", flat=True)
    )


def gmail_ring_covered(*, integration: Integration, history_id: int) -> bool:
    """Whether the mail a Gmail push announces is already read, or listed by the run in progress: its
    history id is not past any of the mailbox's cursors (its inbox's, and its Sent mail's while that is read:
    one watch rings for both labels, and the push does not say which), saved or where the running run read
    to."""
    cursors = SyncCursor.objects.filter(integration=integration).values_list("purpose", "value")
    running = ExtractionRun.objects.filter(user_id=integration.user_id, status=ExtractionRun.Status.RUNNING).first()
    for purpose, value in cursors:
        if not value or _position(value) >= history_id:
            continue  # a Sent cursor not read yet is owed its first read, which no push announces: polling reads it
        key = str(integration.pk) if purpose == SyncCursor.Purpose.TASK_EXTRACTION else f"{integration.pk}:sent"
        fetched = (running.mailboxes.get(key) or {}).get("fetched") if running else None
        if not isinstance(fetched, str) or _position(fetched) < history_id:
            return False
    return bool(cursors)


def _position(cursor: str) -> int:
    """A Gmail cursor's history id (a Sent cursor carries its folder first: "sent:123"); -1 for none yet."""
    position = cursor.removeprefix("sent:")
    return int(position) if position.isdigit() else -1


def outlook_ring_covered(
    *, integration: Integration, message_ids: set[str], purpose: str = SyncCursor.Purpose.TASK_EXTRACTION
) -> bool:
    """Whether every message a Graph notification names is already in the ledger of its subscription's purpose."""
    if not message_ids:
        return False
    done = ProcessedEmail.objects.filter(integration=integration, purpose=purpose, message_id__in=message_ids).count()
    return done == len(message_ids)


# The polling safety net ------------------------------------------------------------------------------


def mailboxes_claim_due() -> set[int]:
    """Claim the mailboxes due a poll, in one statement, and return their people's ids.

    Due: active, not waiting out a throttle, and either not read successfully for a poll interval (nor
    claimed for one), or rung since its last successful read a scan interval ago and not claimed since the
    ring. Claiming sets `polled_at` under FOR UPDATE SKIP LOCKED, so two beats, or a scan that overlaps
    the previous one, never claim a mailbox twice.
    """
    now = timezone.now()
    poll_cut = now - timedelta(minutes=settings.EXTRACTION_SCHEDULE_MINUTES)
    ring_cut = now - timedelta(seconds=settings.EXTRACTION_SCAN_SECONDS / 2)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE integrations_integration SET polled_at = %s WHERE id IN (
                SELECT id FROM integrations_integration
                WHERE status = %s AND (retry_after IS NULL OR retry_after <= %s)
                  AND (
                    ((last_success_at IS NULL OR last_success_at <= %s)
                      AND (polled_at IS NULL OR polled_at <= %s))
                    OR (notified_at IS NOT NULL AND notified_at <= %s
                      AND (last_success_at IS NULL OR notified_at > last_success_at)
                      AND (polled_at IS NULL OR polled_at < notified_at))
                  )
                FOR UPDATE SKIP LOCKED
            ) RETURNING user_id
            """,
            [now, Integration.Status.ACTIVE, now, poll_cut, poll_cut, ring_cut],
        )
        return {int(row[0]) for row in cursor.fetchall()}


def extraction_runs_request_many(*, user_ids: Iterable[int], trigger: str) -> int:
    """Queue a run for each of these people who may run now and has none waiting: a few statements and
    one broker round trip per chunk, not one per person. Returns how many were queued."""
    from extraction.jobs import extraction_run_job

    now = timezone.now()
    wanted = sorted(_may_run(set(user_ids), now))
    queued = 0
    for start in range(0, len(wanted), SCAN_CHUNK):
        chunk = wanted[start : start + SCAN_CHUNK]
        with transaction.atomic():
            # The same lock as a single request takes, so a button pressed meanwhile cannot queue a second run.
            list(User.objects.select_for_update().filter(pk__in=chunk).order_by("pk").values_list("pk", flat=True))
            waiting = set(
                ExtractionRun.objects.filter(user_id__in=chunk, status=ExtractionRun.Status.QUEUED).values_list(
                    "user_id", flat=True
                )
            )
            runs = ExtractionRun.objects.bulk_create(
                [ExtractionRun(user_id=u, trigger=trigger) for u in chunk if u not in waiting]
            )
            transaction.on_commit(lambda runs=runs: _enqueue_many(runs, extraction_run_job))  # type: ignore[misc]
        queued += len(runs)
    return queued


def _enqueue_many(runs: list[ExtractionRun], job: Any) -> None:
    """Send the jobs of `runs` in one Redis round trip; a run whose job may not have been sent is ended with
    a readable reason (as a single request does).

    Celery sends a job for a queue of a direct exchange through the default (nameless) exchange, so kombu
    pushes it straight onto the queue's list, without reading the exchange's bindings. In a publish batch
    each push waits in one pipeline sent when the batch closes. A pipeline that fails may have pushed some
    of its jobs before failing: those runs are ended too, and their jobs, finding them ended, do nothing.

    Celery would route and declare the queue, and write each job's arguments out for display, for every job,
    reading its settings through Django's each time: once the round trips were gone, that was most of the
    scan's time. Here the queue is routed and declared once for the chunk, and each job's arguments are
    given written out as Celery writes them.
    """
    from extraction.services import extraction_run_give_up

    if not runs:
        return
    try:
        with job.app.producer_or_acquire() as producer, producer.batch(max_size=len(runs)):
            queue = job.app.amqp.router.route({}, job.name)["queue"]
            producer.maybe_declare(queue)
            for run in runs:
                job.apply_async(
                    (run.pk,), producer=producer, queue=queue, declare=[], argsrepr=f"({run.pk},)", kwargsrepr="{}"
                )
    except Exception:  # kombu raises many transport errors; the scan must go on
        logger.exception("could not queue %d scheduled extraction runs", len(runs))
        for run in runs:
            extraction_run_give_up(
                run=run, code="queue_unavailable", message="The run could not be queued just now. It is tried again."
            )
