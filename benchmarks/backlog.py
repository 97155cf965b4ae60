"""A backlog bigger than one job: it must finish in slices, none failed, nothing lost, without beat.

    uv run python benchmarks/backlog.py [--emails 3000] [--llm-latency-ms 2000] [--soft-limit 60]

A real Celery worker (prefork, 1 process) with the job's soft time limit scaled down to `--soft-limit`
seconds (the run's own budget, EXTRACTION_RUN_SECONDS, follows it: two thirds), so that one job cannot read
the backlog: `--emails` emails in one Gmail inbox, Gemini latency `--llm-latency-ms`. No beat and no
person after the first "Extract now": each run that reaches its budget ends as `continued` and queues its
continuation itself. The benchmark waits until a run succeeds and none is left.

The figures come from the database and the sandbox's log: `runs` (by status), `failed_runs` (must be 0),
`resent_emails` (emails sent to Gemini more than once: at most 10 per cut), `gemini_calls`, `wall_s`,
`lost` (emails not in the ledger at the end: must be 0). Last line: one JSON object; exit status 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.common import (
    SandboxProcess,
    connect_sandbox_gmail,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
)
from benchmarks.push_common import _start, _stop, wait_until

NAME = "tasklift-backlog"  # its Celery queue and cache prefix
DATABASE = "tasklift_backlog"
ADDRESS = "backlog@example.com"
NUMBER = re.compile(r"project (\d+) ")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emails", type=int, default=3000, help="emails in the backlog (default 3000)")
    parser.add_argument("--llm-latency-ms", type=int, default=2000, help="sandbox Gemini latency (default 2000)")
    parser.add_argument("--soft-limit", type=int, default=60, help="the job's soft time limit, s (default 60)")
    parser.add_argument("--timeout", type=float, default=1800, help="give up after this many s (default 1800)")
    return parser.parse_args()


def email(n: int) -> str:
    from tests.mail import rfc822

    return rfc822(f"Backlog {n}", f"Hi,\n\nPlease send the report for project {n} by Friday.\n\nAlex\n")


def bench(args: argparse.Namespace, sandbox: SandboxProcess, log: Any) -> dict[str, Any]:
    from django.conf import settings

    from accounts.services import consent_grant, user_create
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.services import extraction_run_request
    from sandbox.client import SandboxClient
    from tasks.models import Task

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    user = user_create(email="backlog@tasklift.test", password="bench-only-password-never-used")
    consent_grant(user=user)
    integration = connect_sandbox_gmail(client, user, ADDRESS)
    started = time.perf_counter()
    for n in range(args.emails):
        client.deliver(ADDRESS, email(n))
    print(f"setup: {args.emails} emails delivered in {time.perf_counter() - started:.0f} s")
    client.set_gemini_latency(args.llm_latency_ms)
    client.clear_requests()

    env = dict(os.environ)
    worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork", "--concurrency", "1"]
    worker += ["-Q", NAME, "-n", "backlog@%h", "--loglevel", "WARNING"]
    worker += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    process = _start(worker, env, log)
    try:
        started = time.perf_counter()
        extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)
        runs = ExtractionRun.objects.filter(user=user)
        wait_until(
            lambda: (
                runs.filter(status=ExtractionRun.Status.SUCCEEDED).exists()
                and not runs.exclude(status__in=ExtractionRun.FINISHED).exists()
            ),
            args.timeout,
            "the backlog",
        )
        wall = time.perf_counter() - started
    finally:
        _stop(process)

    prompts = [r["body"] for r in client.requests("gemini") if "generateContent" in r["path"]]
    sent = Counter(int(n) for body in prompts for n in set(NUMBER.findall(body)))
    handled = ProcessedEmail.objects.filter(integration=integration).count()
    cuts = runs.filter(status=ExtractionRun.Status.CONTINUED).count()
    resent = sum(1 for times in sent.values() if times > 1)
    parallel = settings.EXTRACTION_LLM_CONCURRENCY
    figures: dict[str, Any] = {
        "benchmark": "backlog",
        "version": git_version(),
        "emails": args.emails,
        "llm_latency_ms": args.llm_latency_ms,
        "soft_limit_s": args.soft_limit,
        "runs": runs.count(),
        "runs_by_status": dict(Counter(runs.values_list("status", flat=True))),
        "runs_by_trigger": dict(Counter(runs.values_list("trigger", flat=True))),
        "failed_runs": runs.filter(status=ExtractionRun.Status.FAILED).count(),
        "cuts": cuts,
        "resent_emails": resent,
        "gemini_calls": len(prompts),
        "tasks": Task.objects.filter(user=user).count(),
        "wall_s": round(wall, 1),
        "lost": args.emails - handled,
    }
    figures["checks_failed"] = [
        name
        for name, ok in (
            ("no failed run", figures["failed_runs"] == 0),
            ("nothing lost", figures["lost"] == 0),
            # A cut drops the answers of the calls in flight (up to EXTRACTION_LLM_CONCURRENCY batches of ten)
            # and the next run sends those emails again: never more.
            ("at most one batch per parallel call re-sent per cut", resent <= 10 * parallel * max(cuts, 1)),
            ("one task per email", figures["tasks"] == args.emails),
            ("more than one run (the soft limit cut it)", figures["runs"] > 1),
        )
        if not ok
    ]
    return figures


def main() -> int:
    args = parse_args()
    print(
        f"benchmark backlog: {args.emails} emails, Gemini latency {args.llm_latency_ms} ms, the job's soft limit "
        f"{args.soft_limit} s, one worker, no beat"
    )
    sandbox = SandboxProcess()
    log = tempfile.TemporaryFile()  # noqa: SIM115  closed below
    created: str | None = None
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, DATABASE)
        created = server_url
        os.environ.update(
            CELERY_QUEUE=NAME,
            CELERY_TASK_SOFT_TIME_LIMIT=str(args.soft_limit),
            CELERY_TASK_TIME_LIMIT=str(args.soft_limit + 30),
        )
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=NAME)
        django_ready = True
        figures = bench(args, sandbox, log)
    except BaseException:
        log.seek(0)
        print(log.read().decode(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        try:
            if django_ready:
                from django.db import connections

                redis_purge(NAME)
                connections.close_all()
            if created is not None:
                database_drop(created, DATABASE)
        finally:
            sandbox.stop()
            log.close()
    print(
        f"{figures['emails']} emails in {figures['wall_s']} s: {figures['runs']} runs {figures['runs_by_status']}, "
        f"{figures['gemini_calls']} Gemini calls, {figures['resent_emails']} emails re-sent, lost {figures['lost']}"
    )
    for name in figures["checks_failed"]:
        print(f"CHECK FAILED: {name}")
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
