"""Reminders that ring on time: 10,000 tasks whose reminders fall due within one minute, across 2,000 people in
several time zones, rung by email and Web Push by worker processes, one of them killed on the way.

    uv run python benchmarks/reminders.py [--people 2000] [--reminders 10000] [--window 60] [--push-share 0.5]
                                          [--workers 2] [--chunk 200] [--lease 60] [--lead 15]

Setup, not timed: a fresh database `tasklift_bench_reminders` (dropped at the end), Redis database 2 with a cache
prefix of its own, a sandbox (its Web Push service) and a mail relay that keeps what it is given (`python -m
sandbox.smtp`), each its own process. `--people` people in six time zones; `--reminders` open tasks among them,
each due at a time of the person's zone with a reminder 0, 10 or 30 minutes before it, so that the reminders
fall due one after another over `--window` seconds, starting `--lead` seconds after the setup began. A share
`--push-share` of the people turned notifications on in a browser (a subscription at the sandbox's push
service, made with the server's VAPID key).

Timed: `--workers` worker processes ring what is due (what beat's chunk jobs do: `reminders_send_due()` in a
loop, real time) until every reminder is recorded. The first is killed (SIGKILL) in its second chunk, after a
ring it had journalled but before its chunk was recorded (`reminder_journalled`), and started again, as the
process supervisor would; the chunk it held comes back when its lease (`--lease` seconds) ends.

Figures: `reminders_due`; `sent`, the reminders the relay received (each once: `duplicated` counts copies,
`missing` those never received); `late_p50_s`, `late_p95_s`, `late_max_s`: when the relay received a
reminder's mail after its time; `statements_per_reminder`: the SQL statements of the surviving workers' chunks
per reminder they rang; `email_sent`, `web_push_sent` (what the push service delivered, decrypted) and
`web_push_missing` / `web_push_duplicated` against the reminders of people with a browser.

Readable figures first, then the last line: one JSON object. Exit status 1 when a check in `checks_failed`
fails: nothing missing or duplicated (email and push), `late_p95_s` at most 60, the worker killed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    ROOT,
    SandboxProcess,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
)
from benchmarks.people import relay_start
from config.ports import free_ports

DATABASE = "tasklift_bench_reminders"
NAME = "tasklift-bench-reminders"  # the cache prefix
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "America/Los_Angeles", "UTC")
BEFORE = (0, 10, 30)  # minutes before the task's time
MESSAGE_ID = re.compile(rb"^message-id:\s*<reminder-(\d+)-(\d+)@", re.IGNORECASE | re.MULTILINE)

WORKER = """
import json, time
from django.db import connection
from django.db.models import F, Q
from benchmarks.common import QueryCounter
from reminders.models import Reminder
from reminders.ring import reminders_send_due
statements = rung = 0
deadline = time.monotonic() + {deadline}
while time.monotonic() < deadline:
    counter = QueryCounter()
    with connection.execute_wrapper(counter):
        result = reminders_send_due(budget_s=5)
    if result["claimed"]:
        statements += counter.count
        rung += result["emailed"]
        continue
    if not Reminder.objects.filter(Q(sent_for__isnull=True) | ~Q(sent_for=F("remind_at"))).exists():
        break  # every reminder is recorded as rung
    time.sleep(0.5)
print(json.dumps({{"statements": statements, "rung": rung}}))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--reminders", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=60, help="seconds over which the reminders fall due")
    parser.add_argument("--push-share", type=float, default=0.5, help="the share of people with a browser")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=200, help="REMINDER_CHUNK")
    parser.add_argument("--lease", type=int, default=60, help="REMINDER_LEASE_SECONDS")
    parser.add_argument("--lead", type=int, default=15, help="seconds from the setup to the first reminder")
    return parser.parse_args()


