"""What a person costs: the morning digest, the calendar feed and the first page at 100,000 people.

    uv run python benchmarks/people.py [--people 100000] [--due-share 0.1] [--tasks-per-person 10] [--sample 200]

Setup, not timed: a fresh database `tasklift_bench_people` (dropped at the end), Redis database 2 with a cache
prefix of its own, a mail relay that keeps what it is given (`python -m sandbox.smtp`, its own process and
directory). `--people` people are written by PostgreSQL itself (INSERT … SELECT FROM generate_series): each
with a verified address, a Gmail mailbox connected three days before the measured morning, the digest turned
on, and `--tasks-per-person` open tasks from their mail (due dates from four days before that morning to five
after, one without a date, a waiting item, one back from snooze that morning; for a third of the people, two
from mail older than the connect: the "From before you connected" group). The morning is Monday 7 December
2026 06:30 UTC: 07:30 in Berlin and Lagos, where a share `--due-share` of the people live; the others live in
eight zones whose morning it is not (before it, or past it), and are due later.

Timed:
1. **The digest, in this process**: every chunk job's work at that moment (`digest_send_due(now=…)`): CPU of
   this process and SQL statements, per person due; the relay's messages, per recipient.
2. **The digest with two workers**: the same morning again (its days forgotten), two worker processes at once;
   the wall time until both are done, per 10,000 people.
3. **The digest with one worker killed mid-chunk**: the morning again, two workers, one of which dies (SIGKILL,
   `digest_journalled` crash point) in its second chunk; then, when the dead chunk's lease has passed, a
   third. Nobody may be without a digest or have two.
4. **The calendar feed** of `--sample` people: a first fetch (statements, latency), then the calendar app's
   next fetch with its ETag (`304`).
5. **The list's first page** and its Waiting view, for the same people: bytes, statements, latency.

Readable figures first, then the last line: one JSON object with every figure. Exit status 1 when a check in
`checks_failed` fails (the bounds of issue 33: digest CPU ≤ 5 ms and ≤ 0.5 statements per person, no digest
missing or duplicated in any phase, 304 p95 ≤ 20 ms, page ≤ 250,000 bytes and ≤ 15 statements).
"""

from __future__ import annotations

import argparse
import json
import os
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
    BENCH_REDIS_DB,
    ROOT,
    QueryCounter,
    database_create,
    database_drop,
    git_version,
    postgres_server_url,
    redis_purge,
)
from benchmarks.scale import insert_series
from config.ports import free_ports

DATABASE = "tasklift_bench_people"
NAME = "tasklift-bench-people"  # the cache prefix
MORNING = datetime(2026, 12, 7, 6, 30, tzinfo=UTC)  # a Monday: 07:30 in Berlin and Lagos
DUE_ZONES = ("Europe/Berlin", "Africa/Lagos")
OTHER_ZONES = (
    "Asia/Tokyo",  # 15:30, past its morning
    "America/New_York",  # 01:30, before it
    "America/Los_Angeles",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Asia/Kolkata",  # 12:00, the end of its morning
    "Europe/London",  # 06:30, half an hour before
    "Pacific/Honolulu",
)
CONNECTED = MORNING - timedelta(days=3)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=100_000)
    parser.add_argument("--due-share", type=float, default=0.1, help="the share whose morning it is")
    parser.add_argument("--tasks-per-person", type=int, default=10)
    parser.add_argument("--sample", type=int, default=200, help="people whose calendar and page are fetched")
    parser.add_argument("--chunk", type=int, default=200, help="DIGEST_CHUNK")
    return parser.parse_args()


def django_setup(database_url: str, relay_port: int) -> dict[str, str]:
    """Settings for this process and the workers: the benchmark's database, Redis database, cache prefix and
    relay (plain SMTP on the loopback). Returns the environment the workers get."""
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "REDIS_DB": BENCH_REDIS_DB,
        "CACHE_KEY_PREFIX": NAME,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(relay_port),
        "EMAIL_USE_TLS": "false",
        "DEBUG": os.environ.get("DEBUG", "false"),
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
    }
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True)
    import django

    django.setup()
    return env


