"""Tables that grow with the mail, not with time: old run records removed, old ledger rows compacted.

Each batch is its own short transaction over at most RETENTION_BATCH rows, claimed FOR UPDATE SKIP LOCKED (a
row a run is writing is left for the next batch, never waited for), and the job stops after
RETENTION_JOB_SECONDS, resting between batches RETENTION_REST_FACTOR times as long as each took, so the
pipeline's writes go on beside it (on two cores, resting only as long as a batch took slowed them 17 %). A
batch's transaction is bounded by time, not only by rows: each of its statements may run only for what is left
of RETENTION_TRANSACTION_MS (PostgreSQL's statement_timeout, set for the transaction alone); a batch that
would hold its locks longer is cancelled and rolled back, whole, and the batches after it are smaller. The
size follows the time: halved when a batch took over half the limit, doubled (up to RETENTION_BATCH) when it
took under an eighth, and kept for the next job. Where a batch stopped is kept in the cache too, so that the
next batch (and the next job) starts there instead of reading the rows already done again; a lost mark only
costs one read of them.

What is kept, and why (docs/scale.md, "Retention"):
- A run record older than RUN_RETENTION_DAYS is removed, except each person's latest run (what the pages
  show as the last run); rows that named it (ledger, tasks, their history, the lease) keep their meaning
  with `run` empty, as when Django's SET_NULL clears them.
- A ledger row is what keeps an email from being sent to Gemini twice, and an email can be listed again as
  long as it is in the mailbox: Gmail lists it when a label puts it back in the inbox, Graph whenever it
  changes (read, flagged, moved). So its identity (mailbox, message id, outcome, conversation) stays as long
  as the mailbox is connected. What only the recent past needs is cleared after LEDGER_COMPACT_DAYS: the
  Message-ID key that dedupes copies of one email reaching two mailboxes (copies arrive within minutes) and
  its index entry, and the sender, subject and error texts (quarantined emails keep theirs: a person still
  sees and replays them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from psycopg.errors import QueryCanceled

from extraction.models import ExtractionRun, ProcessedEmail

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

logger = logging.getLogger(__name__)

RUNS_MARK = "retention:runs:after"
LEDGER_MARK = "retention:ledger:after"
SIZE_MARK = "retention:batch"  # the batch size the last job ended on: the next starts there
# The tables whose rows name a run (each `run` a nullable foreign key, SET_NULL).
NAMING_RUNS = ("extraction_processedemail", "tasks_task", "tasks_taskevent", "extraction_extractionlease")


MIN_BATCH = 10


@dataclass
class RetentionResult:
    runs_removed: int = 0
    ledger_compacted: int = 0
    batches: int = 0
    longest_batch_s: float = 0.0  # a whole batch: its id window read (no lock), its transaction and its mark
    longest_transaction_s: float = 0.0  # from the first statement to the commit: how long its locks were held
    batches_cancelled: int = 0  # over RETENTION_TRANSACTION_MS, rolled back and done again smaller
    smallest_batch: int = 0


class _Deadline:
    """A batch's statements, each allowed what is left of the transaction's time (then PostgreSQL cancels
    it, and the transaction rolls back)."""

    def __init__(self, cursor: CursorWrapper) -> None:
        self.cursor = cursor
        self.ends = time.monotonic() + settings.RETENTION_TRANSACTION_MS / 1000

    def execute(self, sql: str, params: list[Any]) -> None:
        left_ms = int((self.ends - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise _OverTime
        self.cursor.execute("SELECT set_config('statement_timeout', %s, true)", [f"{left_ms}ms"])
        self.cursor.execute(sql, params)


class _OverTime(Exception):
    """A batch that used up its transaction's time between two statements."""


@contextmanager
def _batch(result: RetentionResult) -> Iterator[_Deadline]:
    """One batch's transaction, its statements bounded by a _Deadline, its length kept in `result`. Its commit
    waits for the disk like any other: leaving the flush to the WAL writer (synchronous_commit off) was tried
    and slowed the runs' writes beside it (11 %, and 22 % with a flush of its own after it; 0.8 % so)."""
    began = time.monotonic()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            yield _Deadline(cursor)
    finally:  # a batch cancelled at its limit held its locks until its rollback
        result.longest_transaction_s = max(result.longest_transaction_s, time.monotonic() - began)


