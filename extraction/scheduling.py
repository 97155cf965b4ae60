"""When runs start without a person asking: a provider's doorbell (push), and the polling safety net.

A doorbell only says "read this mailbox" (DESIGN §2): it requests a run, never reads anything itself, so a
duplicated, late, forged or lost ring can neither create nor lose anything. A burst of rings for one
person becomes at most one run in flight plus one queued (the coalescing of `extraction_run_request`),
and push-triggered runs count against a limit of their own (PUSH_RUNS_PER_MINUTE), apart from the
person's "Extract now" presses. A mailbox rung but not read (over that limit, in backoff, a lost job) gets
a run from beat's scan at once.

Polling is by need (issue 24): a mailbox whose push works is swept every EXTRACTION_SWEEP_MINUTES, one
without every EXTRACTION_SCHEDULE_MINUTES, each from its own `next_check_at`. What the scan finds due is
not a run but an idle check (extraction/idlecheck.py): one job per CHECK_CHUNK mailboxes, one provider
call per cursor, and a run only where there is mail.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Least
from django.utils import timezone

from accounts.counting import Counter, CountRefused, count_take, counted_forget, counter_key
from accounts.models import AIConsent, User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import Integration, SyncCursor

logger = logging.getLogger(__name__)

PUSH_GROUP = "extraction-push"
SCAN_CHUNK = 1000  # people per statement and per broker round when runs are requested in bulk


def extraction_doorbell(*, integration_ids: Iterable[int]) -> int:
    """Providers rang for these mailboxes: note it, and request a run for each person it concerns who may
    run now. Returns how many runs were newly queued."""
    now = timezone.now()
    ids = sorted(set(integration_ids))
    if not ids:
        return 0
    Integration.objects.filter(pk__in=ids, status=Integration.Status.ACTIVE).update(
        notified_at=now,
        # The mailbox's own time between rings (a moving average), from which its push's quiet time follows.
        ring_gap_s=RawSQL(
            "CASE WHEN notified_at IS NULL THEN ring_gap_s"
            " WHEN ring_gap_s IS NULL THEN EXTRACT(EPOCH FROM %s - notified_at)"
            " ELSE 0.8 * ring_gap_s + 0.2 * EXTRACT(EPOCH FROM %s - notified_at) END",
            [now, now],
        ),
        # Rung: due to the scan soon, in case the run asked for here cannot start or its job is lost.
        next_check_at=Least(F("next_check_at"), now + timedelta(seconds=settings.EXTRACTION_SCAN_SECONDS / 2)),
    )
    ready = Integration.objects.filter(pk__in=ids, status=Integration.Status.ACTIVE).filter(
        Q(retry_after__isnull=True) | Q(retry_after__lte=now)
    )
    user_ids = set(ready.values_list("user_id", flat=True))
    queued = 0
    from extraction.services import extraction_run_request

    for user_id in sorted(_may_run(user_ids, now)):
        try:
            counted = count_take(push_counter(user_id))
        except CountRefused:
            continue  # over the push limit: the scan reads this mailbox soon (rung, not read since)
        _, created = extraction_run_request(user=User(pk=user_id), trigger=ExtractionRun.Trigger.WEBHOOK)
        if created:
            queued += 1
        else:
            counted_forget(counted)  # a run was waiting already: this ring queued nothing, and counts nothing
    return queued


def push_counter(user_id: int) -> Counter:
    """The push-triggered runs of one person, in a sliding minute (accounts/counting.py)."""
    return Counter(
        key=counter_key(PUSH_GROUP, str(user_id)),
        limit=settings.PUSH_RUNS_PER_MINUTE,
        window_s=settings.RATE_WINDOW_SECONDS,
    )


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


# Polling by need ---------------------------------------------------------------------------------------

CLAIM_CHUNK = 1000  # mailboxes claimed per statement
CHECK_CHUNK = 100  # mailboxes per idle-check job: at most one broker message per hundred due mailboxes


@dataclass(frozen=True)
class Claimed:
    """A mailbox the scan claimed, and what its claim found: it rang and was not read since (a run, at once),
    it waits out a throttle (nothing), or it was read within its interval (nothing: a run read it)."""

    integration_id: int
    user_id: int
    rung_unread: bool
    throttled: bool
    read_recently: bool

    @property
    def to_check(self) -> bool:
        return not (self.rung_unread or self.throttled or self.read_recently)


def push_healthy_sql(now: str) -> str:
    """SQL, over `i` (the mailbox) and `pc` (its push channel, LEFT JOINed): whether its push works. A live
    channel (not expired, its last open or renewal refused nothing) that has rung at least once since it was
    opened (a channel that never delivered proves nothing: it may be dropped from the start), heard from (a
    ring, or the channel confirmed) within the mailbox's expected quiet time, and not caught missing mail
    since its last ring (extraction/idlecheck.py)."""
    return f"""(pc.id IS NOT NULL AND pc.expires_at > {now} AND pc.last_error = ''
        AND i.notified_at >= pc.created_at
        AND GREATEST(i.notified_at, pc.updated_at) + {_quiet_sql()} > {now}
        AND (i.push_missed_at IS NULL OR i.notified_at > i.push_missed_at))"""


def _quiet_sql() -> str:
    """How long the mailbox may stay silent with its push still working: four of its own gaps between rings,
    never less than the channel's renewal period and an hour (a renewal confirms it; nights are quiet)."""
    floor = settings.PUSH_RENEW_HOURS * 3600 + 3600
    return f"make_interval(secs => GREATEST({floor}, 4 * COALESCE(i.ring_gap_s, 0)))"


