"""What the extraction benchmarks share: the seeded mail, the sandbox in a process of its own, a database
of their own, Django pointed at both, the measurements, and the frame of a run (set up, measure, always
clean up, print the figures and then one JSON line).

Each benchmark keeps to itself what differs: how its mailbox is connected and how its requests are counted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from config.ports import free_ports

ROOT = Path(__file__).resolve().parents[1]
BENCH_REDIS_DB = "2"  # development uses 0 and the tests 1


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
    date: datetime  # its Date header


def mail_mix(
    count: int,
    tasks_ratio: float,
    seed: int,
    *,
    to: str,
    first_date: datetime,
    step: timedelta,
    body_bytes: int = 0,
) -> list[Mail]:
    """`count` emails to `to`, dated `first_date`, then one `step` apart; each has asks with probability
    `tasks_ratio` (then 1 to 3 of them), and a body of at least `body_bytes` (more filler paragraphs).
    Same arguments, same mail."""
    rng = random.Random(seed)
    mails = []
    for n in range(count):
        asks = rng.randint(1, len(ASKS)) if rng.random() < tasks_ratio else 0
        paragraphs = rng.sample(FILLER, rng.randint(1, 3))
        while sum(len(p) + 1 for p in paragraphs) < body_bytes:
            paragraphs.append(rng.choice(FILLER))
        lines = ["Hi,", "", *paragraphs, *(ask.format(n=n) for ask in ASKS[:asks]), "", "Thanks,", "Alex"]
        subject = f"Project {n}" if asks else f"Update {n}"
        date = first_date + n * step
        raw = _rfc822(n, seed, rng.choice(SENDERS), to, subject, date, "\n".join(lines) + "\n")
        mails.append(Mail(raw=raw, asks=asks, date=date))
    return mails


def _rfc822(n: int, seed: int, sender: str, to: str, subject: str, date: datetime, body: str) -> str:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"Bench Person <{to}>"
    message["Subject"] = subject
    message["Date"] = format_datetime(date)
    message["Message-ID"] = f"<bench-{seed}-{n}@example.com>"
    message.set_content(body)
    return message.as_string()


# The sandbox, in a process of its own ---------------------------------------------------------------------
def _sandbox_usage() -> str:
    """`python -m sandbox --help`: which options this version of the sandbox takes."""
    return subprocess.run(
        [sys.executable, "-m", "sandbox", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


class SandboxProcess:
    """`python -m sandbox --port P [--tls-port Q --cert-file F]`, started here and stopped by `stop()`; its
    output goes to a temp file.

    The HTTPS listener (Microsoft identity and Graph), when this version of the sandbox has one, gets a free
    port and writes its certificate into a temporary directory: never development's port 8766 or its file
    `.local/sandbox/tls-cert.pem`. `tls_url` and `cert_file` are then set (else empty and None).
    """

    def __init__(self, *, require_tls: bool = False, demo: str | None = None) -> None:
        http_port, tls_port = free_ports(2)
        self.url = f"http://127.0.0.1:{http_port}"
        self.tls_url = ""
        self.cert_file: Path | None = None
        # Both outlive __init__; stop() closes and removes them.
        self.scratch = tempfile.TemporaryDirectory(prefix="tasklift-bench-")
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        command = [sys.executable, "-m", "sandbox", "--port", str(http_port)]
        if "--tls-port" in _sandbox_usage():
            self.tls_url = f"https://127.0.0.1:{tls_port}"
            self.cert_file = Path(self.scratch.name) / "tls-cert.pem"
            command += ["--tls-port", str(tls_port), "--cert-file", str(self.cert_file)]
        elif require_tls:
            self.stop()
            raise RuntimeError("this sandbox has no HTTPS listener (--tls-port): Microsoft needs one")
        if demo is not None:  # the demo mailboxes of `demo`, as a demo deployment starts it (docs/deploy.md)
            command += ["--demo", demo]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout_s: float = 30) -> None:
        """Until the control API answers over http and, with TLS, over https with the certificate trusted."""
        import requests

        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the sandbox exited with status {self.process.returncode}:\n{self._output()}")
            try:
                if requests.get(f"{self.url}/_sandbox/faults", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sandbox did not answer at {self.url} within {timeout_s:.0f} s")
            time.sleep(0.1)
        if self.cert_file is not None:
            # The control API over the HTTPS listener (not logged): its certificate is the file, and it verifies.
            session = requests.Session()
            session.trust_env = False  # a REQUESTS_CA_BUNDLE in the environment would override verify
            session.verify = str(self.cert_file)
            with session:
                session.get(f"{self.tls_url}/_sandbox/faults", timeout=5).raise_for_status()

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
        process = getattr(self, "process", None)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
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


def _admin(server_url: str, database: str, statement: str, *names: str) -> None:
    import psycopg
    from psycopg import sql

    maintenance = urlsplit(server_url).path.lstrip("/")
    if maintenance in ("", database):  # never connect to the database being dropped
        server_url = with_database(server_url, "postgres")
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(sql.SQL(statement).format(sql.Identifier(database), *map(sql.Identifier, names)))


def database_create(server_url: str, database: str) -> str:
    """A new, empty database `database` on the server; with TASKLIFT_DATABASE_TEMPLATE (a migrated database on
    the same server, which the test suite's smoke forms give), a copy of that one, so `migrate` finds nothing
    left to do."""
    from config.env import env_str

    database_drop(server_url, database)
    if template := env_str("TASKLIFT_DATABASE_TEMPLATE"):
        _admin(server_url, database, "CREATE DATABASE {} TEMPLATE {}", template)
    else:
        _admin(server_url, database, "CREATE DATABASE {}")
    return with_database(server_url, database)


def database_drop(server_url: str, database: str) -> None:
    _admin(server_url, database, "DROP DATABASE IF EXISTS {} WITH (FORCE)")


def django_setup(*, sandbox: SandboxProcess, database_url: str, cache_prefix: str) -> None:
    """Point every setting at the benchmark's database, Redis database and sandbox, then start Django."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DATABASE_URL"] = database_url
    os.environ["REDIS_DB"] = BENCH_REDIS_DB
    os.environ["CACHE_KEY_PREFIX"] = cache_prefix
    os.environ["SANDBOX_URL"] = sandbox.url
    if sandbox.cert_file is not None:
        # Microsoft identity and Graph: this sandbox's HTTPS listener, trusting exactly its certificate.
        os.environ["SANDBOX_TLS_URL"] = sandbox.tls_url
        os.environ["MICROSOFT_CA_BUNDLE"] = str(sandbox.cert_file)
    for name in ("GOOGLE_CLIENT_ID", "GEMINI_API_KEY", "MICROSOFT_CLIENT_ID"):
        os.environ.pop(name, None)  # always the sandbox: a benchmark never reads real mail or pays for tokens
    os.environ.setdefault("DEBUG", "false")  # as in production: no per-query debug log in memory
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    # Migrated by a child process: the migration graph would otherwise stay in this process's peak RSS.
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True)

    import django

    django.setup()


