"""A burst of doorbells for one person: 50 notifications within about 10 s, duplicates and out of order.

    uv run python benchmarks/webhook_burst.py [--emails 25] [--spread-ms 10000] [--llm-latency-ms 1000]

Tasklift is served for real (benchmarks/push_common.py). `--emails` emails with one ask each are delivered
at once, split between the person's Gmail and Outlook inboxes; the sandbox's Pub/Sub and Graph send every
notification twice (`duplicate`), each copy after a random delay within `--spread-ms` (`jitter`, which
reorders them), so about 2 x emails notifications ring within the spread. Gmail's own limit of about one
push a second per mailbox is turned off in the sandbox for this burst, so that every ring arrives.

Then it waits until every email is in the ledger and no run is left. The checks: at most 2 runs for the
whole burst (one in flight plus one queued: the coalescing), every email sent to Gemini once, one task
per email, no duplicate. Last line: JSON with `notifications`, `runs`, `gemini_calls`, `tasks`,
`duplicates` (exit status 1 when a check fails).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.common import git_version
from benchmarks.push_common import served_site, wait_until

MAX_RUNS = 2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emails", type=int, default=25, help="emails in the burst (default 25: 50 rings)")
    parser.add_argument("--spread-ms", type=int, default=10_000, help="rings spread over (default 10000 ms)")
    parser.add_argument("--llm-latency-ms", type=int, default=1000, help="sandbox Gemini latency (default 1000)")
    return parser.parse_args()


def email(n: int) -> str:
    from tests.mail import rfc822

    return rfc822(f"Burst {n}", f"Hi,\n\nPlease send the report for project {7000 + n} by Friday.\n\nAlex\n")


def _count(delivery: dict[str, Any]) -> int:
    if delivery["service"] != "graph":
        return 1
    body = delivery["body"]
    value = (json.loads(body) if isinstance(body, str) else body).get("value", [])
    return len(value) if isinstance(value, list) else 1


def bench(args: argparse.Namespace) -> dict[str, Any]:
    with served_site(name="webhook_burst", llm_latency_ms=args.llm_latency_ms) as site:
        from django.db.models import Count

        from extraction.models import ExtractionRun, ProcessedEmail
        from tasks.models import Task

        client = site.client
        client.push_settings(gmail_rate_limit=False)
        for service in ("pubsub", "graph"):
            client.push_behaviour(service, duplicate=1, jitter_ms=args.spread_ms, seed=7)
        first_run = ExtractionRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        started = time.monotonic()
        delivered = []
        for n in range(args.emails):
            if n % 2 == 0:
                delivered.append(str(client.deliver(site.gmail.account_address, email(n))["id"]))
            else:
                delivered.append(str(client.deliver_outlook(site.outlook.account_address, email(n))["id"]))
        client.wait_notifications_idle(timeout=args.spread_ms / 1000 + 30)
        rings_s = time.monotonic() - started
        runs = ExtractionRun.objects.filter(pk__gt=first_run)
        wait_until(
            lambda: (
                ProcessedEmail.objects.filter(message_id__in=delivered).count() == len(delivered)
                and not runs.exclude(status__in=ExtractionRun.FINISHED).exists()
            ),
            120,
            "every email handled",
        )
        wall_s = time.monotonic() - started
        rings = [n for n in client.notifications() if n["kind"] in ("push", "notification")]
        answered = [n for n in rings if n["status"] is not None and not n["dropped"]]
        tasks = Task.objects.filter(user=site.user, source_id__in=delivered)
        duplicates = sum(
            row["n"] - 1 for row in tasks.values("source", "source_id", "title_key").annotate(n=Count("pk"))
        )
        prompts = [r["body"] for r in client.requests("gemini")]
        sent_twice = sum(1 for n in range(args.emails) if sum(f"project {7000 + n} " in p for p in prompts) > 1)
        figures: dict[str, Any] = {
            "benchmark": "webhook_burst",
            "version": git_version(),
            "emails": len(delivered),
            "notifications": sum(_count(n) for n in answered),  # a Graph POST may carry several
            "posts": len(answered),
            "notifications_by_status": dict(
                sorted((str(s), sum(1 for n in answered if n["status"] == s)) for s in {n["status"] for n in answered})
            ),
            "rings_within_s": round(rings_s, 1),
            "runs": runs.count(),
            "runs_by_trigger": dict(
                sorted((t, runs.filter(trigger=t).count()) for t in set(runs.values_list("trigger", flat=True)))
            ),
            "gemini_calls": sum(runs.values_list("llm_calls", flat=True)),
            "emails_sent_twice": sent_twice,
            "tasks": tasks.count(),
            "duplicates": duplicates,
            "handled": ProcessedEmail.objects.filter(message_id__in=delivered).count(),
            "wall_s": round(wall_s, 1),
        }
    figures["checks_failed"] = [
        name
        for name, ok in (
            ("at most 2 runs", figures["runs"] <= MAX_RUNS),
            ("every email handled", figures["handled"] == figures["emails"]),
            ("one task per email", figures["tasks"] == figures["emails"]),
            ("no duplicate", figures["duplicates"] == 0),
            ("no email sent twice", figures["emails_sent_twice"] == 0),
        )
        if not ok
    ]
    return figures


def main() -> int:
    args = parse_args()
    print(
        f"benchmark webhook_burst: {args.emails} emails (Gmail and Outlook), every notification twice within "
        f"{args.spread_ms} ms, Gemini latency {args.llm_latency_ms} ms"
    )
    figures = bench(args)
    print(
        f"{figures['notifications']} notifications ({figures['posts']} POSTs) in {figures['rings_within_s']} s "
        f"-> {figures['runs']} runs "
        f"{figures['runs_by_trigger']}, {figures['gemini_calls']} Gemini calls, {figures['tasks']} tasks, "
        f"{figures['duplicates']} duplicates, {figures['emails_sent_twice']} emails sent twice"
    )
    for name in figures["checks_failed"]:
        print(f"CHECK FAILED: {name}")
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