def retention_apply(*, now: datetime | None = None, budget_s: float | None = None) -> RetentionResult:
    """Remove old runs and compact old ledger rows in batches, for at most `budget_s` seconds."""
    now = now or timezone.now()
    budget = settings.RETENTION_JOB_SECONDS if budget_s is None else budget_s
    started = time.monotonic()
    result = RetentionResult(smallest_batch=settings.RETENTION_BATCH)
    limit_s = settings.RETENTION_TRANSACTION_MS / 1000
    size = min(settings.RETENTION_BATCH, max(MIN_BATCH, int(cache.get(SIZE_MARK) or settings.RETENTION_BATCH)))
    for step in (_ledger_batch, _runs_batch):  # the ledger first: fewer of its rows name a run left to remove
        while time.monotonic() - started < budget:
            batch_started = time.monotonic()
            try:
                more = step(now, size, result)
            except (OperationalError, _OverTime) as error:  # cancelled at the limit: nothing of it was kept
                if isinstance(error, OperationalError) and not isinstance(error.__cause__, QueryCanceled):
                    raise
                logger.info("retention: a batch of %d rows took over %d ms, cancelled", size, limit_s * 1000)
                result.batches_cancelled += 1
                more = True
                size = max(MIN_BATCH, size // 2)
            else:
                result.batches += 1
                took = time.monotonic() - batch_started
                if took > limit_s / 2:
                    size = max(MIN_BATCH, size // 2)
                elif took < limit_s / 8:
                    size = min(settings.RETENTION_BATCH, size * 2)
            result.smallest_batch = min(result.smallest_batch, size)
            took = time.monotonic() - batch_started
            result.longest_batch_s = max(result.longest_batch_s, took)
            if not more:
                break
            # A rest RETENTION_REST_FACTOR times the batch: retention takes at most a quarter (at 3) of one
            # database connection's time, and of the WAL's, from the runs writing beside it.
            time.sleep(took * settings.RETENTION_REST_FACTOR)
    cache.set(SIZE_MARK, size, timeout=None)
    logger.info("retention: %s", result)
    return result


def _window(table: str, mark: str, cut: datetime, size: int) -> tuple[list[int], int, bool]:
    """The next `size` ids of `table` after the cached mark (ids grow with time), cut before the
    first row younger than `cut` (everything after it is younger still): (the old ids, the mark, and
    whether more old rows may follow)."""
    after = int(cache.get(mark) or 0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, created_at < %s FROM {table} WHERE id > %s ORDER BY id LIMIT %s",  # noqa: S608
            [cut, after, size],
        )
        rows = cursor.fetchall()
    old: list[int] = []
    for row_id, is_old in rows:
        if not is_old:
            return old, after, False
        old.append(int(row_id))
    return old, after, len(rows) == size


def _advance(mark: str, after: int, old: list[int], done: set[int]) -> None:
    """Move the mark past the old rows handled; a row skipped (a writer held it) is met again next time."""
    skipped = [i for i in old if i not in done]
    last = (min(skipped) - 1) if skipped else (old[-1] if old else after)
    if last > after:
        cache.set(mark, last, timeout=None)


def _ledger_batch(now: datetime, size: int, result: RetentionResult) -> bool:
    """Compact one batch of ledger rows older than LEDGER_COMPACT_DAYS."""
    table = ProcessedEmail._meta.db_table
    old, after, more = _window(table, LEDGER_MARK, now - timedelta(days=settings.LEDGER_COMPACT_DAYS), size)
    done: set[int] = set()
    if old:
        with _batch(result) as deadline:
            deadline.execute(  # our table names and settings only: the values are parameters
                f"""
                WITH locked AS (
                    SELECT id, (outcome <> %s AND (email_key <> '' OR sender <> '' OR subject <> ''
                                OR last_error <> '')) AS compact
                    FROM {table} WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED
                ), compacted AS (
                    UPDATE {table} e SET email_key = '', sender = '', subject = '', last_error = ''
                    FROM locked WHERE e.id = locked.id AND locked.compact RETURNING e.id
                )
                SELECT id, id IN (SELECT id FROM compacted) FROM locked
                """,  # noqa: S608
                [ProcessedEmail.Outcome.QUARANTINED, old],
            )
            rows = deadline.cursor.fetchall()
        done = {int(r[0]) for r in rows}
        result.ledger_compacted += sum(1 for r in rows if r[1])
    _advance(LEDGER_MARK, after, old, done)
    return more


def _runs_batch(now: datetime, size: int, result: RetentionResult) -> bool:
    """Remove one batch of finished runs older than RUN_RETENTION_DAYS (each person's latest stays)."""
    runs = ExtractionRun._meta.db_table
    old, after, more = _window(runs, RUNS_MARK, now - timedelta(days=settings.RUN_RETENTION_DAYS), size)
    done: set[int] = set()
    if old:
        with _batch(result) as deadline:
            deadline.execute(
                f"""
                SELECT r.id, r.status = ANY(%s)
                       AND EXISTS (SELECT 1 FROM {runs} later WHERE later.user_id = r.user_id AND later.id > r.id)
                FROM {runs} r WHERE r.id = ANY(%s) FOR UPDATE SKIP LOCKED
                """,  # noqa: S608
                [list(ExtractionRun.FINISHED), old],
            )
            rows = deadline.cursor.fetchall()
            doomed = [int(r[0]) for r in rows if r[1]]
            if doomed:
                # What Django's SET_NULL would do, one statement per table (each run_id is indexed).
                for table in NAMING_RUNS:
                    deadline.execute(f"UPDATE {table} SET run_id = NULL WHERE run_id = ANY(%s)", [doomed])  # noqa: S608
                deadline.execute(f"DELETE FROM {runs} WHERE id = ANY(%s)", [doomed])  # noqa: S608
        done = {int(r[0]) for r in rows}
        result.runs_removed += len(doomed)
    _advance(RUNS_MARK, after, old, done)
    return more