def connect_sandbox_gmail(client: Any, user: Any, address: str) -> Any:
    """Create `address` in the sandbox and connect it for `user` as the OAuth callback would (a token that
    lasts a day, so a long benchmark never refreshes it)."""
    from integrations.providers.gmail import gmail_credentials
    from integrations.services import gmail_connect

    client.create_mailbox(address)
    tokens = client.issue_token(address, expires_in=24 * 3600)
    return gmail_connect(
        user=user,
        credentials=gmail_credentials(
            access_token=tokens["access_token"],
            refresh_token=tokens["refresh_token"],
            expiry=datetime.fromisoformat(tokens["expiry"]),
        ),
    )


def connect_sandbox_outlook(client: Any, user: Any, address: str) -> Any:
    """Create `address` in the sandbox's Outlook and connect it for `user` through MSAL, as the Connect button
    does: the consent page approved, its code traded for a token cache."""
    from importlib import import_module

    from django.conf import settings

    from benchmarks.extract_outlook import approve_consent_page
    from integrations.oauth.microsoft import MicrosoftOAuthFlow
    from integrations.providers.outlook import graph_session
    from integrations.services import outlook_connect

    client.create_outlook_mailbox(address)
    flow = MicrosoftOAuthFlow(import_module(settings.SESSION_ENGINE).SessionStore())
    params = approve_consent_page(graph_session(), flow.get_authorization_url(login_hint=address), address)
    msal_cache, home_account_id, access_token = flow.get_token_cache(params=params)
    return outlook_connect(user=user, msal_cache=msal_cache, home_account_id=home_account_id, access_token=access_token)


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


