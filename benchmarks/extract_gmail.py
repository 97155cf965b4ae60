"""One extraction run over N new Gmail emails, end to end through the sandbox, measured.

    uv run python benchmarks/extract_gmail.py [--emails 1000] [--llm-latency-ms 0] [--tasks-ratio 0.5] [--seed 1]

Setup, not timed: the sandbox runs in a process of its own (so its stored mail is not in our memory
figures), a fresh database `tasklift_bench` is created on the PostgreSQL server config.settings uses (the
embedded one, or DATABASE_URL's) and dropped at the end, Redis database 2 is used (dev is 0, tests 1), a
consenting user connects a sandbox mailbox, and N emails are delivered to it: a seeded random mix of
emails with one to three asks and emails with none, so the LLM batches differ in how many tasks they write.

Timed: one ExtractionPipeline run (history pages, batched message bodies, Gemini calls, writes, commit).

Human-readable figures first; the last line printed is one JSON object with every figure. The exit
status is 1 when a check fails (the run did not succeed, Gemini calls or Gmail batches are not what the
batch sizes allow, the per-batch query count varies...).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    Benchmark,
    SandboxProcess,
    concurrency_figures,
    configure_run,
    connect_sandbox_gmail,
    git_version,
    mail_mix,
    main,
    parse_args,
    report_rest,
    report_run,
    timed_run,
)

BENCH_DATABASE = "tasklift_bench"
ADDRESS = "bench@example.com"
FIRST_DATE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # fixed, so every run sends the same prompts


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    from django.conf import settings

    from accounts.services import consent_grant, user_create
    from extraction.models import ExtractionRun, ProcessedEmail
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    user = user_create(email="bench@tasklift.test", password="bench-only-password-never-used")
    consent_grant(user=user)
    connect_sandbox_gmail(client, user, ADDRESS)

    mails = mail_mix(
        args.emails,
        args.tasks_ratio,
        args.seed,
        to=ADDRESS,
        first_date=FIRST_DATE,
        step=timedelta(minutes=1),
        body_bytes=args.body_bytes,
    )
    started = time.perf_counter()
    for mail in mails:
        client.deliver(ADDRESS, mail.raw)
    with_asks = sum(1 for m in mails if m.asks)
    expected_tasks = sum(m.asks for m in mails)
    print(
        f"setup: delivered {len(mails)} emails ({with_asks} with asks, {expected_tasks} asks in all) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    client.set_gemini_latency(args.llm_latency_ms)
    client.clear_requests()
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)

    # The run ------------------------------------------------------------------------------------------
    configure_run(args)
    measured = timed_run(run)
    pipeline, run, wall, cpu = measured.pipeline, measured.run, measured.wall, measured.cpu
    rss_before, rss_peak = measured.rss_before, measured.rss_peak

    # What reached the sandbox ----------------------------------------------------------------------------
    gmail_log = client.requests("gmail")
    outer = [r for r in gmail_log if not r["batch_part"]]
    history_pages = sum(1 for r in outer if r["method"] == "GET" and r["path"].endswith("/history"))
    batch_calls = sum(1 for r in outer if r["method"] == "POST" and r["path"] in ("/batch/gmail/v1", "/batch"))
    gemini_calls = sum(1 for r in client.requests("gemini") if r["method"] == "POST")
    stats = pipeline.batch_stats
    queries = [s.queries for s in stats] or [0]
    tasks = [s.tasks for s in stats] or [0]

    llm_batches = math.ceil(args.emails / settings.EXTRACTION_BATCH_SIZE)
    gmail_batches = math.ceil(args.emails / settings.GMAIL_BATCH_SIZE)
    checks = {
        "run succeeded": run.status == ExtractionRun.Status.SUCCEEDED,
        f"gemini calls == {llm_batches}": gemini_calls == llm_batches,
        f"gmail batch POSTs <= {gmail_batches}": batch_calls <= gmail_batches,
        "db queries per batch constant": min(queries) == max(queries),
        f"tasks created == {expected_tasks} asks": run.tasks_created == expected_tasks,
        f"ledger rows == {args.emails}": ProcessedEmail.objects.count() == args.emails,
    }
    if args.tasks_ratio > 0 and len(stats) > 1:
        checks["batches differ in tasks (else the query check proves little)"] = min(tasks) != max(tasks)

    return {
        "emails": args.emails,
        "gemini_calls": gemini_calls,
        "gmail_http_requests": len(outer),
        "db_queries_per_batch_max": max(queries),
        "db_queries_per_batch_min": min(queries),
        "wall_s": round(wall, 3),
        "peak_rss_mb": round(rss_peak, 1),
        "status": run.status,
        "error": run.error_message,
        "tasks_created": run.tasks_created,
        "ledger_rows": ProcessedEmail.objects.count(),
        "llm_latency_ms": args.llm_latency_ms,
        "tasks_ratio": args.tasks_ratio,
        "seed": args.seed,
        "gmail_batch_calls": batch_calls,
        "history_pages": history_pages,
        "gmail_other_requests": len(outer) - batch_calls - history_pages,
        "gmail_batch_parts": len(gmail_log) - len(outer),
        "gmail_errors": sum(1 for r in gmail_log if (r["status"] or 0) >= 400),
        "oauth_requests": len(client.requests("google_oauth")),
        "llm_calls_recorded": run.llm_calls,
        "llm_batches": len(stats),
        "tasks_per_batch_min": min(tasks),
        "tasks_per_batch_max": max(tasks),
        "db_queries_total": measured.queries,
        "db_queries_in_batches": sum(s.queries for s in stats),
        "prompt_tokens": run.prompt_tokens,
        "output_tokens": run.output_tokens,
        "emails_per_s": round(args.emails / wall, 1) if wall else None,
        "cpu_s": round(cpu, 3),
        "peak_rss_before_run_mb": round(rss_before, 1),
        "sandbox_peak_rss_mb": sandbox.peak_rss_mb(),
        "debug": settings.DEBUG,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "git": git_version(),
        **concurrency_figures(args, wall=wall, memory=measured.memory, checks=checks),
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def report(figures: dict[str, Any]) -> None:
    f = figures
    report_run(f)
    print(
        f"gmail: {f['gmail_http_requests']} HTTP requests = {f['history_pages']} history pages "
        f"+ {f['gmail_batch_calls']} batch POSTs + {f['gmail_other_requests']} other "
        f"({f['gmail_batch_parts']} messages.get inside the batches, {f['gmail_errors']} errors); "
        f"{f['oauth_requests']} OAuth requests"
    )
    report_rest(f)


if __name__ == "__main__":
    sys.exit(
        main(
            Benchmark(
                name="extract_gmail",
                database=BENCH_DATABASE,
                cache_prefix="tasklift-bench",
                bench=bench,
                report=report,
            ),
            parse_args(__doc__),
        )
    )