def _next_morning(zone: str) -> datetime:
    """DIGEST_HOUR (7) of the zone's next morning after MORNING: when a person there is due next."""
    local = MORNING.astimezone(ZoneInfo(zone))
    day = local.date() if local.hour < 7 else local.date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, 7, tzinfo=ZoneInfo(zone)).astimezone(UTC)


def seed(args: argparse.Namespace) -> dict[str, Any]:
    """The people, their mailboxes, digests and tasks, by PostgreSQL alone."""
    from django.contrib.auth.hashers import make_password
    from django.db import connection

    from accounts.models import User
    from integrations.models import Integration
    from reminders.models import DigestSubscription
    from tasks.models import Task

    every = max(1, round(1 / args.due_share)) if args.due_share > 0 else 0  # person n is due if n % every == 0
    zones = [*DUE_ZONES, *OTHER_ZONES]
    nexts = [MORNING - timedelta(minutes=30)] * len(DUE_ZONES) + [_next_morning(z) for z in OTHER_ZONES]
    # The zone of person n: a due zone when n is a multiple of `every`, else one of the others.
    zone_index = (
        f"(CASE WHEN %(every)s > 0 AND n %% %(every)s = 0 THEN n %% {len(DUE_ZONES)} "
        f"ELSE {len(DUE_ZONES)} + n %% {len(OTHER_ZONES)} END)"
    )
    params: dict[str, Any] = {
        "every": every,
        "zones": zones,
        "nexts": nexts,
        "password": make_password(None),
        "morning": MORNING,
        "connected": CONNECTED,
        "k": args.tasks_per_person,
        "open": Task.Status.OPEN,
        "waiting": Task.Kind.WAITING,
        "ask": Task.Kind.ASK,
    }
    started = time.perf_counter()
    insert_series(
        User,
        args.people,
        {
            "id": "n",
            "email": "'person' || n || '@people.bench'",
            "password": "%(password)s",
            "timezone": f"(%(zones)s::text[])[1 + {zone_index}]",
            "date_joined": "%(connected)s - interval '1 day'",
            "email_verified_at": "%(connected)s - interval '1 day'",
        },
        params,
    )
    insert_series(
        Integration,
        args.people,
        {
            "id": "n",
            "user_id": "n",
            "provider": "'gmail'",
            "account_address": "'person' || n || '@gmail.people.bench'",
            "created_at": "%(connected)s",
            "updated_at": "%(connected)s",
            "next_check_at": "%(morning)s + interval '1 day'",
        },
        params,
    )
    insert_series(
        DigestSubscription,
        args.people,
        {
            "user_id": "n",
            "enabled": "true",
            "unsubscribe_key": "md5(n::text || random()::text)",
            "due_at": f"(%(nexts)s::timestamptz[])[1 + {zone_index}]",
            "created_at": "%(connected)s",
            "updated_at": "%(connected)s",
        },
        params,
    )
    # Task t (1..people*k) is the j-th (0..k-1) of person p. j = k-1 has no date; j = 7 is a waiting item;
    # j = 8 is back from snooze that morning; for every third person, j = 0 and 1 are from mail older than
    # the connect, due before it.
    person, j = "((n - 1) / %(k)s + 1)", "((n - 1) %% %(k)s)"
    earlier = f"({person} %% 3 = 0 AND {j} < 2)"
    insert_series(
        Task,
        args.people * args.tasks_per_person,
        {
            "user_id": person,
            "integration_id": person,
            "source": "'email_ai'",
            "source_id": "'m' || n",
            "email_key": "'<m' || n || '@people.bench>'",
            "title": "'Send the report ' || n",
            "title_key": "'send the report ' || n",
            "email_sender": "'Carol <carol@partner.bench>'",
            "email_subject": "'The report'",
            "email_received_at": f"CASE WHEN {earlier} THEN %(connected)s - interval '5 days' "
            "ELSE %(connected)s + interval '1 day' END",
            "due_date": f"CASE WHEN {j} = %(k)s - 1 THEN NULL WHEN {earlier} THEN %(connected)s::date - 2 "
            f"ELSE %(morning)s::date + ({j} %% 10) - 4 END",
            "kind": f"CASE WHEN {j} = 7 THEN %(waiting)s ELSE %(ask)s END",
            "waiting_on": f"CASE WHEN {j} = 7 THEN 'carol@partner.bench' ELSE '' END",
            "snoozed_until": f"CASE WHEN {j} = 8 THEN %(morning)s::date END",
            "status": "%(open)s",
            "created_at": "%(connected)s + interval '1 day'",
            "updated_at": "%(connected)s + interval '1 day'",
        },
        params,
    )
    with connection.cursor() as cursor:
        for table in (User._meta.db_table, Integration._meta.db_table, Task._meta.db_table):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        cursor.execute("VACUUM ANALYZE")  # as autovacuum would after a bulk load
    due = DigestSubscription.objects.filter(due_at__lte=MORNING).count()
    return {"seed_s": round(time.perf_counter() - started, 1), "due": due}


