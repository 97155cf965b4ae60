"""Retention at 2,000,000 ledger rows and 1,000,000 run records, beside the pipeline's batch writes.

    uv run python benchmarks/retention.py [--ledger 2000000] [--runs 1000000] [--people 10000] [--seconds 20]

Setup, not timed: a fresh database `tasklift_bench_retention` (dropped at the end) and the benchmark's Redis
cache prefix. `--people` people with one mailbox each; `--runs` run records, one after another over the
last 180 days (so about half are past RUN_RETENTION_DAYS = 90), and `--ledger` ledger rows over the last
60 days (about half past LEDGER_COMPACT_DAYS = 30), each naming a run, with a Message-ID key, written by
PostgreSQL (INSERT ... SELECT FROM generate_series).

Timed:
1. The pipeline's batch write alone for `--seconds`: a transaction holding `ledger_record` of ten emails,
   as a batch commits (wall time of each).
2. The same writes while `retention_apply` runs to the end in a thread of its own (its own connection):
   each batch's transaction, from its first statement to its commit (the longest is the longest any
   retention lock is held; `longest_batch_s` adds the id window read before it and the mark kept after), the
   rows removed and compacted, and the writes' times beside it.
3. The writes alone again for `--seconds`, at the size the tables reached (the writes of step 2 grew the
   ledger by over a million rows). The slowdown is step 2 against the mean of steps 1 and 3, so that it is
   retention's, not the ledger's growth (`writes_slowed_pct`; against step 1 alone, `..._vs_before`).
4. What the tables and their indexes weigh before and after (VACUUM, as autovacuum would).

Human-readable figures first; the last line printed is one JSON object with every figure. The exit status is 1
when a check fails (a transaction of a second or more, writes slowed beyond 10 %, rows left past their age).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    SandboxProcess,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
)
from benchmarks.scale import insert_series

DATABASE = "tasklift_bench_retention"
NAME = "tasklift-bench-retention"


def seed(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.utils import timezone

    from accounts.models import User
    from extraction.models import ExtractionRun, ProcessedEmail
    from integrations.models import Integration

    params: dict[str, Any] = {"now": timezone.now(), "runs": args.runs, "ledger": args.ledger, "people": args.people}
    insert_series(User, args.people, {"id": "n", "email": "'p' || n || '@r.test'", "password": "'!'"}, params)
    insert_series(
        Integration,
        args.people,
        {
            "id": "n",
            "created_at": "%(now)s",
            "updated_at": "%(now)s",
            "user_id": "n",
            "provider": "'gmail'",
            "account_address": "'p' || n || '@r.test'",
            "credentials_encrypted": "''",
            "last_success_at": "%(now)s",
        },
        params,
    )
    age = "make_interval(secs => {days} * 86400.0 * (1 - n::float / {count}))"
    insert_series(
        ExtractionRun,
        args.runs,
        {
            "id": "n",
            "created_at": f"%(now)s - {age.format(days=180, count='%(runs)s')}",
            "updated_at": "%(now)s",
            "user_id": "1 + n %% %(people)s",
            "trigger": "'schedule'",
            "status": "'succeeded'",
        },
        params,
    )
    insert_series(
        ProcessedEmail,
        args.ledger,
        {
            "id": "n",
            "created_at": f"%(now)s - {age.format(days=60, count='%(ledger)s')}",
            "updated_at": "%(now)s",
            "integration_id": "1 + n %% %(people)s",
            "message_id": "'m' || n",
            "email_key": "'<' || n || '.' || md5(n::text) || '@mail.example.com>'",
            "outcome": "CASE WHEN n %% 3 = 0 THEN 'tasks' ELSE 'no_tasks' END",
            "run_id": "1 + ((n - 1)::bigint * %(runs)s / %(ledger)s)",
        },
        params,
    )
    with connection.cursor() as cursor:
        for table in ("accounts_user", "integrations_integration", "extraction_extractionrun"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('extraction_processedemail', 'id'), "
            "(SELECT max(id) FROM extraction_processedemail))"
        )
        cursor.execute("VACUUM ANALYZE")


class Writer(threading.Thread):
    """The pipeline's batch write, again and again: ten ledger rows in a transaction."""

    def __init__(self, run_id: int, stop: threading.Event, start_at: int) -> None:
        super().__init__(daemon=True)
        self.run_id, self.stop, self.next = run_id, stop, start_at
        self.times: list[float] = []

    def run(self) -> None:
        from django.db import connection, transaction

        from extraction.services import LedgerEntry, ledger_record

        try:
            while not self.stop.is_set():
                entries = [
                    LedgerEntry(
                        integration_id=1 + (self.next + k) % 100, message_id=f"w{self.next + k}", outcome="no_tasks"
                    )
                    for k in range(10)
                ]
                self.next += 10
                started = time.perf_counter()
                with transaction.atomic():
                    ledger_record(entries=entries, run_id=self.run_id)
                self.times.append(time.perf_counter() - started)
                time.sleep(0.005)  # a batch's Gemini call comes between two writes
        finally:
            connection.close()