def seed(args: argparse.Namespace, sandbox_url: str) -> dict[str, Any]:
    """The people, their browsers, and their tasks with reminders falling due over the window."""
    import requests
    from django.contrib.auth.hashers import make_password

    from accounts.models import User
    from reminders.models import PushSubscription, Reminder
    from reminders.push import push_subscribe, vapid_public_key
    from tasks.models import Task
    from tasks.services import task_title_key

    started = time.perf_counter()
    password = make_password("bench-reminders-1")
    users = User.objects.bulk_create(
        User(email=f"r{n}@reminders.bench", timezone=ZONES[n % len(ZONES)], password=password)
        for n in range(args.people)
    )
    with_browser = set()
    every = max(1, round(1 / args.push_share)) if args.push_share > 0 else 0
    session = requests.Session()
    session.trust_env = False
    key = vapid_public_key()
    for n, user in enumerate(users):
        if every and n % every == 0:
            browser = session.post(
                f"{sandbox_url}/_sandbox/webpush/subscriptions", json={"application_server_key": key}, timeout=10
            ).json()
            push_subscribe(user=user, endpoint=browser["endpoint"], **browser["keys"], label="Bench")
            with_browser.add(user.pk)
    start = datetime.now(UTC) + timedelta(seconds=args.lead)
    tasks, rings = [], []
    for n in range(args.reminders):
        user = users[n % len(users)]
        remind_at = (start + timedelta(seconds=args.window * n / args.reminders)).replace(microsecond=0)
        before = BEFORE[n % len(BEFORE)]
        due = (remind_at + timedelta(minutes=before)).astimezone(ZoneInfo(user.timezone))
        title = f"Call number {n}"
        tasks.append(
            Task(
                user=user,
                source=Task.Source.MANUAL,
                source_id=f"bench-{n}",
                title=title,
                title_key=task_title_key(title),
                due_date=due.date(),
                due_time=due.time().replace(tzinfo=None),
            )
        )
        rings.append((before, remind_at))
    tasks = Task.objects.bulk_create(tasks, batch_size=2000)
    Reminder.objects.bulk_create(
        (
            Reminder(task=task, minutes_before=before, remind_at=at)
            for task, (before, at) in zip(tasks, rings, strict=True)
        ),
        batch_size=2000,
    )
    pushed_tasks = {task.pk for task in tasks if task.user_id in with_browser}
    return {
        "seed_s": round(time.perf_counter() - started, 1),
        "browsers": PushSubscription.objects.count(),
        "push_tasks": pushed_tasks,
        "first_due": start,
    }


