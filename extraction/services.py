"""Writes of the extraction app: requesting runs, the per-user lease, and the ledger."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import User
from config.metrics import RUNS
from extraction.models import INTERRUPTED, ExtractionLease, ExtractionRun, FetchFailure, ProcessedEmail
from extraction.selectors import lease_live_user_ids
from tasks.services import db_text

logger = logging.getLogger(__name__)

WORKER_LOST = "worker_lost"  # a run given up because its runner kept dying


def extraction_run_request(*, user: User, trigger: str) -> tuple[ExtractionRun, bool]:
    """Queue a run for `user`, or return the run already waiting in the queue.

    Returns the run and whether it is new. A run that is already *running* does not absorb the request:
    mail may have arrived after it fetched, so one more run is queued behind it.
    """
    from extraction.jobs import extraction_run_job

    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()  # one request per person at a time
        waiting = ExtractionRun.objects.filter(user=user, status=ExtractionRun.Status.QUEUED).first()
        if waiting is not None:  # were its job lost, the reaper sends it again (extraction_runs_reap)
            return waiting, False
        run = ExtractionRun.objects.create(user=user, trigger=trigger)
        transaction.on_commit(lambda: extraction_run_send(run, extraction_run_job))
    return run, True


def extraction_run_send(run: ExtractionRun, job: Any) -> None:
    """Send the run's job to the broker; if the broker refuses, end the run with a readable reason
    rather than fail the request (the row is already committed)."""
    try:
        job.delay(run.pk)
    except Exception:  # kombu raises many transport errors; none may turn a button press into a 500
        logger.exception("could not queue extraction run %s", run.pk)
        extraction_run_give_up(
            run=run, code="queue_unavailable", message="The run could not be queued just now. Try again in a minute."
        )


def extraction_run_give_up(*, run: ExtractionRun, code: str, message: str) -> bool:
    """End a run that cannot go on (never started, or its worker kept dying); False when it had ended already."""
    if (
        ExtractionRun.objects.filter(pk=run.pk)
        .exclude(status__in=ExtractionRun.FINISHED)
        .update(status=ExtractionRun.Status.FAILED, error_code=code, error_message=message, finished_at=timezone.now())
    ):
        RUNS.labels(run.trigger, ExtractionRun.Status.FAILED).inc()
        return True
    return False


def extraction_run_give_up_lost(*, run: ExtractionRun) -> None:
    """End a run whose runner died EXTRACTION_MAX_DELIVERIES times while PostgreSQL and Redis were up (an outage
    is not counted: extraction/pipeline.py), and read its person's mail again at once, in a run of its own
    (trigger `retry`), rather than leave it to the next poll. A retry given up in its turn is not retried: a
    message that kills every runner that reads it must not make a loop; the poll reads that mail again."""
    again = run.trigger != ExtractionRun.Trigger.RETRY
    given_up = extraction_run_give_up(
        run=run,
        code=WORKER_LOST,
        message="The run was interrupted several times and was stopped. No mailbox position moved; "
        + ("a new run reads the mail again now." if again else "the next regular check reads the mail again."),
    )
    if given_up and again:
        extraction_run_request(user=User(pk=run.user_id), trigger=ExtractionRun.Trigger.RETRY)


# Lease --------------------------------------------------------------------------------------------
#
# Two things make a lease. The row's `token` only grows and fences writes: a runner whose token is no
# longer the row's can commit nothing. Liveness is a PostgreSQL session-level advisory lock, held on a
# connection of its own for as long as the run holds the lease: when the runner's process dies (kill -9,
# a lost worker, the database restarted under it), PostgreSQL drops the connection and the lock with it,
# so the person's next run starts at once instead of waiting out a timeout, and a long Gemini call never
# makes a live runner lose its lease. That connection must reach PostgreSQL directly (not through a
# transaction-pooling proxy), and it holds no transaction, so it blocks nothing else.

LOCK_NAMESPACE = 0x7A5C  # the first key of our advisory locks; the second is the user id
_holders: dict[tuple[int, int], psycopg.Connection[Any]] = {}
_holders_lock = threading.Lock()


def lock_key(user_id: int) -> int:
    return user_id % 2**31  # an int4; two people sharing a key only wait for each other, never mix


def _lease_connection() -> psycopg.Connection[Any]:
    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    # TCP keepalives let PostgreSQL notice a runner whose machine vanished (unix sockets ignore them).
    return psycopg.connect(
        **params,
        autocommit=True,
        keepalives=1,
        keepalives_idle=30,
        keepalives_interval=10,
        keepalives_count=3,
        application_name="tasklift-lease",
    )


def lease_acquire(*, run: ExtractionRun) -> int | None:
    """Take the user's lease for `run`. Returns the new token, or None while a live runner holds it.

    A runner whose process died no longer holds it, whatever the row says: its lock went with its
    connection. The token grows, so a runner that lost its lease (were it only cut off) cannot commit.
    """
    holder = _lease_connection()
    try:
        locked = holder.execute(
            "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_NAMESPACE, lock_key(run.user_id))
        ).fetchone()
        if not locked or not locked[0]:
            holder.close()
            return None
        token = _lease_take(user_id=run.user_id, run_id=run.pk)
    except BaseException:
        holder.close()
        raise
    with _holders_lock:
        _holders[(run.user_id, token)] = holder
    return token


def _lease_take(*, user_id: int, run_id: int) -> int:
    """The lease row, made or its token grown, for `run_id`: one statement, atomic by itself."""
    table = ExtractionLease._meta.db_table
    sql = (
        f"INSERT INTO {table} (user_id, token, run_id) VALUES (%s, 1, %s) "  # noqa: S608
        f"ON CONFLICT (user_id) DO UPDATE SET token = {table}.token + 1, run_id = EXCLUDED.run_id "
        "RETURNING token"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id, run_id])
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def lease_alive(*, user_id: int, token: int) -> bool:
    """Whether `token` still holds the lease and this process still holds its lock: a lock connection that
    PostgreSQL dropped (a restart, a timeout) means another runner may take the lease at any moment."""
    with _holders_lock:
        holder = _holders.get((user_id, token))
    if holder is None:
        return False
    try:
        holder.execute("SELECT 1")
    except psycopg.Error:
        return False
    return ExtractionLease.objects.filter(user_id=user_id, token=token).exists()


def lease_release(*, user_id: int, token: int) -> None:
    try:
        lease_give_back(user_id=user_id, token=token)
    finally:
        lease_unlock(user_id=user_id, token=token)


def lease_give_back(*, user_id: int, token: int) -> bool:
    """Free the lease row if `token` still holds it, and tell whether it did. Inside a transaction it is
    also a fence, as lease_holds is: the row stays locked until commit, and a runner whose token is no
    longer the row's gives nothing back, so it can roll back what it meant to commit. The lock connection
    is let go after the commit (lease_unlock)."""
    return ExtractionLease.objects.filter(user_id=user_id, token=token).update(run=None) == 1


def lease_unlock(*, user_id: int, token: int) -> None:
    """Let go of the lease's advisory lock: the next runner of the person may start."""
    with _holders_lock:
        holder = _holders.pop((user_id, token), None)
    if holder is None:
        return
    try:
        # Unlocked here, at once: closing the connection frees the lock only once its backend has exited, a moment
        # later, and the person's next run, started at once, would find the lease busy.
        holder.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_NAMESPACE, lock_key(user_id)))
    except psycopg.Error:
        pass  # a connection that is lost holds no lock once its backend is gone: closing it is all there is to do
    finally:
        holder.close()


