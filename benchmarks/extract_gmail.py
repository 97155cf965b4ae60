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
import json
import math
import os
import platform
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the project's packages live one level up
    sys.path.insert(0, str(ROOT))

BENCH_DATABASE = "tasklift_bench"
BENCH_REDIS_DB = "2"  # development uses 0 and the tests 1
ADDRESS = "bench@example.com"
FIRST_DATE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # fixed, so every run sends the same prompts


# The mail -----------------------------------------------------------------------------------------------
# Written to the sandbox reader's rules (sandbox/READER.md): each ask is one sentence on its own line and
# gives one task; the other sentences contain none of the reader's ask phrases.
ASKS = (
    "Please send the report for project {n} by Friday.",
    "Could you review the budget for project {n} before the planning meeting?",
    "Don't forget to book a room for the project {n} retrospective.",
)
FILLER = (
    "The numbers for the quarter are in the shared folder and look close to the plan.",
    "We met the supplier on Tuesday and the delivery dates for the spring batch are confirmed.",
    "The new dashboard went live this morning; the first figures look sensible and the team is happy with it.",
    "Marketing moved the launch party to the second floor, next to the kitchen.",
    "Last week's incident was traced to an expired certificate, which has been replaced since.",
)
SENDERS = (
    "Alex Colleague <alex@example.com>",
    "Sam Manager <sam@example.org>",
    "Priya Finance <priya@example.net>",
    "Jordan Ops <jordan@example.com>",
)


@dataclass(frozen=True)
class Mail:
    raw: str
    asks: int


def mail_mix(count: int, tasks_ratio: float, seed: int) -> list[Mail]:
    """`count` emails; each has asks with probability `tasks_ratio` (then 1 to 3 of them). Same seed, same mail."""
    rng = random.Random(seed)
    mails = []
    for n in range(count):
        asks = rng.randint(1, len(ASKS)) if rng.random() < tasks_ratio else 0
        paragraphs = rng.sample(FILLER, rng.randint(1, 3))
        lines = ["Hi,", "", *paragraphs, *(ask.format(n=n) for ask in ASKS[:asks]), "", "Thanks,", "Alex"]
        subject = f"Project {n}" if asks else f"Update {n}"
        mails.append(Mail(raw=_rfc822(n, seed, rng.choice(SENDERS), subject, "\n".join(lines) + "\n"), asks=asks))
    return mails


def _rfc822(n: int, seed: int, sender: str, subject: str, body: str) -> str:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"Bench Person <{ADDRESS}>"
    message["Subject"] = subject
    message["Date"] = format_datetime(FIRST_DATE + timedelta(minutes=n))
    message["Message-ID"] = f"<bench-{seed}-{n}@example.com>"
    message.set_content(body)
    return message.as_string()


# The sandbox, in a process of its own ---------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sandbox_usage() -> str:
    """`python -m sandbox --help`: which options this version of the sandbox takes."""
    return subprocess.run(
        [sys.executable, "-m", "sandbox", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


class SandboxProcess:
    """`python -m sandbox --port P`, started here and stopped by `stop()`; its output goes to a temp file."""

    def __init__(self) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        # Both outlive __init__; stop() closes and removes them.
        self.scratch = tempfile.TemporaryDirectory(prefix="tasklift-bench-")
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        command = [sys.executable, "-m", "sandbox", "--port", self.url.rsplit(":", 1)[1]]
        if "--tls-port" in _sandbox_usage():
            # Its HTTPS listener: a free port and a certificate of its own, never development's port and file.
            command += ["--tls-port", "0", "--cert-file", str(Path(self.scratch.name) / "tls-cert.pem")]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout_s: float = 30) -> None:
        import requests

        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the sandbox exited with status {self.process.returncode}:\n{self._output()}")
            try:
                if requests.get(f"{self.url}/_sandbox/faults", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sandbox did not answer at {self.url} within {timeout_s:.0f} s")
            time.sleep(0.1)

    def peak_rss_mb(self) -> float | None:
        """The sandbox's own peak RSS (VmHWM), for information: it is not part of `peak_rss_mb`."""
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            pass
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()
        self.scratch.cleanup()

    def _output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]


# The database of the benchmark -----------------------------------------------------------------------------
def postgres_server_url() -> str:
    """The server config.settings connects to: DATABASE_URL, else the embedded PostgreSQL under .local/."""
    from config import embedded
    from config.env import env_str

    url = env_str("DATABASE_URL")
    if url:
        return url
    local_dir = Path(env_str("TASKLIFT_LOCAL_DIR") or ROOT / ".local")
    return embedded.postgres_url(local_dir / "postgres")


def with_database(url: str, name: str) -> str:
    """`url` (same server, user, options) for the database `name`."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _admin(server_url: str, statement: str) -> None:
    import psycopg
    from psycopg import sql

    maintenance = urlsplit(server_url).path.lstrip("/")
    if maintenance in ("", BENCH_DATABASE):  # never connect to the database being dropped
        server_url = with_database(server_url, "postgres")
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(sql.SQL(statement).format(sql.Identifier(BENCH_DATABASE)))


def database_create(server_url: str) -> str:
    database_drop(server_url)
    _admin(server_url, "CREATE DATABASE {}")
    return with_database(server_url, BENCH_DATABASE)


def database_drop(server_url: str) -> None:
    _admin(server_url, "DROP DATABASE IF EXISTS {} WITH (FORCE)")


def django_setup(*, sandbox_url: str, database_url: str) -> None:
    """Point every setting at the benchmark's database, Redis database and sandbox, then start Django."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DATABASE_URL"] = database_url
    os.environ["REDIS_DB"] = BENCH_REDIS_DB
    os.environ["CACHE_KEY_PREFIX"] = "tasklift-bench"
    os.environ["SANDBOX_URL"] = sandbox_url
    for name in ("GOOGLE_CLIENT_ID", "GEMINI_API_KEY", "MICROSOFT_CLIENT_ID"):
        os.environ.pop(name, None)  # always the sandbox: a benchmark never reads real mail or pays for tokens
    os.environ.setdefault("DEBUG", "false")  # as in production: no per-query debug log in memory
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    # Migrated by a child process: the migration graph would otherwise stay in this process's peak RSS.
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True)

    import django

    django.setup()