# Reporting -----------------------------------------------------------------------------------------------------
def report_run(f: dict[str, Any]) -> None:
    print(f"run:   {f['status']} in {f['wall_s']:.3f} s, {f['emails_per_s']} emails/s, {f['cpu_s']:.2f} s CPU here")
    if f["error"]:
        print(f"       {f['error']}")
    print(f"       {f['tasks_created']} tasks, {f['ledger_rows']} ledger rows")


def report_rest(f: dict[str, Any]) -> None:
    """The lines after the provider's own: Gemini, database, memory, failed checks."""
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


# The frame of a benchmark ----------------------------------------------------------------------------------------
def parse_args(doc: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emails", type=int, default=1000, help="new emails in the mailbox (default 1000)")
    parser.add_argument("--llm-latency-ms", type=int, default=0, help="sandbox Gemini latency per call (default 0)")
    parser.add_argument("--tasks-ratio", type=float, default=0.5, help="share of emails with asks (default 0.5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mail mix (default 1)")
    parser.add_argument(
        "--concurrency", type=int, default=None, help="Gemini calls in flight (default EXTRACTION_LLM_CONCURRENCY)"
    )
    parser.add_argument("--body-bytes", type=int, default=0, help="each body at least this long (default: as is)")
    args = parser.parse_args()
    if args.emails < 1 or not 0 <= args.tasks_ratio <= 1 or not 0 <= args.llm_latency_ms <= 120_000:
        parser.error("--emails must be >= 1, --tasks-ratio within 0..1, --llm-latency-ms within 0..120000")
    if (args.concurrency is not None and args.concurrency < 1) or args.body_bytes < 0:
        parser.error("--concurrency must be >= 1 and --body-bytes >= 0")
    return args


@dataclass(frozen=True)
class Benchmark:
    name: str  # printed first
    database: str  # created fresh on the server config.settings uses, dropped at the end
    cache_prefix: str  # its cache keys in Redis database BENCH_REDIS_DB
    bench: Callable[[argparse.Namespace, SandboxProcess], dict[str, Any]]  # set up, run, measure
    report: Callable[[dict[str, Any]], None]  # the readable figures
    require_tls: bool = False  # Microsoft identity and Graph need the sandbox's HTTPS listener


def main(benchmark: Benchmark, args: argparse.Namespace) -> int:
    """Run `benchmark` with everything it needs, always cleaning up; print its figures, the JSON line last.
    The exit status is 1 when a check failed."""
    print(
        f"benchmark {benchmark.name}: {args.emails} emails, tasks ratio {args.tasks_ratio}, seed {args.seed}, "
        f"Gemini latency {args.llm_latency_ms} ms"
    )
    sandbox = SandboxProcess(require_tls=benchmark.require_tls)
    created: str | None = None  # the server the benchmark database was created on
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, benchmark.database)
        created = server_url
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=benchmark.cache_prefix)
        django_ready = True
        host = urlsplit(server_url)
        tls = f" and {sandbox.tls_url} (certificate {sandbox.cert_file})" if sandbox.cert_file else ""
        print(
            f"setup: sandbox at {sandbox.url}{tls} (pid {sandbox.process.pid}), database {benchmark.database} "
            f"on {host.hostname or host.query}, Redis db {BENCH_REDIS_DB}"
        )
        figures = benchmark.bench(args, sandbox)
    finally:
        try:
            if django_ready:
                from django.db import connections

                connections.close_all()  # a database with open connections cannot be dropped
            if created is not None:
                database_drop(created, benchmark.database)
        finally:
            sandbox.stop()
    benchmark.report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


@dataclass
class TimedRun:
    """One extraction run, measured: its pipeline (batch statistics), record, and costs."""

    pipeline: Any
    run: Any
    queries: int
    wall: float
    cpu: float
    rss_before: float
    rss_peak: float
    memory: RunMemory


@dataclass
class RunMemory:
    """This process's resident memory (current RSS, not the process's peak so far) right before the run,
    at its end, and the highest seen while it ran (sampled every 10 ms), in MB."""

    start: float
    end: float
    peak: float


