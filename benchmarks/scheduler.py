"""The polling safety net when nothing happens: 10,000 people with an active Gmail mailbox and no new mail.

    uv run python benchmarks/scheduler.py [--people 10000] [--sample 50]

Setup, not timed: the sandbox in a process of its own, a fresh database `tasklift_bench_scheduler` (dropped
at the end), Redis database 2 with a queue and cache prefix of its own (`tasklift-bench-scheduler`, purged at
the end). `--people` people with AI consent, each with an active Gmail mailbox and a cursor, are written in
bulk. `--sample` of them (and one more, whose run warms up the process) get a real sandbox mailbox,
connected as the OAuth callback connects one (`gmail_connect`, a token that lasts a day); the others get
credentials that are encrypted like real ones but name no sandbox account, and their runs are never executed.
Every mailbox was last read a day ago, so every one is due. Push is off: this measures polling alone.

Timed:
1. One tick of beat's polling job, `extraction_schedule_job()`, called in this process: the claim of the due
   mailboxes and the idle-check jobs sent for them, one per hundred (broker messages; no run is requested
   for a mailbox that did not ring). Wall time, CPU time and SQL statements (`connection.execute_wrapper`).
   The broker messages go to the benchmark's queue.
2. The sample's idle checks (no new mail), in chunks as the jobs carry them, in this process through
   `mailboxes_idle_check`, as a worker does them: CPU time (`time.process_time`), wall time and SQL
   statements per mailbox, and the requests that reached the sandbox's Gmail. (Since issue 24 an idle
   mailbox costs an idle check, not a run: the `idle_run_*` fields measure the check that replaced the run.)

Human-readable figures first; the last line printed is one JSON object with every figure, with those of
benchmarks/scale.py for these people. The exit status is 1 when a check fails (a mailbox not claimed, more
than a message per hundred mailboxes, a run row written, a check that found mail or failed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    BENCH_REDIS_DB,
    QueryCounter,
    SandboxProcess,
    connect_sandbox_gmail,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
    sent_cursors_positioned,
)

DATABASE = "tasklift_bench_scheduler"
NAME = "tasklift-bench-scheduler"  # the benchmark's Celery queue and cache prefix


def seed(people: int, sample: int, client: Any) -> list[Any]:
    """`people` consenting people with a Gmail mailbox each, all due a poll; returns the people of the
    sample (the first of them for the warm-up), whose mailboxes are real sandbox accounts."""
    from django.conf import settings
    from django.contrib.auth.hashers import make_password
    from django.db import connection
    from django.utils import timezone

    from accounts.consent import CONSENT_VERSION
    from accounts.models import AIConsent, User
    from config.crypto import encrypt_json
    from integrations.models import Integration, SyncCursor
    from integrations.services import CURSOR_FILTERS, filter_hash

    now = timezone.now()
    password = make_password(None)  # unusable, and hashed once rather than 10,000 times
    users = User.objects.bulk_create(
        [User(email=f"person{n}@sched.test", password=password, email_verified_at=now) for n in range(people)],
        batch_size=2000,
    )
    AIConsent.objects.bulk_create(
        [AIConsent(user=u, text_version=CONSENT_VERSION, granted_at=now) for u in users], batch_size=2000
    )
    sampled = users[: sample + 1]
    for user in sampled:
        connect_sandbox_gmail(client, user, f"{user.email.split('@')[0]}@gmail.sched.test")
    sent_cursors_positioned(sampled)
    # The others: credentials shaped and encrypted as real ones, for no sandbox account (never used).
    fake = encrypt_json(
        {"token": "never-used", "refresh_token": "never-used", "expiry": None, "scopes": list(settings.GMAIL_SCOPES)}
    )
    mailboxes = Integration.objects.bulk_create(
        [
            Integration(
                user=u,
                provider="gmail",
                account_address=f"{u.email.split('@')[0]}@gmail.sched.test",
                credentials_encrypted=fake,
            )
            for u in users[sample + 1 :]
        ],
        batch_size=2000,
    )
    gmail_filter = filter_hash(CURSOR_FILTERS[(Integration.Provider.GMAIL, SyncCursor.Purpose.TASK_EXTRACTION)])
    SyncCursor.objects.bulk_create(
        [SyncCursor(integration=i, value="100000", filter_hash=gmail_filter) for i in mailboxes], batch_size=2000
    )
    Integration.objects.update(last_success_at=now - timedelta(days=1), polled_at=None, notified_at=None)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would after a bulk load
    return sampled


def tick() -> dict[str, Any]:
    """One polling tick, measured. (Its modules are imported before: beat imports them once, at start.)"""
    from django.db import connection

    from extraction.jobs import extraction_schedule_job

    counter = QueryCounter()
    cpu, wall = time.process_time(), time.perf_counter()
    with connection.execute_wrapper(counter):
        queued = extraction_schedule_job()
    return {
        "queued": queued,
        "tick_s": round(time.perf_counter() - wall, 3),
        "tick_cpu_s": round(time.process_time() - cpu, 3),
        "tick_queries": counter.count,
    }


def idle_checks(integration_ids: list[int]) -> dict[str, Any]:
    """The idle checks of these mailboxes, as a worker does one job, measured."""
    from django.db import connection

    from extraction.idlecheck import mailboxes_idle_check

    counter = QueryCounter()
    cpu, wall = time.process_time(), time.perf_counter()
    with connection.execute_wrapper(counter):
        result = mailboxes_idle_check(integration_ids=integration_ids)
    return {
        "mailboxes": len(integration_ids),
        "cpu_ms": (time.process_time() - cpu) * 1000,
        "wall_ms": (time.perf_counter() - wall) * 1000,
        "queries": counter.count,
        "quiet": result.quiet,
        "calls": result.calls,
    }


def purge_redis() -> None:
    """The benchmark's queue (the runs that were never executed) and cache keys, from Redis database 2."""
    redis_purge(NAME)


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    import redis
    from django.conf import settings

    import extraction.jobs  # noqa: F401  imported once by beat and by every worker, not in a tick
    from extraction.models import ExtractionRun
    from extraction.scheduling import CHECK_CHUNK, CLAIM_CHUNK, poll_seconds
    from integrations.models import Integration
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    started = time.perf_counter()
    sampled = seed(args.people, args.sample, client)
    print(
        f"setup: {args.people} people, {len(sampled)} with a sandbox mailbox, in {time.perf_counter() - started:.1f} s"
    )

    ticked = tick()
    broker = redis.Redis.from_url(settings.REDIS_URL)
    messages = int(broker.llen(settings.CELERY_TASK_DEFAULT_QUEUE))
    purge_redis()
    runs = ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).count()

    boxes = list(Integration.objects.filter(user__in=sampled).order_by("pk").values_list("pk", flat=True))
    idle_checks(boxes[:1])  # warms up the process (imports, HTTP pools, the Gmail discovery document)
    client.clear_requests()
    chunks = [boxes[1:][n : n + CHECK_CHUNK] for n in range(0, len(boxes) - 1, CHECK_CHUNK)]
    measured = [idle_checks(chunk) for chunk in chunks]
    gmail = client.requests("gmail")
    gemini = [r for r in client.requests("gemini") if r["method"] == "POST"]
    checked = sum(m["mailboxes"] for m in measured)
    cpu = [m["cpu_ms"] / m["mailboxes"] for m in measured]
    wall = [m["wall_ms"] / m["mailboxes"] for m in measured]
    queries = [m["queries"] / m["mailboxes"] for m in measured]
    claim_chunks = math.ceil(args.people / CLAIM_CHUNK)
    per_hour = 3600 / poll_seconds()  # no push: a check every poll interval
    run_rows = ExtractionRun.objects.count()
    checks = {
        f"every mailbox claimed ({args.people})": ticked["queued"] == args.people,
        "one broker message per hundred mailboxes": messages == math.ceil(args.people / CHECK_CHUNK),
        "no run row written for idle mailboxes": runs == run_rows == 0,
        "every idle check heard nothing new": sum(m["quiet"] for m in measured) == checked,
        # Each mailbox has two cursors since Sent mail is read (its inbox's and its Sent mail's): one call each
        "one Gmail request for each idle check (both folders)": len(gmail) == checked and not gemini,
    }
    return {
        "people": args.people,
        **ticked,
        "tick_chunks": claim_chunks,
        "tick_queries_per_chunk": round(ticked["tick_queries"] / claim_chunks, 1),
        "tick_ms_per_person": round(ticked["tick_s"] * 1000 / args.people, 3),
        "broker_messages": messages,
        "runs_queued": runs,
        "idle_runs": checked,
        "idle_run_cpu_ms": round(statistics.median(cpu), 2),
        "idle_run_cpu_ms_mean": round(statistics.fmean(cpu), 2),
        "idle_run_cpu_ms_max": round(max(cpu), 2),
        "idle_run_wall_ms": round(statistics.median(wall), 2),
        "idle_run_wall_ms_max": round(max(wall), 2),
        "idle_run_queries": round(statistics.median(queries), 3),
        "idle_run_queries_max": round(max(queries), 3),
        "idle_run_gmail_requests": round(len(gmail) / checked, 2),
        "gmail_paths": sorted({urlsplit(r["path"]).path.rsplit("/", 1)[-1] for r in gmail}),
        "idle_cpu_s_per_tick_of_all": round(statistics.fmean(cpu) * args.people / 1000, 1),
        # The figures of benchmarks/scale.py, for these people (one Gmail mailbox each, no push).
        "mailboxes": args.people,
        "due_per_tick": ticked["queued"],
        "scan_cpu_s_per_tick": ticked["tick_cpu_s"],
        "scan_statements_per_chunk": round(ticked["tick_queries"] / claim_chunks, 1),
        "broker_messages_per_tick": messages,
        "idle_check_cpu_ms": round(statistics.fmean(cpu), 3),
        "idle_check_statements": round(statistics.fmean(queries), 3),
        "provider_calls_per_mailbox_hour": round(sum(m["calls"] for m in measured) / checked * per_hour, 2),
        "run_rows_written_idle": run_rows,
        "cpu_s_per_mailbox_hour": round(
            (ticked["tick_cpu_s"] / args.people + statistics.fmean(cpu) / 1000) * per_hour, 5
        ),
        "commit": git_version(),
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def report(f: dict[str, Any]) -> None:
    print(
        f"tick:  {f['queued']} mailboxes claimed in {f['tick_s']} s ({f['tick_cpu_s']} s CPU here), "
        f"{f['tick_queries']} SQL statements ({f['tick_queries_per_chunk']} per chunk of mailboxes), "
        f"{f['broker_messages']} broker messages (idle-check jobs)"
    )
    print(
        f"idle:  {f['idle_runs']} checks, CPU {f['idle_run_cpu_ms']} ms median ({f['idle_run_cpu_ms_max']} max), wall "
        f"{f['idle_run_wall_ms']} ms median; {f['idle_run_queries']} SQL statements and "
        f"{f['idle_run_gmail_requests']} Gmail requests ({', '.join(f['gmail_paths'])}) each"
    )
    print(f"       all {f['people']} idle checks: about {f['idle_cpu_s_per_tick_of_all']} s of worker CPU a poll")
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=10_000, help="people with a mailbox, all due (default 10000)")
    parser.add_argument("--sample", type=int, default=50, help="idle runs executed and measured (default 50)")
    args = parser.parse_args()
    if args.people < 2 or not 1 <= args.sample < args.people:
        parser.error("--people must be >= 2 and --sample within 1..people-1")
    print(f"benchmark scheduler: {args.people} people with an idle Gmail mailbox, {args.sample} idle runs measured")
    sandbox = SandboxProcess()
    created: str | None = None
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, DATABASE)
        created = server_url
        os.environ["CELERY_QUEUE"] = NAME
        os.environ["PUSH_ENABLED"] = "false"  # polling alone: no watch is opened at connect
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=NAME)
        django_ready = True
        purge_redis()  # what an interrupted run left behind
        host = urlsplit(server_url)
        where = host.hostname or host.query
        print(
            f"setup: sandbox at {sandbox.url}, database {DATABASE} on {where}, Redis db {BENCH_REDIS_DB} queue {NAME}"
        )
        figures = bench(args, sandbox)
    finally:
        try:
            if django_ready:
                from django.db import connections

                purge_redis()
                connections.close_all()
            if created is not None:
                database_drop(created, DATABASE)
        finally:
            sandbox.stop()
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