def lease_holds(*, user_id: int, token: int) -> bool:
    """Inside a transaction: lock the lease row and tell whether `token` still holds it."""
    lease = ExtractionLease.objects.select_for_update().filter(user_id=user_id).first()
    return lease is not None and lease.token == token


def extraction_runs_reap() -> tuple[int, int]:
    """Take up again every run left `running` by a runner that died (DESIGN §6): queue it once more, or
    end it when its worker has died too often. A run `queued` for longer than EXTRACTION_QUEUED_STALE_SECONDS
    whose job no worker took up (a worker killed whole holds its message until the broker's visibility
    timeout) is queued once more too: a second message of a run is harmless, since a job of a finished
    run, or of a run another delivery is running, returns at once. A run that lost Redis or PostgreSQL under
    it (INTERRUPTED) waits queued until its `retry_after`, then is sent again. Returns (requeued, given up)."""
    from extraction.jobs import extraction_run_job

    now = timezone.now()
    stale = now - timedelta(seconds=settings.EXTRACTION_QUEUED_STALE_SECONDS)
    requeued_queued = 0
    # A run that lost Redis or PostgreSQL under it waits queued for its backoff, then its job is sent again.
    backed_off = ExtractionRun.objects.filter(
        status=ExtractionRun.Status.QUEUED, error_code=INTERRUPTED, retry_after__lte=now
    )
    for run in backed_off:
        with transaction.atomic():
            touched = backed_off.filter(pk=run.pk).update(retry_after=None, updated_at=now)
            if touched:
                transaction.on_commit(lambda run=run: extraction_run_send(run, extraction_run_job))  # type: ignore[misc]
        requeued_queued += touched
    waiting = ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED, updated_at__lt=stale).exclude(
        retry_after__gt=now  # still waiting out a backoff
    )
    for run in waiting:
        with transaction.atomic():
            touched = ExtractionRun.objects.filter(
                pk=run.pk, status=ExtractionRun.Status.QUEUED, updated_at__lt=stale
            ).update(updated_at=timezone.now())
            if touched:
                transaction.on_commit(lambda run=run: extraction_run_send(run, extraction_run_job))  # type: ignore[misc]
        requeued_queued += touched
    # The running runs first, their runners' locks after: a runner takes its lock before it marks its run
    # running and ends the run before it lets the lock go, so a run seen running with no lock is dead.
    running = list(ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING))
    live = lease_live_user_ids()
    leases = dict(ExtractionLease.objects.values_list("user_id", "run_id"))
    requeued = given_up = 0
    for run in running:
        if lock_key(run.user_id) in live and leases.get(run.user_id) == run.pk:
            continue  # its runner is alive
        if run.deliveries >= settings.EXTRACTION_MAX_DELIVERIES:
            extraction_run_give_up_lost(run=run)
            given_up += 1
            continue
        with transaction.atomic():
            moved = ExtractionRun.objects.filter(pk=run.pk, status=ExtractionRun.Status.RUNNING).update(
                status=ExtractionRun.Status.QUEUED, updated_at=timezone.now()
            )
            if moved:
                transaction.on_commit(lambda run=run: extraction_run_send(run, extraction_run_job))  # type: ignore[misc]
        requeued += moved
    if requeued or given_up or requeued_queued:
        logger.warning(
            "reaped extraction runs: %d of dead runners queued again, %d given up, %d lost or backed-off jobs sent",
            requeued,
            given_up,
            requeued_queued,
        )
    return requeued + requeued_queued, given_up


