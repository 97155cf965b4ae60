"""Writes of the extraction app: requesting runs, the per-user lease, and the ledger."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionLease, ExtractionRun, ProcessedEmail
from tasks.services import db_text

logger = logging.getLogger(__name__)


def extraction_run_request(*, user: User, trigger: str) -> tuple[ExtractionRun, bool]:
    """Queue a run for `user`, or return the run already waiting in the queue.

    Returns the run and whether it is new. A run that is already *running* does not absorb the request:
    mail may have arrived after it fetched, so one more run is queued behind it.
    """
    from extraction.jobs import extraction_run_job

    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()  # one request per person at a time
        stale = timezone.now() - timedelta(seconds=settings.EXTRACTION_LEASE_SECONDS)
        waiting = ExtractionRun.objects.filter(user=user, status=ExtractionRun.Status.QUEUED).first()
        if waiting is not None and waiting.created_at >= stale:
            return waiting, False
        if waiting is not None:  # its job was lost (broker restarted, enqueue failed): never let it block
            extraction_run_give_up(
                run=waiting, code="never_started", message="This run was never picked up; a newer run replaced it."
            )
        run = ExtractionRun.objects.create(user=user, trigger=trigger)
        transaction.on_commit(lambda: _enqueue(run, extraction_run_job))
    return run, True


def _enqueue(run: ExtractionRun, job: Any) -> None:
    """Send the run's job to the broker; if the broker refuses, end the run with a readable reason
    rather than fail the request (the row is already committed)."""
    try:
        job.delay(run.pk)
    except Exception:  # kombu raises many transport errors; none may turn a button press into a 500
        logger.exception("could not queue extraction run %s", run.pk)
        extraction_run_give_up(
            run=run, code="queue_unavailable", message="The run could not be queued just now. Try again in a minute."
        )


def extraction_run_give_up(*, run: ExtractionRun, code: str, message: str) -> None:
    """End a run that cannot go on (never started, or its worker kept dying)."""
    ExtractionRun.objects.filter(pk=run.pk).exclude(status__in=ExtractionRun.FINISHED).update(
        status=ExtractionRun.Status.FAILED, error_code=code, error_message=message, finished_at=timezone.now()
    )


# Lease --------------------------------------------------------------------------------------------


def _lease_expiry() -> datetime:
    return timezone.now() + timedelta(seconds=settings.EXTRACTION_LEASE_SECONDS)


def lease_acquire(*, run: ExtractionRun) -> int | None:
    """Take the user's lease for `run`. Returns the new token, or None while another run holds it.

    The same run may take its own lease over at once (its worker died and the job was redelivered): the
    token grows, so the dead worker, were it to wake, could no longer commit.
    """
    ExtractionLease.objects.get_or_create(user_id=run.user_id)
    with transaction.atomic():
        lease = ExtractionLease.objects.select_for_update().get(user_id=run.user_id)
        now = timezone.now()
        held = lease.run_id is not None and lease.expires_at is not None and lease.expires_at > now
        if held and lease.run_id != run.pk:
            return None
        lease.token += 1
        lease.run = run
        lease.expires_at = _lease_expiry()
        lease.save(update_fields=["token", "run", "expires_at"])
        return lease.token


def lease_renew(*, user_id: int, token: int) -> bool:
    """Extend the lease if `token` still holds it."""
    return ExtractionLease.objects.filter(user_id=user_id, token=token).update(expires_at=_lease_expiry()) == 1


def lease_release(*, user_id: int, token: int) -> None:
    ExtractionLease.objects.filter(user_id=user_id, token=token).update(run=None, expires_at=None)


def lease_holds(*, user_id: int, token: int) -> bool:
    """Inside a transaction: lock the lease row and tell whether `token` still holds it."""
    lease = ExtractionLease.objects.select_for_update().filter(user_id=user_id).first()
    return lease is not None and lease.token == token


# Ledger -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    integration_id: int
    message_id: str
    outcome: str
    tasks_created: int = 0
    last_error: str = ""


def ledger_record(*, entries: list[LedgerEntry], run_id: int) -> None:
    """Record handled emails in one statement (a constant single query, whatever the count)."""
    now = timezone.now()
    sql = (
        f"INSERT INTO {ProcessedEmail._meta.db_table} "  # noqa: S608
        "(integration_id, message_id, outcome, tasks_created, last_error, attempts, run_id, created_at, updated_at) "
        "SELECT integration_id, message_id, outcome, tasks_created, last_error, 1, %s, %s, %s "
        "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::int[], %s::text[]) "
        "AS t(integration_id, message_id, outcome, tasks_created, last_error) "
        "ON CONFLICT (integration_id, message_id) DO NOTHING"
    )
    params: list[Any] = [
        run_id,
        now,
        now,
        [e.integration_id for e in entries],
        [db_text(e.message_id) for e in entries],
        [e.outcome for e in entries],
        [e.tasks_created for e in entries],
        [db_text(e.last_error) for e in entries],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def ledger_known(*, integration_id: int, message_ids: list[str]) -> set[str]:
    """Which of `message_ids` the ledger already holds for this mailbox."""
    if not message_ids:
        return set()
    return set(
        ProcessedEmail.objects.filter(integration_id=integration_id, message_id__in=message_ids).values_list(
            "message_id", flat=True
        )
    )


def ledger_replay(*, entries: list[ProcessedEmail]) -> int:
    """Send quarantined emails through extraction again: drop their ledger rows and queue their ids on
    the mailbox, so the next run fetches them by id (the cursor has moved past them). Returns how many."""
    from integrations.models import Integration

    quarantined = [e for e in entries if e.outcome == ProcessedEmail.Outcome.QUARANTINED]
    with transaction.atomic():
        for entry in quarantined:
            integration = Integration.objects.select_for_update().get(pk=entry.integration_id)
            if entry.message_id not in integration.backfill_pending:
                integration.backfill_pending = [*integration.backfill_pending, entry.message_id]
                integration.save(update_fields=["backfill_pending", "updated_at"])
            entry.delete()
    return len(quarantined)
