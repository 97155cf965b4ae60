"""IMAP against a real Dovecot (sandbox/dovecot.py): one mailbox's new mail read by one run, a changed
UIDVALIDITY and mail moved in from another folder, then many idle mailboxes checked by STATUS and held in IDLE.

    uv run python benchmarks/imap.py [--emails 1000] [--mailboxes 100] [--idle-emails 20] [--seed 1]

Setup, not timed: the sandbox (Gemini) in a process of its own, a fresh database `tasklift_bench_imap`, Redis
database 2, a Dovecot of its own on free ports (TLS, its certificate trusted through IMAP_CA_BUNDLE).

Measured, in order:
1. **One run** over `--emails` new emails in one mailbox (Inbox; its Sent folder read too): Gemini calls, IMAP
   commands per email and connections per run (Dovecot's rawlog of each signed-in connection), wall time.
2. **A new UIDVALIDITY** (`doveadm mailbox update --uid-validity`) with mail before and after it: the run resyncs
   by Message-ID against the ledger; `uidvalidity_changed_lost` counts emails never read.
3. **Mail moved in**: old mail (dated 400 days ago) filed in Archive, then moved into the Inbox by the person;
   `moved_in_lost` counts emails never read.
4. **Idle checks** of `--mailboxes` mailboxes with nothing new (each read once): commands per mailbox after sign-in
   (the check's own: one STATUS a folder) and the check's CPU.
5. **IDLE**: the `imap-idle` watcher (integrations/imapidle.py) holds IDLE on every mailbox; `--idle-emails`
   emails are delivered to random mailboxes one at a time, and a worker (a thread here, running queued runs as
   Celery would) reads them: seconds from delivery to the task (p95), and the watcher's memory per connection.

`writes_sent` counts every command Tasklift sent that is not in integrations/providers/imap.py READ_COMMANDS
(none may change a mailbox). The last line printed is one JSON object; the exit status is 1 when a check fails.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    Benchmark,
    SandboxProcess,
    configure_run,
    cpu_s,
    git_version,
    mail_mix,
    main,
    rss_mb,
    timed_run,
)

BENCH_DATABASE = "tasklift_bench_imap"
FIRST_DATE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def parse(doc: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emails", type=int, default=1000, help="new emails in the mailbox read by one run")
    parser.add_argument("--mailboxes", type=int, default=100, help="idle mailboxes checked and held in IDLE")
    parser.add_argument("--idle-emails", type=int, default=20, help="emails delivered one by one under IDLE")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.emails < 1 or args.mailboxes < 1 or args.idle_emails < 1:
        parser.error("--emails, --mailboxes and --idle-emails must be >= 1")
    # what benchmarks.common's frame prints and configure_run reads
    args.tasks_ratio, args.llm_latency_ms, args.concurrency = 0.5, 0, None
    return args


def commands_of(sessions: list[list[str]]) -> list[str]:
    """The commands of some rawlog sessions: "TAG NAME ARGS" lines (a literal's lines and DONE are not)."""
    return [line for session in sessions for line in session if len(line.split()) >= 2 and line.split()[0].isalnum()]


def command_name(line: str) -> str:
    parts = line.split()
    return f"UID {parts[2].upper()}" if parts[1].upper() == "UID" and len(parts) > 2 else parts[1].upper()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)] if ordered else 0.0


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    from django.conf import settings
    from django.db import close_old_connections

    from accounts.services import consent_grant, user_create
    from extraction.idlecheck import mailboxes_idle_check
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.pipeline import extraction_run_execute
    from integrations.imapidle import IdleWatcher
    from integrations.models import SyncCursor
    from integrations.providers.base import provider_close
    from integrations.providers.imap import READ_COMMANDS, ImapAccount
    from integrations.services import imap_connect, integration_provider
    from sandbox.client import SandboxClient
    from sandbox.dovecot import Dovecot
    from tasks.models import Task

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    folder = Path(tempfile.mkdtemp(prefix="tasklift-bench-imap-"))
    settings.IMAP_CA_BUNDLE = str(folder / "ca.pem")
    settings.IMAP_ALLOW_PRIVATE_HOSTS = True
    dovecot = Dovecot(ca_path=folder / "ca.pem", max_connections=10).start()
    rng = random.Random(args.seed)
    checks: dict[str, bool] = {}
    try:

        def connect(n: int) -> tuple[Any, Any, str]:
            user = user_create(email=f"imap{n}@tasklift.test", password="bench-only-password-never-used")
            consent_grant(user=user)
            address, password = f"box{n}@imap.bench.example", f"app-password-{n}"
            dovecot.add_user(address, password)
            account = ImapAccount("127.0.0.1", dovecot.tls_port, "tls", address, password)
            return user, imap_connect(user=user, account=account, address=address), address

        def positioned(integration: Any) -> None:
            """Both cursors at the folders' positions now, as a first read leaves them."""
            provider = integration_provider(integration=integration)
            for cursor in SyncCursor.objects.filter(integration=integration):
                cursor.value = provider.current_cursor(folder=cursor.folder)
                cursor.save(update_fields=["value"])
            provider_close(provider)

        def unread(integration: Any, keys: set[str]) -> int:
            read = set(ProcessedEmail.objects.filter(integration=integration).values_list("message_id", flat=True))
            return len(keys - read)

        # 1. One run over --emails new emails --------------------------------------------------------------
        user, mailbox, address = connect(0)
        positioned(mailbox)
        mails = mail_mix(args.emails, 0.5, args.seed, to=address, first_date=FIRST_DATE, step=timedelta(minutes=1))
        started = time.perf_counter()
        with dovecot.client(address) as own:
            for mail in mails:
                own.append("INBOX", mail.raw.encode())
        keys = {f"bench-{args.seed}-{n}@example.com" for n in range(args.emails)}
        print(f"setup: {args.emails} emails appended in {time.perf_counter() - started:.1f} s")
        client.clear_requests()
        configure_run(args)
        sessions_before = len(dovecot.sessions(address))
        measured = timed_run(ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN))
        run_sessions = dovecot.sessions(address)[sessions_before:]
        run_commands = commands_of(run_sessions)
        gemini_calls = sum(1 for r in client.requests("gemini") if r["method"] == "POST")
        expected_tasks = sum(m.asks for m in mails)
        checks["run succeeded"] = measured.run.status == ExtractionRun.Status.SUCCEEDED
        checks[f"gemini calls == ceil({args.emails}/10)"] = gemini_calls == math.ceil(args.emails / 10)
        checks[f"tasks == {expected_tasks} asks"] = measured.run.tasks_created == expected_tasks
        lost = unread(mailbox, keys)

        # 2. A new UIDVALIDITY, mail before and after it ----------------------------------------------------
        before = [mail_mix(1, 1.0, 1000 + n, to=address, first_date=FIRST_DATE, step=timedelta(0))[0] for n in range(5)]
        after = [mail_mix(1, 1.0, 2000 + n, to=address, first_date=FIRST_DATE, step=timedelta(0))[0] for n in range(5)]
        for mail in before:
            dovecot.deliver(address, mail.raw)
        dovecot.doveadm("mailbox", "update", "-u", address, "--uid-validity", str(rng.randint(10, 2**31)), "INBOX")
        for mail in after:
            dovecot.deliver(address, mail.raw)
        resync_run = extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger="admin"))
        generation_keys = {f"bench-{1000 + n}-0@example.com" for n in range(5)}
        generation_keys |= {f"bench-{2000 + n}-0@example.com" for n in range(5)}
        uidvalidity_changed_lost = unread(mailbox, generation_keys)
        checks["resync run succeeded"] = resync_run.status == ExtractionRun.Status.SUCCEEDED

        # 3. Old mail moved in from Archive -----------------------------------------------------------------
        old = datetime.now(UTC) - timedelta(days=400)
        moved = [mail_mix(1, 1.0, 3000 + n, to=address, first_date=old, step=timedelta(0))[0] for n in range(5)]
        for mail in moved:
            dovecot.deliver(address, mail.raw, folder="Archive", at=old)
        with dovecot.client(address) as own:
            own.select_folder("Archive")
            own.move(own.search(["ALL"]), "INBOX")
        moved_run = extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger="admin"))
        moved_in_lost = unread(mailbox, {f"bench-{3000 + n}-0@example.com" for n in range(5)})
        checks["moved-in run succeeded"] = moved_run.status == ExtractionRun.Status.SUCCEEDED

        # 4. Idle checks of --mailboxes quiet mailboxes ------------------------------------------------------
        idle = [connect(n) for n in range(1, args.mailboxes + 1)]
        for _, integration, _ in idle:
            positioned(integration)
        sessions_at = {a: len(dovecot.sessions(a)) for _, _, a in idle}
        cpu_started, wall_started = cpu_s(), time.perf_counter()
        result = mailboxes_idle_check(integration_ids=[i.pk for _, i, _ in idle])
        check_cpu_ms = (cpu_s() - cpu_started) * 1000
        check_wall_s = time.perf_counter() - wall_started
        check_commands = [
            c for _, _, a in idle for c in commands_of(dovecot.sessions(a)[sessions_at[a] :]) if " LOGOUT" not in c
        ]
        checks["every idle mailbox quiet"] = result.quiet == args.mailboxes and result.runs_queued == 0

        # 5. IDLE on every idle mailbox, then mail delivered one email at a time ------------------------------
        rss_before_idle = rss_mb()
        watcher = IdleWatcher()
        serving = threading.Thread(target=watcher.serve, daemon=True)
        serving.start()
        stop_worker = threading.Event()

        def worker() -> None:  # what a Celery worker does with the runs the doorbell queues
            while not stop_worker.is_set():
                close_old_connections()
                queued = list(ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).order_by("pk"))
                for run in queued:
                    extraction_run_execute(run=run)
                if not queued:
                    stop_worker.wait(0.05)

        working = threading.Thread(target=worker, daemon=True)
        working.start()
        freshness: list[float] = []
        try:
            deadline = time.monotonic() + 60
            while len(watcher.idling()) < args.mailboxes + 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            idling = len(watcher.idling())
            rss_idle = rss_mb()
            for n in range(args.idle_emails):
                _, integration, target = rng.choice(idle)
                mail = mail_mix(1, 1.0, 4000 + n, to=target, first_date=datetime.now(UTC), step=timedelta(0))[0]
                sent_at = time.perf_counter()
                dovecot.deliver(target, mail.raw)
                key = f"bench-{4000 + n}-0@example.com"
                while time.perf_counter() - sent_at < 30:
                    if Task.objects.filter(integration=integration, source_id=key).exists():
                        freshness.append(time.perf_counter() - sent_at)
                        break
                    time.sleep(0.05)
        finally:
            watcher.stopping.set()
            serving.join(timeout=30)
            stop_worker.set()
            working.join(timeout=60)
        checks["every IDLE-rung email became its task within 30 s"] = len(freshness) == args.idle_emails

        # Everything Tasklift sent, and what it left ---------------------------------------------------------
        everyone = [address, *(a for _, _, a in idle)]
        sent = [c for a in everyone for c in commands_of(dovecot.sessions(a))]
        writes = [c for c in sent if command_name(c) not in READ_COMMANDS]
        duplicates = (
            Task.objects.values("user", "source", "source_id", "title_key").order_by().distinct().count()
            != Task.objects.count()
        )
        per_mailbox = len(check_commands) / args.mailboxes
        figures = {
            "emails": args.emails,
            "gemini_calls": gemini_calls,
            "imap_commands_per_email": round(len(run_commands) / args.emails, 3),
            "imap_commands_in_run": len(run_commands),
            "connections_per_run": len(run_sessions),
            "run_wall_s": round(measured.wall, 3),
            "run_cpu_s": round(measured.cpu, 3),
            "emails_per_s": round(args.emails / measured.wall, 1) if measured.wall else None,
            "tasks_created": measured.run.tasks_created,
            "mailboxes": args.mailboxes,
            "idle_check_commands": round(per_mailbox, 2),
            "idle_check_cpu_ms": round(check_cpu_ms, 1),
            "idle_check_cpu_ms_per_mailbox": round(check_cpu_ms / args.mailboxes, 2),
            "idle_check_wall_s": round(check_wall_s, 3),
            "idle_connections": idling,
            "idle_rss_mb_per_1000": round((rss_idle - rss_before_idle) / max(idling, 1) * 1000, 1),
            "idle_freshness_p50_s": round(percentile(freshness, 0.5), 2),
            "idle_freshness_p95_s": round(percentile(freshness, 0.95), 2),
            "uidvalidity_changed_lost": uidvalidity_changed_lost,
            "moved_in_lost": moved_in_lost,
            "writes_sent": len(writes),
            "lost": lost + uidvalidity_changed_lost + moved_in_lost,
            "duplicates": int(duplicates),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "git": git_version(),
        }
        checks["imap commands per email <= 0.5"] = figures["imap_commands_per_email"] <= 0.5
        checks["one connection per run"] = figures["connections_per_run"] == 1
        checks["idle check <= 2 commands per mailbox"] = per_mailbox <= 2
        checks["IDLE freshness p95 <= 5 s"] = figures["idle_freshness_p95_s"] <= 5
        checks["every mailbox held in IDLE"] = idling == args.mailboxes + 1
        for name in ("uidvalidity_changed_lost", "moved_in_lost", "writes_sent", "lost", "duplicates"):
            checks[f"{name} == 0"] = figures[name] == 0
        figures["checks_failed"] = [name for name, ok in checks.items() if not ok]
        return figures
    finally:
        dovecot.stop()