# Ledger -------------------------------------------------------------------------------------------


INBOX = "task_extraction"  # SyncCursor.Purpose.TASK_EXTRACTION: what every ledger row was before Sent mail


@dataclass(frozen=True)
class LedgerEntry:
    integration_id: int
    message_id: str
    outcome: str
    tasks_created: int = 0
    last_error: str = ""
    email_key: str = ""
    sender: str = ""  # skipped bulk mail, and mail set aside after it was read
    subject: str = ""
    conversation_key: str = ""  # the email's conversation (Email.conversation_key), when it was read
    purpose: str = INBOX  # the cursor that listed it (SyncCursor.Purpose)


def queued_id(purpose: str, message_id: str) -> str:
    """How a message id is queued on its mailbox (`backfill_pending`, `read_anyway`) for the cursor that reads
    it: an inbox id as it always was, one of Sent mail marked with its purpose, so that a replayed sent
    email is read again as sent mail (and the inbox's reader never takes it)."""
    return message_id if purpose == INBOX else f"{purpose}:{message_id}"


def queued_ids(purpose: str, queue: list[str]) -> list[str]:
    """The message ids of `queue` queued for the cursor of `purpose` (the inverse of queued_id)."""
    if purpose == INBOX:
        return [i for i in queue if not any(i.startswith(f"{p}:") for p in QUEUE_MARKS)]
    mark = f"{purpose}:"
    return [i[len(mark) :] for i in queue if i.startswith(mark)]