def rss_mb() -> float:
    """The current resident set size of this process (Linux: /proc/self/statm)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class _RssSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.start_rss = self.peak = rss_mb()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.01):
            self.peak = max(self.peak, rss_mb())


def timed_run(run: Any) -> TimedRun:
    """Execute `run` once through ExtractionPipeline, timing it and counting every SQL statement."""
    from django.db import connection

    from config.celery import malloc_arenas_limit
    from extraction.llm import gemini_client
    from extraction.pipeline import ExtractionPipeline
    from integrations.mail.clean import clean_warm_up

    malloc_arenas_limit()  # as a worker and each of its processes do when they start (config/celery.py),
    clean_warm_up()  # not in their first run
    gemini_client()
    gc.collect()
    rss_before = peak_rss_mb()
    sampler = _RssSampler()
    sampler.start()
    counter = QueryCounter()
    cpu_started = cpu_s()
    started = time.perf_counter()
    with connection.execute_wrapper(counter):
        pipeline = ExtractionPipeline(run)
        run = pipeline.execute()
    wall = time.perf_counter() - started
    cpu = cpu_s() - cpu_started
    sampler.done.set()
    sampler.join()
    memory = RunMemory(start=sampler.start_rss, end=rss_mb(), peak=max(sampler.peak, rss_mb()))
    return TimedRun(pipeline, run, counter.count, wall, cpu, rss_before, peak_rss_mb(), memory)


def configure_run(args: argparse.Namespace) -> None:
    """One run reads the whole mailbox (no slice), with `--concurrency` Gemini calls in flight if given."""
    from django.conf import settings

    if args.concurrency is not None:
        settings.EXTRACTION_LLM_CONCURRENCY = args.concurrency
    settings.EXTRACTION_RUN_MAX_EMAILS = max(args.emails, settings.EXTRACTION_RUN_MAX_EMAILS)
    settings.EXTRACTION_RUN_SECONDS = 24 * 3600


def concurrency_figures(
    args: argparse.Namespace, *, wall: float, memory: RunMemory, checks: dict[str, bool]
) -> dict[str, Any]:
    """The figures of parallel calls and memory, and the check of the wall time against the latency: with
    Gemini latency L and C calls in flight, a run of B batches takes at most 1.15 x (B / C) x L."""
    from django.conf import settings

    concurrency = settings.EXTRACTION_LLM_CONCURRENCY
    batches = -(-args.emails // settings.EXTRACTION_BATCH_SIZE)
    bound = 1.15 * (batches / concurrency) * args.llm_latency_ms / 1000
    if args.llm_latency_ms >= 500:
        checks[f"wall <= 1.15 x ({batches} batches / {concurrency}) x latency = {bound:.1f} s"] = wall <= bound
    return {
        "concurrency": concurrency,
        "body_bytes": args.body_bytes,
        "llm_wall_bound_s": round(bound, 2),
        # The run's growth: its RSS at the end minus before it; and the highest it reached above the start.
        "rss_start_mb": round(memory.start, 1),
        "rss_growth_mb": round(memory.end - memory.start, 1),
        "rss_peak_growth_mb": round(memory.peak - memory.start, 1),
    }


def redis_purge(name: str) -> Any:
    """Remove a benchmark's queue and cache keys (everything named `name*`, and kombu's bindings of its
    queue) from the benchmarks' Redis database; returns the connection, for what else a benchmark removes."""
    import redis
    from django.conf import settings

    connection = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in (f"{name}*", f"_kombu.binding.{name}*"):
        keys = list(connection.scan_iter(match=pattern, count=1000))
        if keys:
            connection.delete(*keys)
    return connection


def sent_cursors_positioned(users: Any) -> None:
    """The Sent cursors of these people's mailboxes at the Sent folder's current position, as their first read
    leaves them: a benchmark of idle mailboxes measures mailboxes read once, not a first read still to do."""
    from integrations.models import FIRST_READ, SyncCursor
    from integrations.services import integration_provider

    cursors = SyncCursor.objects.filter(
        integration__user__in=users, purpose=SyncCursor.Purpose.SENT_MAIL, value=FIRST_READ
    ).select_related("integration")
    for cursor in cursors:
        cursor.value = integration_provider(integration=cursor.integration).current_cursor(folder="sent")
        cursor.save(update_fields=["value"])