# Measurement -------------------------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class QueryCounter:
    """Every SQL statement of the run (batch statistics count only those inside batches)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def git_version() -> str | None:
    """The commit measured, with "+dirty" when the working tree differs from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}+dirty" if dirty.strip() else commit


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection

    from accounts.services import consent_grant, user_create
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.pipeline import ExtractionPipeline
    from integrations.providers.gmail import gmail_credentials
    from integrations.services import gmail_connect
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    user = user_create(email="bench@tasklift.test", password="bench-only-password-never-used")
    consent_grant(user=user)
    client.create_mailbox(ADDRESS)
    tokens = client.issue_token(ADDRESS, expires_in=24 * 3600)
    gmail_connect(
        user=user,
        credentials=gmail_credentials(
            access_token=tokens["access_token"],
            refresh_token=tokens["refresh_token"],
            expiry=datetime.fromisoformat(tokens["expiry"]),
        ),
    )

    mails = mail_mix(args.emails, args.tasks_ratio, args.seed)
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
    rss_before = peak_rss_mb()
    counter = QueryCounter()
    cpu_started = cpu_s()
    started = time.perf_counter()
    with connection.execute_wrapper(counter):
        pipeline = ExtractionPipeline(run)
        run = pipeline.execute()
    wall = time.perf_counter() - started
    cpu = cpu_s() - cpu_started
    rss_peak = peak_rss_mb()

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
        "db_queries_total": counter.count,
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
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def report(figures: dict[str, Any]) -> None:
    f = figures
    print(f"run:   {f['status']} in {f['wall_s']:.3f} s, {f['emails_per_s']} emails/s, {f['cpu_s']:.2f} s CPU here")
    if f["error"]:
        print(f"       {f['error']}")
    print(f"       {f['tasks_created']} tasks, {f['ledger_rows']} ledger rows")
    print(
        f"gmail: {f['gmail_http_requests']} HTTP requests = {f['history_pages']} history pages "
        f"+ {f['gmail_batch_calls']} batch POSTs + {f['gmail_other_requests']} other "
        f"({f['gmail_batch_parts']} messages.get inside the batches, {f['gmail_errors']} errors); "
        f"{f['oauth_requests']} OAuth requests"
    )
    print(
        f"llm:   {f['gemini_calls']} Gemini calls for {f['llm_batches']} batches "
        f"({f['llm_latency_ms']} ms latency each), {f['prompt_tokens']} prompt + {f['output_tokens']} output tokens"
    )
    print(
        f"db:    {f['db_queries_per_batch_min']}..{f['db_queries_per_batch_max']} queries per batch for "
        f"{f['tasks_per_batch_min']}..{f['tasks_per_batch_max']} tasks per batch; "
        f"{f['db_queries_total']} in the run ({f['db_queries_in_batches']} inside batches)"
    )
    sandbox_rss = f["sandbox_peak_rss_mb"]
    print(
        f"mem:   peak RSS {f['peak_rss_mb']} MB ({f['peak_rss_before_run_mb']} MB before the run)"
        + (f"; the sandbox process, not counted: {sandbox_rss} MB" if sandbox_rss is not None else "")
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emails", type=int, default=1000, help="new emails in the mailbox (default 1000)")
    parser.add_argument("--llm-latency-ms", type=int, default=0, help="sandbox Gemini latency per call (default 0)")
    parser.add_argument("--tasks-ratio", type=float, default=0.5, help="share of emails with asks (default 0.5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mail mix (default 1)")
    args = parser.parse_args()
    if args.emails < 1 or not 0 <= args.tasks_ratio <= 1 or not 0 <= args.llm_latency_ms <= 120_000:
        parser.error("--emails must be >= 1, --tasks-ratio within 0..1, --llm-latency-ms within 0..120000")

    print(
        f"benchmark extract_gmail: {args.emails} emails, tasks ratio {args.tasks_ratio}, seed {args.seed}, "
        f"Gemini latency {args.llm_latency_ms} ms"
    )
    sandbox = SandboxProcess()
    created: str | None = None  # the server the benchmark database was created on
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url)
        created = server_url
        django_setup(sandbox_url=sandbox.url, database_url=database_url)
        django_ready = True
        host = urlsplit(server_url)
        print(
            f"setup: sandbox at {sandbox.url} (pid {sandbox.process.pid}), database {BENCH_DATABASE} "
            f"on {host.hostname or host.query}, Redis db {BENCH_REDIS_DB}"
        )
        figures = bench(args, sandbox)
    finally:
        try:
            if django_ready:
                from django.db import connections

                connections.close_all()  # a database with open connections cannot be dropped
            if created is not None:
                database_drop(created)
        finally:
            sandbox.stop()
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