QUEUE_MARKS = ("sent_mail",)  # every purpose but the inbox's (SyncCursor.Purpose)


def ledger_record(*, entries: list[LedgerEntry], run_id: int) -> None:
    """Record handled emails in one statement (a constant single query, whatever the count)."""
    now = timezone.now()
    sql = (
        f"INSERT INTO {ProcessedEmail._meta.db_table} "  # noqa: S608
        "(integration_id, purpose, message_id, outcome, tasks_created, last_error, email_key, sender, subject, "
        "conversation_key, attempts, run_id, created_at, updated_at) "
        "SELECT integration_id, purpose, message_id, outcome, tasks_created, last_error, email_key, sender, subject, "
        "conversation_key, 1, %s, %s, %s "
        "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[]) "
        "AS t(integration_id, purpose, message_id, outcome, tasks_created, last_error, email_key, sender, subject, "
        "conversation_key) "
        "ON CONFLICT (integration_id, purpose, message_id) DO NOTHING"
    )
    params: list[Any] = [
        run_id,
        now,
        now,
        [e.integration_id for e in entries],
        [e.purpose for e in entries],
        [db_text(e.message_id) for e in entries],
        [e.outcome for e in entries],
        [e.tasks_created for e in entries],
        [db_text(e.last_error) for e in entries],
        [db_text(e.email_key) for e in entries],
        [db_text(e.sender)[:320] for e in entries],
        [db_text(e.subject)[:300] for e in entries],
        [db_text(e.conversation_key)[:512] for e in entries],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def fetch_failure_record(
    *, integration_id: int, failures: dict[str, tuple[str, str]], purpose: str = INBOX
) -> dict[str, int]:
    """Count one more failed read of each message ({id: (error code, message)}), in one statement.
    Returns each message's failed reads so far, across runs."""
    if not failures:
        return {}
    now = timezone.now()
    table = FetchFailure._meta.db_table
    sql = (
        f"INSERT INTO {table} "  # noqa: S608
        "(integration_id, purpose, message_id, attempts, last_error_code, last_error, created_at, updated_at) "
        "SELECT %s, %s, message_id, 1, code, error, %s, %s FROM unnest(%s::text[], %s::text[], %s::text[]) "
        "AS t(message_id, code, error) "
        f"ON CONFLICT (integration_id, purpose, message_id) DO UPDATE SET attempts = {table}.attempts + 1, "
        "last_error_code = EXCLUDED.last_error_code, last_error = EXCLUDED.last_error, "
        "updated_at = EXCLUDED.updated_at "
        "RETURNING message_id, attempts"
    )
    ids = list(failures)
    params: list[Any] = [
        integration_id,
        purpose,
        now,
        now,
        [db_text(i) for i in ids],
        [failures[i][0] for i in ids],
        [db_text(failures[i][1]) for i in ids],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(message_id): int(attempts) for message_id, attempts in cursor.fetchall()}


def ledger_known(*, integration_id: int, message_ids: list[str], purpose: str = INBOX) -> set[str]:
    """Which of `message_ids` the ledger already holds for this mailbox and purpose."""
    if not message_ids:
        return set()
    return set(
        ProcessedEmail.objects.filter(
            integration_id=integration_id, purpose=purpose, message_id__in=message_ids
        ).values_list("message_id", flat=True)
    )


def ledger_replay(*, entries: Iterable[ProcessedEmail]) -> int:
    """Send quarantined emails through extraction again: drop their ledger rows and queue their ids on
    the mailbox, so the next run fetches them by id (the cursor has moved past them). Returns how many.

    Four statements however many emails (the mailboxes page replays thousands at once): lock the few
    mailboxes, forget the emails' failed reads, append the ids to each mailbox's queue (merged here, under
    the lock, so an id is queued once), delete the ledger rows."""
    from integrations.models import Integration

    quarantined = [e for e in entries if e.outcome == ProcessedEmail.Outcome.QUARANTINED]
    if not quarantined:
        return 0
    by_integration: dict[int, list[str]] = {}
    for entry in quarantined:
        by_integration.setdefault(entry.integration_id, []).append(queued_id(entry.purpose, entry.message_id))
    now = timezone.now()
    with transaction.atomic():
        # A run's cursor commit rewrites the queue under the same lock, keeping the ids it did not read, so
        # none queued here is lost. In id order, so two replays never wait on each other crosswise.
        integrations = list(
            Integration.objects.select_for_update()
            .filter(pk__in=by_integration)
            .order_by("pk")
            .only("pk", "backfill_pending")
        )
        by_cursor: dict[tuple[int, str], list[str]] = {}
        for entry in quarantined:
            by_cursor.setdefault((entry.integration_id, entry.purpose), []).append(entry.message_id)
        pairs = Q()
        for (integration_id, purpose), message_ids in by_cursor.items():
            pairs |= Q(integration_id=integration_id, purpose=purpose, message_id__in=message_ids)
        FetchFailure.objects.filter(pairs).delete()  # a replayed email starts its count of failed reads afresh
        for integration in integrations:
            queued = list(integration.backfill_pending)
            integration.backfill_pending = list(dict.fromkeys([*queued, *by_integration[integration.pk]]))
            integration.updated_at = now
        Integration.objects.bulk_update(integrations, ["backfill_pending", "updated_at"])
        deleted, _ = ProcessedEmail.objects.filter(
            pk__in=[e.pk for e in quarantined], outcome=ProcessedEmail.Outcome.QUARANTINED
        ).delete()
    return deleted


def ledger_read_anyway(*, entry: ProcessedEmail) -> bool:
    """Have one skipped bulk email read after all ("read this one"): its ledger row goes and its id is
    queued on its mailbox, marked to be read whatever the bulk rule says. False when it was not skipped."""
    from integrations.models import Integration

    if entry.outcome != ProcessedEmail.Outcome.SKIPPED:
        return False
    with transaction.atomic():
        integration = Integration.objects.select_for_update().get(pk=entry.integration_id)
        Integration.objects.filter(pk=integration.pk).update(
            backfill_pending=list(
                dict.fromkeys([*integration.backfill_pending, queued_id(entry.purpose, entry.message_id)])
            ),
            read_anyway=list(dict.fromkeys([*integration.read_anyway, queued_id(entry.purpose, entry.message_id)])),
            updated_at=timezone.now(),
        )
        ProcessedEmail.objects.filter(pk=entry.pk).delete()
    return True


def always_read_sender(*, user: User, entry: ProcessedEmail) -> str:
    """Always read mail from the sender of this skipped email, and read this one too. Returns the address."""
    from email.utils import parseaddr

    from extraction.models import AlwaysReadSender

    address = parseaddr(entry.sender)[1].lower()
    if address:
        AlwaysReadSender.objects.get_or_create(user=user, address=address)
    ledger_read_anyway(entry=entry)
    return address