def poll_seconds() -> int:
    """How long a mailbox without working push goes from one look to the next: EXTRACTION_SCHEDULE_MINUTES less
    what its reading is allowed (EXTRACTION_READ_ALLOWANCE_SECONDS), at least one scan period."""
    schedule = settings.EXTRACTION_SCHEDULE_MINUTES * 60
    return max(settings.EXTRACTION_SCAN_SECONDS, schedule - settings.EXTRACTION_READ_ALLOWANCE_SECONDS)


def mailboxes_claim_due(*, now: datetime | None = None, limit: int = CLAIM_CHUNK) -> list[Claimed]:
    """Claim up to `limit` due mailboxes, in one statement, and say what each needs.

    Due: active, and its `next_check_at` passed (an index holds the active mailboxes by it, so a claim reads
    only the due ones, oldest first). Claiming moves `next_check_at` on, under FOR UPDATE SKIP LOCKED, so
    any number of scans share the work and none claims a mailbox twice: to the end of a throttle; else a
    sweep interval (EXTRACTION_SWEEP_MINUTES) on from its last read or now when its push is healthy, but no
    later than the moment that push would have gone quiet; a poll interval without it: EXTRACTION_SCHEDULE_MINUTES
    less the time its reading is allowed (EXTRACTION_READ_ALLOWANCE_SECONDS), so that mail which came just
    after a look is a task within EXTRACTION_SCHEDULE_MINUTES. Each interval is counted one scan period
    (EXTRACTION_SCAN_SECONDS) short, in "read recently" as in the next check: the scan one interval on may run
    a hair earlier in its period, and would leave the mailbox one more period. So the last scan within an
    interval of the mailbox's last look claims it. A check that never happens (its job lost) is thus made up
    within an interval.
    """
    now = now or timezone.now()
    sweep = settings.EXTRACTION_SWEEP_MINUTES * 60
    poll = poll_seconds()
    healthy = push_healthy_sql("%(now)s")
    interval = f"make_interval(secs => CASE WHEN {healthy} THEN {sweep} ELSE {poll} END - %(scan)s)"
    rung_unread = "(i.notified_at IS NOT NULL AND (i.last_success_at IS NULL OR i.notified_at > i.last_success_at))"
    read_recently = f"(i.last_success_at IS NOT NULL AND i.last_success_at + {interval} > %(now)s)"
    throttled = "(i.retry_after IS NOT NULL AND i.retry_after > %(now)s)"
    gone_quiet = f"(CASE WHEN {healthy} THEN GREATEST(i.notified_at, pc.updated_at) + {_quiet_sql()} END)"
    following = f"""CASE
        WHEN {throttled} THEN i.retry_after
        ELSE GREATEST(%(now)s + make_interval(secs => %(scan)s), LEAST(
            CASE WHEN {read_recently} AND NOT {rung_unread} THEN i.last_success_at ELSE %(now)s END + {interval},
            {gone_quiet}))
        END"""
    with connection.cursor() as cursor:
        cursor.execute(  # the SQL pieces above are ours: every value is a parameter
            f"""
            WITH due AS (
                SELECT id FROM integrations_integration
                WHERE status = %(active)s AND next_check_at <= %(now)s
                ORDER BY next_check_at LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED
            ), claimed AS (
                SELECT i.id, i.user_id, {rung_unread} AS rung_unread, {throttled} AS throttled,
                       {read_recently} AS read_recently, {following} AS following
                FROM due JOIN integrations_integration i ON i.id = due.id
                LEFT JOIN integrations_pushchannel pc ON pc.integration_id = i.id
            )
            UPDATE integrations_integration i SET next_check_at = claimed.following
            FROM claimed WHERE i.id = claimed.id
            RETURNING i.id, i.user_id, claimed.rung_unread, claimed.throttled, claimed.read_recently
            """,  # noqa: S608
            {
                "now": now,
                "active": Integration.Status.ACTIVE,
                "limit": limit,
                "scan": settings.EXTRACTION_SCAN_SECONDS,
            },
        )
        return [Claimed(int(r[0]), int(r[1]), bool(r[2]), bool(r[3]), bool(r[4])) for r in cursor.fetchall()]