def report(f: dict[str, Any]) -> None:
    print(
        f"run: {f['emails']} emails in {f['run_wall_s']} s ({f['emails_per_s']}/s), {f['gemini_calls']} Gemini calls, "
        f"{f['imap_commands_in_run']} IMAP commands ({f['imap_commands_per_email']} per email) on "
        f"{f['connections_per_run']} connection(s), {f['tasks_created']} tasks"
    )
    print(
        f"idle check of {f['mailboxes']} mailboxes: {f['idle_check_commands']} commands each after sign-in, "
        f"{f['idle_check_cpu_ms']} ms CPU in all, {f['idle_check_wall_s']} s"
    )
    print(
        f"IDLE: {f['idle_connections']} connections, about {f['idle_rss_mb_per_1000']} MB per 1000; new mail to task "
        f"p50 {f['idle_freshness_p50_s']} s, p95 {f['idle_freshness_p95_s']} s"
    )
    print(
        f"lost {f['lost']} (after a new UIDVALIDITY {f['uidvalidity_changed_lost']}, moved in {f['moved_in_lost']}), "
        f"duplicates {f['duplicates']}, writes sent {f['writes_sent']}"
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


if __name__ == "__main__":
    sys.exit(
        main(
            Benchmark(
                name="imap", database=BENCH_DATABASE, cache_prefix="tasklift-bench-imap", bench=bench, report=report
            ),
            parse(__doc__),
        )
    )