def relay_start(directory: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox.smtp", "--port", str(port), "--directory", str(directory)], cwd=ROOT
    )
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.05)
    raise RuntimeError("the relay did not start")


def received(directory: Path) -> Counter[str]:
    """How many messages the relay kept per recipient (the file's To header, read without parsing it all)."""
    counts: Counter[str] = Counter()
    for path in directory.glob("*.eml"):
        for line in path.read_bytes().split(b"\n", 40):
            if line.lower().startswith(b"to:"):
                counts[line[3:].strip().decode()] += 1
                break
    return counts


def morning_again(directory: Path) -> None:
    """The morning once more: its days forgotten, the journal emptied, the due people due, the relay empty."""
    from reminders.models import DigestDay, DigestSubscription

    DigestDay.objects.all().delete()
    redis_purge(f"{NAME}:1:digest-sent")  # the journal (the cache's keys: prefix, version, key)
    DigestSubscription.objects.filter(user__timezone__in=DUE_ZONES).update(due_at=MORNING - timedelta(minutes=30))
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def worker(env: dict[str, str], now: datetime, crash_point: str = "") -> subprocess.Popen[str]:
    """A worker process doing what the chunk jobs of one scan do, at `now`."""
    script = (
        "from datetime import datetime; from reminders.digest import digest_send_due; "
        f"print(digest_send_due(now=datetime.fromisoformat({now.isoformat()!r})))"
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env={**os.environ, **env, "EXTRACTION_CRASH_POINT": crash_point},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def faults(counts: Counter[str], people: set[str]) -> tuple[int, int]:
    """(missing, duplicated): due people without a digest, and copies beyond the first."""
    return len(people - set(counts)), sum(c - 1 for c in counts.values() if c > 1)


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def bench(args: argparse.Namespace, env: dict[str, str], relay_dir: Path) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from accounts.models import User
    from reminders.calendar import calendar_feed_create
    from reminders.digest import digest_send_due

    settings.DIGEST_CHUNK = args.chunk
    env["DIGEST_CHUNK"] = str(args.chunk)
    f: dict[str, Any] = {"people": args.people, "tasks_per_person": args.tasks_per_person, "chunk": args.chunk}
    f.update(seed(args))
    print(f"seeded {args.people} people, {f['due']} due, in {f['seed_s']} s")
    due_people = set(User.objects.filter(timezone__in=DUE_ZONES).values_list("email", flat=True))

    # 1. The digest, here.
    counter = QueryCounter()
    cpu, wall = time.process_time(), time.perf_counter()
    with connection.execute_wrapper(counter):
        result = digest_send_due(now=MORNING)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    missing, duplicated = faults(received(relay_dir), due_people)
    handled = max(1, result["sent"] + result["empty"])
    f.update(
        digests_sent=result["sent"],
        digests_empty=result["empty"],
        digest_cpu_ms_per_person=round(cpu * 1000 / handled, 2),
        digest_statements=counter.count,
        digest_statements_per_person=round(counter.count / handled, 3),
        digest_wall_s_in_one_process=round(wall, 1),
        digests_missing_one_process=missing,
        digests_duplicated_one_process=duplicated,
    )
    print(f"digest here: {result}, {f['digest_cpu_ms_per_person']} ms CPU and {counter.count} statements")

    # 2. Two workers.
    morning_again(relay_dir)
    started = time.perf_counter()
    two = [worker(env, MORNING), worker(env, MORNING)]
    outputs = [w.communicate(timeout=3600) for w in two]
    wall = time.perf_counter() - started
    for w, (_, errors) in zip(two, outputs, strict=True):
        if w.returncode != 0:
            raise RuntimeError(f"a worker failed: {errors[-2000:]}")
    missing, duplicated = faults(received(relay_dir), due_people)
    f.update(
        digest_wall_s_with_2_workers=round(wall, 1),
        digest_wall_s_per_10k_with_2_workers=round(wall * 10_000 / max(1, f["due"]), 1),
        digests_missing_two_workers=missing,
        digests_duplicated_two_workers=duplicated,
    )
    print(f"two workers: {wall:.1f} s for {f['due']} people")

    # 3. Two workers, one killed in its second chunk; a third once the dead chunk's lease has passed.
    morning_again(relay_dir)
    killed_at = max(1, min(args.chunk + args.chunk // 2, f["due"] // 4))  # in its second chunk, if it has one
    pair = [worker(env, MORNING, crash_point=f"digest_journalled:{killed_at}"), worker(env, MORNING)]
    for w in pair:
        w.communicate(timeout=3600)
    f["worker_killed"] = pair[0].returncode == -signal.SIGKILL
    later = MORNING + timedelta(seconds=settings.DIGEST_CHUNK_LEASE_SECONDS + 1)
    third = worker(env, later)
    _, errors = third.communicate(timeout=3600)
    if third.returncode != 0:
        raise RuntimeError(f"the third worker failed: {errors[-2000:]}")
    missing, duplicated = faults(received(relay_dir), due_people)
    f.update(digests_missing_worker_killed=missing, digests_duplicated_worker_killed=duplicated)
    f["digests_missing"] = f["digests_missing_one_process"] + f["digests_missing_two_workers"] + missing
    f["digests_duplicated"] = f["digests_duplicated_one_process"] + f["digests_duplicated_two_workers"] + duplicated
    print(f"one worker killed: missing {missing}, duplicated {duplicated}")

    # 4 and 5. The calendar feed and the first page of a sample of people.
    sample = list(User.objects.filter(email__endswith="@people.bench").order_by("?")[: args.sample])
    seen: dict[str, list[float]] = {
        name: [] for name in ("ics_ms", "ics_304_ms", "ics_statements", "page_ms", "page_bytes", "page", "waiting")
    }
    for user in sample:
        _, secret = calendar_feed_create(user=user)
        path = f"/calendar/{secret}.ics"
        app, person = Client(), Client()
        person.force_login(user)
        counter = QueryCounter()
        with connection.execute_wrapper(counter):
            started = time.perf_counter()
            answer = app.get(path)
            seen["ics_ms"].append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.status_code
        seen["ics_statements"].append(counter.count)
        started = time.perf_counter()
        again = app.get(path, HTTP_IF_NONE_MATCH=answer["ETag"])
        seen["ics_304_ms"].append((time.perf_counter() - started) * 1000)
        assert again.status_code == 304, again.status_code
        for view, name in (("/", "page"), ("/?kind=waiting", "waiting")):
            counter = QueryCounter()
            with connection.execute_wrapper(counter):
                started = time.perf_counter()
                page = person.get(view)
                elapsed = (time.perf_counter() - started) * 1000
            assert page.status_code == 200, (view, page.status_code)
            seen[name].append(counter.count)
            if name == "page":
                seen["page_ms"].append(elapsed)
                seen["page_bytes"].append(len(page.content))
    f.update(
        sample=len(sample),
        ics_p50_ms=p(seen["ics_ms"], 0.5),
        ics_p95_ms=p(seen["ics_ms"], 0.95),
        ics_304_p95_ms=p(seen["ics_304_ms"], 0.95),
        ics_statements=int(max(seen["ics_statements"])),
        page_bytes_p95=int(p(seen["page_bytes"], 0.95)),
        page_statements=int(max(seen["page"])),
        page_p50_ms=p(seen["page_ms"], 0.5),
        page_p95_ms=p(seen["page_ms"], 0.95),
        waiting_page_statements=int(max(seen["waiting"])),
    )
    return f


def checks(f: dict[str, Any]) -> list[str]:
    failed = []
    if f["digest_cpu_ms_per_person"] > 5:
        failed.append(f"digest CPU {f['digest_cpu_ms_per_person']} ms per person (at most 5)")
    if f["digest_statements_per_person"] > 0.5:
        failed.append(f"{f['digest_statements_per_person']} digest statements per person (at most 0.5)")
    if f["digests_sent"] + f["digests_empty"] != f["due"]:
        failed.append(f"{f['due']} people due, {f['digests_sent']} digests sent and {f['digests_empty']} empty")
    if f["digests_missing"] or f["digests_duplicated"]:
        failed.append(f"digests missing {f['digests_missing']}, duplicated {f['digests_duplicated']}")
    if not f["worker_killed"]:
        failed.append("the worker to kill was not killed mid-chunk")
    if f["ics_304_p95_ms"] > 20:
        failed.append(f"calendar 304 p95 {f['ics_304_p95_ms']} ms (at most 20)")
    if f["page_bytes_p95"] > 250_000:
        failed.append(f"first page p95 {f['page_bytes_p95']} bytes (at most 250,000)")
    if f["page_statements"] > 15 or f["waiting_page_statements"] > 15:
        failed.append(f"page statements {f['page_statements']}, Waiting {f['waiting_page_statements']} (at most 15)")
    return failed


def report(f: dict[str, Any]) -> None:
    print(
        f"digest: {f['due']} due of {f['people']}; {f['digest_cpu_ms_per_person']} ms CPU and "
        f"{f['digest_statements_per_person']} statements per person; two workers "
        f"{f['digest_wall_s_per_10k_with_2_workers']} s per 10,000; missing {f['digests_missing']}, "
        f"duplicated {f['digests_duplicated']}"
    )
    print(f"calendar: p95 {f['ics_p95_ms']} ms, {f['ics_statements']} statements; 304 p95 {f['ics_304_p95_ms']} ms")
    print(
        f"page: p95 {f['page_p95_ms']} ms, {f['page_bytes_p95']} bytes, {f['page_statements']} statements "
        f"(Waiting {f['waiting_page_statements']})"
    )


def main() -> int:
    args = parse_args()
    server = postgres_server_url()
    database_url = database_create(server, DATABASE)
    relay_dir = Path(tempfile.mkdtemp(prefix="tasklift-bench-people-"))
    [port] = free_ports(1)
    relay = relay_start(relay_dir / "mail", port)
    try:
        env = django_setup(database_url, port)
        redis_purge(NAME)
        figures = bench(args, env, relay_dir / "mail")
        figures["checks_failed"] = checks(figures)
        figures["version"] = git_version()
        figures["at"] = date.today().isoformat()
        report(figures)
        print(json.dumps(figures))
        return 1 if figures["checks_failed"] else 0
    finally:
        relay.terminate()
        relay.wait(10)
        from django.db import connections

        connections.close_all()
        redis_purge(NAME)
        database_drop(server, DATABASE)
        shutil.rmtree(relay_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