def worker(env: dict[str, str], deadline_s: float, crash_point: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", WORKER.format(deadline=deadline_s)],
        cwd=ROOT,
        env={**os.environ, **env, "EXTRACTION_CRASH_POINT": crash_point},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def relay_log(directory: Path) -> tuple[Counter[int], list[float]]:
    """How many mails each reminder (task id) got, and how late each first one came (its file's time)."""
    counts: Counter[int] = Counter()
    late: dict[int, float] = {}
    for path in directory.glob("*.eml"):
        head = path.read_bytes()[:4000]
        found = MESSAGE_ID.search(head)
        if found is None:
            continue
        task_id, due = int(found[1]), int(found[2])
        counts[task_id] += 1
        arrived = path.stat().st_mtime - due
        late[task_id] = min(late.get(task_id, arrived), arrived)
    return counts, [max(0.0, value) for value in late.values()]


def p(values: list[float], q: float) -> float:
    ordered = sorted(values) or [0.0]
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def bench(args: argparse.Namespace, sandbox: SandboxProcess, relay_dir: Path, port: int) -> dict[str, Any]:
    import requests

    from reminders.models import Reminder
    from tasks.models import Task

    f: dict[str, Any] = {
        "people": args.people,
        "reminders_due": args.reminders,
        "window_s": args.window,
        "workers": args.workers,
        "chunk": args.chunk,
        "lease_s": args.lease,
    }
    seeded = seed(args, sandbox.url)
    push_tasks: set[int] = seeded.pop("push_tasks")
    first_due: datetime = seeded.pop("first_due")
    f.update(seeded, push_reminders=len(push_tasks))
    print(f"seeded {args.reminders} reminders of {args.people} people ({f['browsers']} browsers) in {f['seed_s']} s")
    env = {
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(port),
        "EMAIL_USE_TLS": "false",
        "REMINDER_CHUNK": str(args.chunk),
        "REMINDER_LEASE_SECONDS": str(args.lease),
    }
    deadline_s = args.window + args.lease + args.lead + 240
    wait = (first_due - datetime.now(UTC)).total_seconds()
    if wait > 0:
        time.sleep(wait)
    started = time.perf_counter()
    killed_at = args.chunk + args.chunk // 2  # in its second chunk
    workers = [worker(env, deadline_s, crash_point=f"reminder_journalled:{killed_at}")]
    workers += [worker(env, deadline_s) for _ in range(args.workers - 1)]
    workers[0].wait(timeout=deadline_s + 60)
    f["worker_killed"] = workers[0].returncode == -signal.SIGKILL
    workers[0] = worker(env, deadline_s)  # started again, as the supervisor does
    outputs = [w.communicate(timeout=deadline_s + 60) for w in workers]
    f["wall_s"] = round(time.perf_counter() - started, 1)
    statements = rung = 0
    for w, (out, errors) in zip(workers, outputs, strict=True):
        if w.returncode != 0:
            raise RuntimeError(f"a worker failed: {errors[-2000:]}")
        figures = json.loads(out.strip().splitlines()[-1])
        statements += figures["statements"]
        rung += figures["rung"]
    counts, late = relay_log(relay_dir)
    task_ids = set(Task.objects.values_list("pk", flat=True))
    pushed = Counter(
        int(str(m["payload"]["url"]).rsplit("/", 1)[1])
        for m in requests.get(f"{sandbox.url}/_sandbox/webpush/messages", timeout=30).json()["messages"]
    )
    f.update(
        sent=len(counts),
        email_sent=sum(counts.values()),
        duplicated=sum(c - 1 for c in counts.values() if c > 1),
        missing=len(task_ids - set(counts)),
        late_p50_s=p(late, 0.5),
        late_p95_s=p(late, 0.95),
        late_max_s=p(late, 1.0),
        statements_per_reminder=round(statements / max(1, rung), 2),
        web_push_sent=sum(pushed.values()),
        web_push_duplicated=sum(c - 1 for c in pushed.values() if c > 1),
        web_push_missing=len(push_tasks - set(pushed)),
        recorded=Reminder.objects.filter(sent_for__isnull=False).count(),
    )
    return f


def checks(f: dict[str, Any]) -> list[str]:
    failed = []
    if f["missing"] or f["duplicated"]:
        failed.append(f"reminder mails missing {f['missing']}, duplicated {f['duplicated']}")
    if f["web_push_missing"] or f["web_push_duplicated"]:
        failed.append(f"pushes missing {f['web_push_missing']}, duplicated {f['web_push_duplicated']}")
    if f["late_p95_s"] > 60:
        failed.append(f"late p95 {f['late_p95_s']} s (at most 60)")
    if not f["worker_killed"]:
        failed.append("the worker to kill was not killed mid-chunk")
    if f["recorded"] != f["reminders_due"]:
        failed.append(f"{f['recorded']} of {f['reminders_due']} reminders recorded as rung")
    return failed


def main() -> int:
    args = parse_args()
    server = postgres_server_url()
    database_url = database_create(server, DATABASE)
    relay_dir = Path(tempfile.mkdtemp(prefix="tasklift-bench-reminders-"))
    [port] = free_ports(1)
    relay = relay_start(relay_dir / "mail", port)
    sandbox = SandboxProcess()
    try:
        sandbox.wait_ready()
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=NAME)
        redis_purge(NAME)
        figures = bench(args, sandbox, relay_dir / "mail", port)
        figures["checks_failed"] = checks(figures)
        figures["version"] = git_version()
        figures["at"] = date.today().isoformat()
        print(
            f"{figures['sent']} of {figures['reminders_due']} reminders rung in {figures['wall_s']} s by "
            f"{args.workers} workers (one killed); late p50 {figures['late_p50_s']} s, p95 {figures['late_p95_s']} s; "
            f"{figures['statements_per_reminder']} statements per reminder; {figures['web_push_sent']} pushed; "
            f"missing {figures['missing']}, duplicated {figures['duplicated']}"
        )
        print(json.dumps(figures))
        return 1 if figures["checks_failed"] else 0
    finally:
        relay.terminate()
        relay.wait(10)
        sandbox.stop()
        from django.db import connections

        connections.close_all()
        redis_purge(NAME)
        database_drop(server, DATABASE)
        shutil.rmtree(relay_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
