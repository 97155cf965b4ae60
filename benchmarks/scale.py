"""A million mailboxes: one hour of the polling scan, and what its idle checks cost.

    uv run python benchmarks/scale.py [--people 500000] [--sample 10000] [--healthy 0.9] [--minutes 60]

Setup, not timed: the sandbox in a process of its own, a fresh database `tasklift_bench_scale_<people>` (dropped at
the end), Redis database 2 with a queue and cache prefix of its own (`tasklift-bench-scale`). One real Gmail and
one real Outlook mailbox are made in the sandbox and connected as the OAuth callbacks connect them; then `--people`
people, each with AI consent, a Gmail and an Outlook mailbox (2 x people mailboxes) and both its cursors (the
inbox's and Sent mail's), are written by PostgreSQL itself (INSERT ... SELECT FROM generate_series, not the ORM).
Every mailbox carries the credentials and cursors of the real sandbox mailbox of its provider, so that any of them,
checked, asks the sandbox for real and hears "nothing new" through the code a worker runs. A share `--healthy` of
the mailboxes has a live push channel that has rung (swept every EXTRACTION_SWEEP_MINUTES); the others have none
(polled every EXTRACTION_SCHEDULE_MINUTES). Each was read once within its interval, at a moment spread evenly over
it, so the hour starts in its steady state.

Timed:
1. `--minutes` ticks of beat's scan, one a minute on a simulated clock (`extraction_scan(now=...)`), as
   `extraction_schedule_job` runs it: CPU time of this process, wall time, SQL statements, broker messages
   (the idle-check jobs in the queue after the tick) and their Redis memory.
2. Of those jobs, a sample holding about `--sample` mailboxes, executed here as a worker executes them
   (`mailboxes_idle_check`): CPU time, statements and provider requests (the sandbox's log: HTTP requests,
   a Graph $batch one however many parts) per mailbox.
   The other jobs are counted, then dropped: executing them would repeat the same "nothing new".
3. The scan's cost when 10 % of the mailboxes are due at once: one scan over them.

Human-readable figures first; the last line printed is one JSON object with every figure. The exit status
is 1 when a check fails (a run row written by idle checks, more than one broker message per hundred due
mailboxes, a check that found mail or failed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    QueryCounter,
    SandboxProcess,
    connect_sandbox_gmail,
    connect_sandbox_outlook,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
    sent_cursors_positioned,
)

DATABASE = "tasklift_bench_scale"
NAME = "tasklift-bench-scale"  # the benchmark's Celery queue and cache prefix


def insert_series(model: Any, count: int, columns: dict[str, str], params: dict[str, Any]) -> None:
    """INSERT `count` rows of `model` by PostgreSQL alone: `columns` are SQL expressions over `n` (1..count);
    every other column gets its field's default (as the ORM would write it)."""
    from django.db import connection

    values = dict(columns)
    for field in model._meta.concrete_fields:
        if field.column in values or field.primary_key:
            continue
        name = f"default_{field.column}"
        default = field.get_default() if field.has_default() or not field.null else None  # "" for text
        params[name] = field.get_db_prep_save(default, connection)
        values[field.column] = f"%({name})s"
    sql = (
        f"INSERT INTO {model._meta.db_table} ({', '.join(values)}) "
        f"SELECT {', '.join(values.values())} FROM generate_series(1, %(count)s) AS n"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "count": count})