def extraction_scan(*, now: datetime | None = None, check_job: Any, budget_s: float | None = None) -> ScanResult:
    """One scan: claim the due mailboxes chunk by chunk; a run at once for each person whose mailbox rang
    and was not read since; one idle-check job (`check_job`, given the ids) per CHECK_CHUNK of the others.
    Stops when nothing is due, or after `budget_s` (half a scan interval by default), leaving the rest to
    the next scan or to a scan running beside it."""
    budget = settings.EXTRACTION_SCAN_SECONDS / 2 if budget_s is None else budget_s
    started = time.monotonic()
    result = ScanResult()
    while True:
        claimed = mailboxes_claim_due(now=now)
        result.claimed += len(claimed)
        rung = {c.user_id for c in claimed if c.rung_unread and not c.throttled}
        if rung:
            result.runs_queued += extraction_runs_request_many(user_ids=rung, trigger=ExtractionRun.Trigger.SCHEDULE)
        ids = [c.integration_id for c in claimed if c.to_check]
        chunks = [ids[n : n + CHECK_CHUNK] for n in range(0, len(ids), CHECK_CHUNK)]
        result.checked += len(ids)
        result.jobs_sent += _send_checks(chunks, check_job, now=now)
        if len(claimed) < CLAIM_CHUNK or time.monotonic() - started > budget:
            return result


@dataclass
class ScanResult:
    claimed: int = 0  # due mailboxes claimed
    checked: int = 0  # of them, sent to an idle check
    jobs_sent: int = 0  # idle-check jobs (broker messages)
    runs_queued: int = 0  # runs requested at once (rung and not read since)


def _send_checks(chunks: list[list[int]], job: Any, *, now: datetime | None) -> int:
    """Send one job per chunk in one Redis round trip (see `_enqueue_many`). Chunks whose jobs may not have
    been sent come due again after a scan interval, not after a whole poll interval."""
    if not chunks:
        return 0
    try:
        with job.app.producer_or_acquire() as producer, producer.batch(max_size=len(chunks)):
            queue = job.app.amqp.router.route({}, job.name)["queue"]
            producer.maybe_declare(queue)
            for chunk in chunks:
                job.apply_async((chunk,), producer=producer, queue=queue, declare=[], argsrepr="(...)", kwargsrepr="{}")
    except Exception:  # kombu raises many transport errors; the scan must go on
        logger.exception("could not queue %d idle checks", len(chunks))
        soon = (now or timezone.now()) + timedelta(seconds=settings.EXTRACTION_SCAN_SECONDS)
        Integration.objects.filter(pk__in=[i for chunk in chunks for i in chunk]).update(next_check_at=soon)
        return 0
    return len(chunks)


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