def writes(seconds: float, run_id: int, start_at: int, beside: Any = None) -> tuple[list[float], Any]:
    stop = threading.Event()
    writer = Writer(run_id, stop, start_at)
    writer.start()
    outcome = None
    if beside is not None:
        outcome = beside()
    else:
        time.sleep(seconds)
    stop.set()
    writer.join()
    return writer.times, outcome


def sizes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM extraction_processedemail, extraction_extractionrun")
        cursor.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relname IN ('extraction_processedemail', 'extraction_extractionrun')"
        )
        return {name: int(size) for name, size in cursor.fetchall()}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings
    from django.utils import timezone

    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.retention import retention_apply

    started = time.perf_counter()
    seed(args)
    took = time.perf_counter() - started
    print(f"setup: {args.ledger} ledger rows, {args.runs} runs, {args.people} people in {took:.1f} s")
    writer_run = ExtractionRun.objects.create(user_id=1, trigger="manual", status="running")
    before = sizes()
    alone, _ = writes(args.seconds, writer_run.pk, 0)

    def retain() -> Any:
        total = None
        began = time.perf_counter()
        while True:  # job after job, as beat starts them, until nothing is left
            result = retention_apply(budget_s=settings.RETENTION_JOB_SECONDS)
            total = result if total is None else _add(total, result)
            if result.runs_removed == 0 and result.ledger_compacted == 0:
                break
        from django.db import connection

        connection.close()
        return total, time.perf_counter() - began

    holder: dict[str, Any] = {}

    def in_thread() -> Any:
        thread = threading.Thread(target=lambda: holder.update(result=retain()), daemon=True)
        thread.start()
        thread.join()
        return holder["result"]

    beside, (result, took) = writes(0, writer_run.pk, 10_000_000, beside=in_thread)
    # Alone again, at the size the tables have reached (before any VACUUM): the writes themselves grew the
    # ledger while retention ran (a million and more rows over its quarter hour), and that, not retention,
    # slows an insert into bigger indexes. Retention's cost is the writes beside it against both.
    alone_after, _ = writes(args.seconds, writer_run.pk, 20_000_000)
    after = sizes()
    now = timezone.now()
    past_runs = ExtractionRun.objects.filter(created_at__lt=now - timedelta(days=settings.RUN_RETENTION_DAYS)).count()
    past_keys = (
        ProcessedEmail.objects.filter(created_at__lt=now - timedelta(days=settings.LEDGER_COMPACT_DAYS + 1))
        .exclude(email_key="")
        .count()
    )
    mean_before, mean_after = statistics.fmean(alone), statistics.fmean(alone_after)
    mean_alone, mean_beside = (mean_before + mean_after) / 2, statistics.fmean(beside)
    slowdown = (mean_beside / mean_alone - 1) * 100
    slowdown_vs_before = (mean_beside / mean_before - 1) * 100
    checks = {
        "no retention transaction of a second or more": result.longest_transaction_s < 1,
        "batch writes not slowed beyond 10 %": slowdown <= 10,
        "no run past its age left (but each person's latest)": past_runs <= args.people,
        "no Message-ID key past its age left": past_keys == 0,
    }
    return {
        "ledger_rows": args.ledger,
        "run_rows": args.runs,
        "people": args.people,
        "runs_removed": result.runs_removed,
        "ledger_compacted": result.ledger_compacted,
        "retention_batches": result.batches,
        "retention_batch_rows": settings.RETENTION_BATCH,
        "retention_smallest_batch_rows": result.smallest_batch,
        "retention_batches_cancelled": result.batches_cancelled,
        "retention_transaction_limit_ms": settings.RETENTION_TRANSACTION_MS,
        "retention_s": round(took, 1),
        "rows_per_s": round((result.runs_removed + result.ledger_compacted) / took),
        "longest_transaction_s": round(result.longest_transaction_s, 3),
        "longest_batch_s": round(result.longest_batch_s, 3),
        "write_ms_alone": round(mean_alone * 1000, 3),
        "write_ms_alone_before": round(mean_before * 1000, 3),
        "write_ms_alone_after": round(mean_after * 1000, 3),
        "writes_slowed_pct_vs_before": round(slowdown_vs_before, 1),
        "write_ms_beside": round(mean_beside * 1000, 3),
        "write_ms_p95_alone": round(sorted(alone)[int(len(alone) * 0.95)] * 1000, 3),
        "write_ms_p95_beside": round(sorted(beside)[int(len(beside) * 0.95)] * 1000, 3),
        "write_ms_max_beside": round(max(beside) * 1000, 3),
        "writes_slowed_pct": round(slowdown, 1),
        "ledger_mb_before": round(before["extraction_processedemail"] / 2**20, 1),
        "ledger_mb_after": round(after["extraction_processedemail"] / 2**20, 1),
        "runs_mb_before": round(before["extraction_extractionrun"] / 2**20, 1),
        "runs_mb_after": round(after["extraction_extractionrun"] / 2**20, 1),
        "runs_left_past_age": past_runs,
        "commit": git_version(),
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def _add(a: Any, b: Any) -> Any:
    a.runs_removed += b.runs_removed
    a.ledger_compacted += b.ledger_compacted
    a.batches += b.batches
    a.batches_cancelled += b.batches_cancelled
    a.smallest_batch = min(a.smallest_batch, b.smallest_batch)
    a.longest_batch_s = max(a.longest_batch_s, b.longest_batch_s)
    a.longest_transaction_s = max(a.longest_transaction_s, b.longest_transaction_s)
    return a


def report(f: dict[str, Any]) -> None:
    print(
        f"retention: {f['runs_removed']} runs removed, {f['ledger_compacted']} ledger rows compacted in "
        f"{f['retention_batches']} transactions of {f['retention_smallest_batch_rows']} to "
        f"{f['retention_batch_rows']} rows ({f['retention_batches_cancelled']} cancelled at "
        f"{f['retention_transaction_limit_ms']} ms), {f['retention_s']} s "
        f"({f['rows_per_s']} rows/s); the longest held its locks {f['longest_transaction_s']} s "
        f"(its batch, with the id window read before it, {f['longest_batch_s']} s)"
    )
    print(
        f"writes:    {f['write_ms_alone']} ms alone ({f['write_ms_alone_before']} before, "
        f"{f['write_ms_alone_after']} after), {f['write_ms_beside']} ms beside retention "
        f"({f['writes_slowed_pct']} %); p95 {f['write_ms_p95_alone']} / {f['write_ms_p95_beside']} ms"
    )
    print(
        f"size:      ledger {f['ledger_mb_before']} -> {f['ledger_mb_after']} MB, runs {f['runs_mb_before']} -> "
        f"{f['runs_mb_after']} MB (after VACUUM)"
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ledger", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--people", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20, help="writes measured alone (20)")
    args = parser.parse_args()
    print(f"benchmark retention: {args.ledger} ledger rows, {args.runs} runs")
    sandbox = SandboxProcess()  # unused by retention; django_setup points the settings at one
    created: str | None = None
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, DATABASE)
        created = server_url
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=NAME)
        redis_purge(NAME)
        figures = bench(args)
    finally:
        try:
            if created is not None:
                from django.db import connections

                connections.close_all()
                redis_purge(NAME)
                database_drop(created, DATABASE)
        finally:
            sandbox.stop()
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