def seed(args: argparse.Namespace, client: Any, start: datetime) -> dict[str, Any]:
    """The real sandbox mailboxes, then `people` people with two mailboxes each, in steady state at `start`."""
    from django.conf import settings
    from django.contrib.auth.hashers import make_password
    from django.db import connection

    from accounts.consent import CONSENT_VERSION
    from accounts.models import AIConsent, User
    from extraction.models import ExtractionRun
    from extraction.scheduling import poll_seconds
    from integrations.models import Integration, PushChannel, SyncCursor

    real = {}
    for provider, connect in (("gmail", connect_sandbox_gmail), ("outlook", connect_sandbox_outlook)):
        user = User.objects.create(email=f"real-{provider}@scale.test", password=make_password(None))
        AIConsent.objects.create(user=user, text_version=CONSENT_VERSION)
        real[provider] = connect(client, user, f"real@{provider}.scale.test")
    sent_cursors_positioned([box.user for box in real.values()])
    run = ExtractionRun.objects.create(user=real["outlook"].user, trigger=ExtractionRun.Trigger.ADMIN)
    from extraction.pipeline import extraction_run_execute

    extraction_run_execute(run=run)  # Outlook's first cursor is a query: its first run gets a delta link
    # Each copy below has both cursors of a real mailbox: its inbox's and its Sent mail's.
    inbox, sent = SyncCursor.Purpose.TASK_EXTRACTION, SyncCursor.Purpose.SENT_MAIL
    cursors = {p: SyncCursor.objects.get(integration=i, purpose=inbox) for p, i in real.items()}
    sent_cursors = {p: SyncCursor.objects.get(integration=i, purpose=sent) for p, i in real.items()}
    for integration in real.values():
        integration.refresh_from_db()
    Integration.objects.filter(pk__in=[i.pk for i in real.values()]).update(status=Integration.Status.DISCONNECTED)
    ExtractionRun.objects.all().delete()

    people, mailboxes = args.people, 2 * args.people
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM accounts_user")
        user_base = int(cursor.fetchone()[0])
        cursor.execute("SELECT max(id) FROM integrations_integration")
        box_base = int(cursor.fetchone()[0])
    sweep = settings.EXTRACTION_SWEEP_MINUTES * 60
    poll = poll_seconds()
    healthy_every = round(1 / (1 - args.healthy)) if args.healthy < 1 else 0  # every k-th mailbox has no push
    params: dict[str, Any] = {
        "start": start,
        "user_base": user_base,
        "box_base": box_base,
        "password": make_password(None),
        "version": CONSENT_VERSION,
        "gmail_credentials": real["gmail"].credentials_encrypted,
        "outlook_credentials": real["outlook"].credentials_encrypted,
        "gmail_cursor": cursors["gmail"].value,
        "outlook_cursor": cursors["outlook"].value,
        "gmail_filter": cursors["gmail"].filter_hash,
        "outlook_filter": cursors["outlook"].filter_hash,
        "sent_purpose": sent,
        "gmail_sent_cursor": sent_cursors["gmail"].value,
        "outlook_sent_cursor": sent_cursors["outlook"].value,
        "gmail_sent_filter": sent_cursors["gmail"].filter_hash,
        "outlook_sent_filter": sent_cursors["outlook"].filter_hash,
        "sweep": sweep,
        "poll": poll,
        "k": healthy_every,
    }
    started = time.perf_counter()
    insert_series(
        User,
        people,
        {
            "id": "%(user_base)s + n",
            "email": "'person' || n || '@scale.test'",
            "password": "%(password)s",
            "date_joined": "%(start)s",
        },
        params,
    )
    insert_series(
        AIConsent,
        people,
        {"user_id": "%(user_base)s + n", "text_version": "%(version)s", "granted_at": "%(start)s"},
        params,
    )
    # Mailbox n (1..2P) belongs to person (n + 1) / 2: odd n Gmail, even n Outlook. It has push unless n is a
    # multiple of k; its last read is spread evenly over its interval before `start` (a hash of n).
    has_push = "(%(k)s = 0 OR n %% %(k)s <> 0)"
    interval = f"(CASE WHEN {has_push} THEN %(sweep)s ELSE %(poll)s END)"
    spread = "((n::bigint * 7919) %% 10007) / 10007.0"
    read_at = f"%(start)s - make_interval(secs => {interval} * {spread})"
    insert_series(
        Integration,
        mailboxes,
        {
            "id": "%(box_base)s + n",
            "created_at": "%(start)s - interval '30 days'",
            "updated_at": "%(start)s",
            "user_id": "%(user_base)s + (n + 1) / 2",
            "provider": "CASE WHEN n %% 2 = 1 THEN 'gmail' ELSE 'outlook' END",
            "account_address": "'box' || n || '@scale.test'",
            "credentials_encrypted": "CASE WHEN n %% 2 = 1 THEN %(gmail_credentials)s ELSE %(outlook_credentials)s END",
            "last_success_at": read_at,
            "notified_at": f"CASE WHEN {has_push} THEN {read_at} - interval '1 second' END",
            "next_check_at": f"{read_at} + make_interval(secs => {interval})",
        },
        params,
    )
    insert_series(
        SyncCursor,
        mailboxes,
        {
            "integration_id": "%(box_base)s + n",
            "value": "CASE WHEN n %% 2 = 1 THEN %(gmail_cursor)s ELSE %(outlook_cursor)s END",
            "filter_hash": "CASE WHEN n %% 2 = 1 THEN %(gmail_filter)s ELSE %(outlook_filter)s END",
            "updated_at": "%(start)s",
        },
        params,
    )
    insert_series(
        SyncCursor,
        mailboxes,
        {
            "integration_id": "%(box_base)s + n",
            "purpose": "%(sent_purpose)s",
            "value": "CASE WHEN n %% 2 = 1 THEN %(gmail_sent_cursor)s ELSE %(outlook_sent_cursor)s END",
            "filter_hash": "CASE WHEN n %% 2 = 1 THEN %(gmail_sent_filter)s ELSE %(outlook_sent_filter)s END",
            "updated_at": "%(start)s",
        },
        params,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {PushChannel._meta.db_table}
                (created_at, updated_at, integration_id, external_id, secret_encrypted, expires_at, last_error,
                 sent_external_id)
            SELECT %(start)s - interval '2 days', %(start)s - interval '3 hours', %(box_base)s + n, 'bench', '',
                   %(start)s + interval '3 days', '', ''
            FROM generate_series(1, %(mailboxes)s) AS n WHERE {has_push}
            """,
            {**params, "mailboxes": mailboxes},
        )
        for table in ("accounts_user", "accounts_aiconsent", "integrations_integration", "integrations_synccursor"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        cursor.execute("VACUUM ANALYZE")  # as autovacuum would after a bulk load
    return {
        "seed_s": round(time.perf_counter() - started, 1),
        "with_push": PushChannel.objects.count(),
    }


def take_jobs(broker: Any) -> list[list[int]]:
    """Every idle-check job waiting in the queue (decoded as a worker's consumer decodes it), taken off."""
    from django.conf import settings

    from config.celery import app

    jobs: list[list[int]] = []
    with app.connection_for_read() as connection, connection.SimpleQueue(settings.CELERY_TASK_DEFAULT_QUEUE) as queue:
        while True:
            try:
                message = queue.get_nowait()
            except queue.Empty:
                return jobs
            (ids,), _, _ = message.decode()
            jobs.append([int(i) for i in ids])
            message.ack()


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    import redis
    from django.conf import settings
    from django.db import connection

    import extraction.jobs  # noqa: F401  imported once by beat and by every worker, not in a tick
    from extraction.idlecheck import mailboxes_idle_check
    from extraction.jobs import extraction_idle_check_job
    from extraction.models import ExtractionRun
    from extraction.scheduling import CLAIM_CHUNK, extraction_scan, poll_seconds
    from integrations.models import Integration
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    start = datetime.now().astimezone().replace(microsecond=0)
    seeded = seed(args, client, start)
    mailboxes = 2 * args.people
    pushing, took = seeded["with_push"], seeded["seed_s"]
    print(f"setup: {args.people} people, {mailboxes} mailboxes ({pushing} with push) in {took} s")
    broker = redis.Redis.from_url(settings.REDIS_URL)
    queue_name = settings.CELERY_TASK_DEFAULT_QUEUE

    sweep, poll = settings.EXTRACTION_SWEEP_MINUTES, poll_seconds() / 60
    expected_checks = mailboxes * (args.healthy * 60 / sweep + (1 - args.healthy) * 60 / poll) * args.minutes / 60
    stride = max(1, round(expected_checks / args.sample))  # one job in `stride` is executed
    ticks: list[dict[str, Any]] = []
    executed: list[dict[str, Any]] = []
    job_number = 0
    mailboxes_per_job: list[int] = []
    redis_bytes: list[float] = []
    # A warm-up check (imports, HTTP pools, the discovery document), not measured.
    first = Integration.objects.filter(status="active").order_by("pk").values_list("pk", flat=True)[:2]
    mailboxes_idle_check(integration_ids=list(first), now=start)
    for minute in range(args.minutes):
        now = start + timedelta(minutes=minute)
        counter = QueryCounter()
        cpu, wall = time.process_time(), time.perf_counter()
        with connection.execute_wrapper(counter):
            result = extraction_scan(now=now, check_job=extraction_idle_check_job, budget_s=10_000)
        tick = {
            "due": result.claimed,
            "cpu_s": time.process_time() - cpu,
            "wall_s": time.perf_counter() - wall,
            "statements": counter.count,
            "chunks": max(1, -(-result.claimed // CLAIM_CHUNK)),
            "messages": int(broker.llen(queue_name)),
            "runs_queued": result.runs_queued,
        }
        if tick["messages"]:
            redis_bytes.append((broker.memory_usage(queue_name) or 0) / tick["messages"])
        ticks.append(tick)
        for ids in take_jobs(broker):
            mailboxes_per_job.append(len(ids))
            job_number += 1
            if job_number % stride:
                continue
            client.clear_requests()
            counter = QueryCounter()
            cpu = time.process_time()
            with connection.execute_wrapper(counter):
                checked = mailboxes_idle_check(integration_ids=ids, now=now)
            executed.append(
                {
                    "mailboxes": len(ids),
                    "cpu_s": time.process_time() - cpu,
                    "statements": counter.count,
                    "calls": checked.calls,
                    # HTTP requests (a $batch's parts are logged apart: Graph counts them, but one call)
                    "requests": len(
                        [r for s in ("gmail", "graph") for r in client.requests(s) if not r.get("batch_part")]
                    ),
                    "quiet": checked.quiet,
                    "failed": checked.failed + checked.with_mail,
                }
            )
        if minute % 10 == 9:
            print(f"  minute {minute + 1}: {tick['due']} due, scan {tick['cpu_s']:.2f} s CPU, {len(executed)} jobs run")

    # 10 % due at once (a beat that was down, a restart): one scan over them.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE integrations_integration SET next_check_at = %s WHERE status = 'active' AND id %% 10 = 3",
            [start + timedelta(minutes=args.minutes)],
        )
    take_jobs(broker)
    burst_at = start + timedelta(minutes=args.minutes)
    cpu, wall = time.process_time(), time.perf_counter()
    burst = extraction_scan(now=burst_at, check_job=extraction_idle_check_job, budget_s=10_000)
    burst_cpu, burst_wall = time.process_time() - cpu, time.perf_counter() - wall
    burst_messages = int(broker.llen(queue_name))
    redis_purge(NAME)

    checked_mailboxes = sum(e["mailboxes"] for e in executed)
    due = [t["due"] for t in ticks]
    total_checks = sum(due)
    check_cpu_ms = sum(e["cpu_s"] for e in executed) * 1000 / checked_mailboxes
    scan_cpu = sum(t["cpu_s"] for t in ticks)
    calls_per_check = sum(e["requests"] for e in executed) / checked_mailboxes
    hours = args.minutes / 60
    run_rows = ExtractionRun.objects.count()
    messages = sum(t["messages"] for t in ticks)
    checks = {
        "no run row written by idle checks": run_rows == 0,
        "at most one broker message per hundred due mailboxes": all(
            t["messages"] * 100 <= t["due"] + 99 for t in ticks
        ),
        "every check executed heard nothing new": all(e["failed"] == 0 for e in executed),
        "one provider call per checked mailbox": abs(calls_per_check - 1) < 1e-9,
    }
    return {
        "mailboxes": mailboxes,
        "people": args.people,
        "with_push": seeded["with_push"],
        "healthy_share": args.healthy,
        "minutes": args.minutes,
        "sweep_minutes": sweep,
        "poll_minutes": poll,
        "seed_s": seeded["seed_s"],
        "due_per_tick": round(statistics.fmean(due), 1),
        "due_per_tick_max": max(due),
        "scan_cpu_s_per_tick": round(scan_cpu / len(ticks), 3),
        "scan_cpu_s_per_tick_max": round(max(t["cpu_s"] for t in ticks), 3),
        "scan_wall_s_per_tick": round(statistics.fmean(t["wall_s"] for t in ticks), 3),
        "scan_cpu_ms_per_due": round(scan_cpu * 1000 / total_checks, 4),
        "scan_statements_per_chunk": round(sum(t["statements"] for t in ticks) / sum(t["chunks"] for t in ticks), 2),
        "broker_messages_per_tick": round(messages / len(ticks), 1),
        "mailboxes_per_message": round(statistics.fmean(mailboxes_per_job), 1),
        "redis_bytes_per_queued_job": round(statistics.fmean(redis_bytes), 0) if redis_bytes else None,
        "idle_checks_executed": checked_mailboxes,
        "idle_check_jobs_executed": len(executed),
        "idle_check_cpu_ms": round(check_cpu_ms, 3),
        "idle_check_statements": round(sum(e["statements"] for e in executed) / checked_mailboxes, 3),
        "idle_check_statements_per_job": round(statistics.fmean(e["statements"] for e in executed), 1),
        "idle_check_provider_requests": round(sum(e["requests"] for e in executed) / checked_mailboxes, 3),
        "checks_per_mailbox_hour": round(total_checks / mailboxes / hours, 3),
        "provider_calls_per_mailbox_hour": round(total_checks * calls_per_check / mailboxes / hours, 3),
        "run_rows_written_idle": run_rows,
        "cpu_s_per_mailbox_hour": round((scan_cpu + total_checks * check_cpu_ms / 1000) / mailboxes / hours, 6),
        "worker_cores_for_idle_checks": round(total_checks * check_cpu_ms / 1000 / (args.minutes * 60), 2),
        "burst_due": burst.claimed,
        "burst_scan_cpu_s": round(burst_cpu, 3),
        "burst_scan_wall_s": round(burst_wall, 3),
        "burst_broker_messages": burst_messages,
        "commit": git_version(),
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def report(f: dict[str, Any]) -> None:
    print(
        f"scan:   {f['due_per_tick']} mailboxes due a tick (of {f['mailboxes']}), {f['scan_cpu_s_per_tick']} s CPU "
        f"({f['scan_cpu_ms_per_due']} ms a due mailbox), {f['scan_statements_per_chunk']} statements a chunk, "
        f"{f['broker_messages_per_tick']} broker messages ({f['redis_bytes_per_queued_job']} bytes of Redis each)"
    )
    print(
        f"check:  {f['idle_check_cpu_ms']} ms CPU, {f['idle_check_statements']} statements and "
        f"{f['idle_check_provider_requests']} provider requests a mailbox ({f['idle_checks_executed']} checked)"
    )
    print(
        f"hour:   {f['provider_calls_per_mailbox_hour']} provider calls and {f['cpu_s_per_mailbox_hour']} s CPU a "
        f"mailbox; {f['worker_cores_for_idle_checks']} worker cores for every idle check; "
        f"{f['run_rows_written_idle']} run rows"
    )
    print(
        f"burst:  {f['burst_due']} due at once: {f['burst_scan_cpu_s']} s CPU, {f['burst_scan_wall_s']} s wall, "
        f"{f['burst_broker_messages']} broker messages"
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=500_000, help="people, each with 2 mailboxes (500000)")
    parser.add_argument("--sample", type=int, default=10_000, help="mailboxes whose checks are executed (10000)")
    parser.add_argument("--healthy", type=float, default=0.9, help="share of mailboxes with working push (0.9)")
    parser.add_argument("--minutes", type=int, default=60, help="minutes of scanning simulated (60)")
    args = parser.parse_args()
    if args.people < 10 or not 0 <= args.healthy < 1 or args.minutes < 1 or args.sample < 1:
        parser.error("--people >= 10, --healthy in [0, 1), --minutes >= 1, --sample >= 1")
    print(f"benchmark scale: {2 * args.people} mailboxes, {args.minutes} minutes of scanning")
    sandbox = SandboxProcess(require_tls=True)
    created: str | None = None
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database = f"{DATABASE}_{args.people}"  # a smoke test beside a full run never drops the other's
        database_url = database_create(server_url, database)
        created = server_url
        os.environ["CELERY_QUEUE"] = NAME
        os.environ["PUSH_ENABLED"] = "false"  # the channels are written by the benchmark; none is opened
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=NAME)
        django_ready = True
        redis_purge(NAME)
        figures = bench(args, sandbox)
    finally:
        try:
            if django_ready:
                from django.db import connections

                redis_purge(NAME)
                connections.close_all()
            if created is not None:
                database_drop(created, f"{DATABASE}_{args.people}")
        finally:
            sandbox.stop()
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
