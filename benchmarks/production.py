"""Production: Tasklift deployed as docs/deploy.md says, on Debian's PostgreSQL and Redis, kept up by its own
supervisor, while the database and the broker restart and a worker is killed, with mail arriving by push all along.

    uv run python benchmarks/production.py [--people 10] [--emails 40] [--faults postgres,worker,redis,web]

Setup (not measured): Debian's `postgresql` and `redis-server` are installed when missing (as root, `apt-get`, as
`make browser` installs chromium). Both run on free loopback ports with their data in a temporary folder:
PostgreSQL through initdb and pg_ctl (as the `postgres` user when this runs as root: PostgreSQL refuses root),
Redis with no persistence (`--save '' --appendonly no`), so a restart loses its queue, the case the runbook
says loses no mail. The sandbox serves Google, Microsoft and Gemini over https (the demo deployment), and its
certificate is the one trust anchor of every client, named by SANDBOX_CA_BUNDLE alone (docs/deploy.md).

Then the runbook's steps, in production demo mode (`TASKLIFT_MODE=production TASKLIFT_DEMO=true`): `manage.py
migrate`, `collectstatic --noinput`, `createsuperuser --noinput`, and the Procfile's processes under the project's
supervisor, `python -m config.supervise web=2 worker=2 beat=1`: one gunicorn of two processes (web=N is one
gunicorn with WEB_CONCURRENCY=N), two Celery workers of CELERY_WORKER_CONCURRENCY=2, one beat. The sandbox's
Pub/Sub pushes Gmail to PUSH_BASE_URL/webhooks/gmail (configured as an operator configures the push
subscription) and Graph notifies /webhooks/outlook. `--people` people connect a Gmail and an Outlook mailbox
each, as the OAuth callbacks do.

Measured: `--emails` emails per mailbox (the seeded mix of benchmarks/common.py) are delivered at a steady pace
for `--deliver-seconds`, and meanwhile, in order: PostgreSQL stopped for `--down-seconds` and started again, one
worker's process group SIGKILLed, Redis stopped for `--down-seconds` and started again (empty), gunicorn's master
alone SIGKILLed (`web_recovered_s`: until /healthz answers again, at most 30 s). Delivery never
pauses. After the last fault one more email is delivered; `recovered_s` is the time from the end of the last
fault until /readyz answers 200 and that email is in the ledger. Then the benchmark waits (at most
`--drain-timeout` s) until every email is in the ledger and no run is left queued or running, and counts.

The benchmark never starts a process of the app again itself (`hand_restarts`): what a fault stops, the
supervisor must restart. Human-readable figures first; the last line is one JSON object. Exit status 1 when a
check fails. Everything it started is stopped at the end and its temporary folder removed, even on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.common import (
    ROOT,
    SandboxProcess,
    connect_sandbox_gmail,
    connect_sandbox_outlook,
    git_version,
    mail_mix,
)
from config.ports import free_ports
from config.supervise import die_with_parent

FAULTS = ("postgres", "worker", "redis", "web")  # in this order, spread over the delivery
WEB_RECOVERED_MAX_S = 30.0  # gunicorn's master killed: the supervisor starts it again, serving within this
DATABASE = "tasklift"
SUPERUSER = "admin@tasklift.test"
PUSH_RETRY_DELAYS_MS = [1000, 2000, 4000, 8000, 16000, 32000]  # a provider retries for about a minute here
READY_TIMEOUT_S = 180.0
SYSTEM_VARIABLES = frozenset({"HOME", "LANG", "LOGNAME", "PATH", "TERM", "TMPDIR", "TZ", "USER"})
T = TypeVar("T")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=10, help="people, each with Gmail and Outlook (default 10)")
    parser.add_argument("--emails", type=int, default=40, help="emails per mailbox (default 40)")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"comma-separated, of {', '.join(FAULTS)}; 'none' for none (default all four)",
    )
    parser.add_argument("--deliver-seconds", type=float, default=120, help="seconds of delivery (default 120)")
    parser.add_argument("--down-seconds", type=float, default=8, help="seconds a server stays down (default 8)")
    parser.add_argument("--llm-latency-ms", type=int, default=200, help="sandbox Gemini latency (default 200)")
    parser.add_argument("--drain-timeout", type=float, default=300, help="max seconds to finish (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mail (default 1)")
    parser.add_argument("--log", type=Path, help="keep every process's output in this file (default: removed)")
    args = parser.parse_args()
    args.faults = [] if args.faults == "none" else [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = set(args.faults) - set(FAULTS)
    if unknown or args.people < 1 or args.emails < 1 or args.deliver_seconds <= 0 or args.down_seconds <= 0:
        parser.error(f"--faults of {', '.join(FAULTS)} (not {', '.join(sorted(unknown))}), positive sizes and times")
    args.faults = [f for f in FAULTS if f in args.faults]
    return args


# Debian's servers, in a temporary folder -------------------------------------------------------------------
def _postgres_bin() -> Path | None:
    """The newest PostgreSQL of Debian's `postgresql-NN` packages (its binaries are not on PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def debian_servers_ensure() -> Path:
    """Install Debian's `postgresql` and `redis-server` when missing; the PostgreSQL binaries' folder."""
    missing = [
        package
        for package, present in (("postgresql", _postgres_bin()), ("redis-server", shutil.which("redis-server")))
        if not present
    ]
    if missing:
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            raise RuntimeError(f"Debian's {' and '.join(missing)} missing, and this is not root with apt-get")
        print(f"setup: installing Debian's {' and '.join(missing)}", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env, check=True, timeout=900)
    bin_dir = _postgres_bin()
    if bin_dir is None or not shutil.which("redis-server"):
        raise RuntimeError("PostgreSQL or redis-server is still missing after apt-get install")
    return bin_dir


class Postgres:
    """A cluster of its own under `folder`, on a free loopback port, trusting local connections."""

    def __init__(self, bin_dir: Path, folder: Path) -> None:
        self.bin_dir, self.data, self.socket_dir = bin_dir, folder / "data", folder / "socket"
        (self.port,) = free_ports(1)
        self.user = "postgres" if os.geteuid() == 0 else None  # PostgreSQL refuses to run as root
        for path in (folder, self.data, self.socket_dir):
            path.mkdir(mode=0o700, exist_ok=True)
            if self.user is not None:
                shutil.chown(path, self.user, self.user)
        self._pg("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", timeout=120)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _pg(self, command: str, *args: str, timeout: float = 90) -> None:
        done = subprocess.run(
            [str(self.bin_dir / command), "-D", str(self.data), *args],
            user=self.user,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode:
            log = self.data / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"PostgreSQL {command} failed: {done.stdout[-1000:]}{done.stderr[-2000:]}\n{tail}")

    def start(self) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.socket_dir}"
        self._pg("pg_ctl", "-w", "-t", "60", "-o", options, "-l", str(self.data / "server.log"), "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends every session at once, as a restart by an operator or a failover does."""
        self._pg("pg_ctl", "-w", "-t", "60", "-m", mode, "stop")

    def stop_if_running(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")


class Redis:
    """redis-server on a free loopback port, without persistence: a restart starts empty."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(exist_ok=True)
        self.folder = folder
        (self.port,) = free_ports(1)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        command += ["no", "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")]
        self.process = subprocess.Popen(
            command, start_new_session=True, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        import redis

        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(redis.RedisError):
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.folder / 'redis.log'}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            _stop_group(self.process, grace=15)
            self.process = None


def _stop_group(process: subprocess.Popen[bytes], *, grace: float) -> None:
    """SIGTERM to the process's group, SIGKILL to what is left of it after `grace` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


# The deployment: the runbook's environment and steps ---------------------------------------------------------
@dataclass
class Deployment:
    env: dict[str, str]
    site: str  # the web server's base URL
    status_file: Path  # the supervisor's
    metrics_token: str
    log: IO[bytes]  # every process's output
    supervisor: subprocess.Popen[bytes] | None = None
    app: Path = ROOT  # the checkout it runs (benchmarks/upgrade.py: a release's, then this one)
    python: str = sys.executable  # of that checkout's virtualenv
    options: tuple[str, ...] = ()  # more of the supervisor's options (`--env-file FILE`)

    def start(self) -> None:
        """The Procfile's processes under the project's supervisor, in a process group of its own."""
        command = [self.python, "-m", "config.supervise", "web=2", "worker=2", "beat=1"]
        command += ["--status-file", str(self.status_file), *self.options]
        self.supervisor = subprocess.Popen(
            command,
            cwd=self.app,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # should this process be killed outright, the supervisor stops its own
        )

    def stop(self) -> None:
        """The supervisor stops its processes on SIGTERM; whatever of them is left is killed by its group."""
        if self.supervisor is None:
            return
        listed = [p["pid"] for p in self.processes()]
        _stop_group(self.supervisor, grace=60)
        for pid in listed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:  # a group of its own, started by the supervisor
                    os.killpg(pid, signal.SIGKILL)

    def processes(self) -> list[dict[str, Any]]:
        """The supervisor's status file, `{"processes": {"worker.1": {"name", "pid", "restarts", ...}}}`, as
        [{"label": "worker.1", "name": "worker", "pid", "restarts", ...}] of the processes with a pid."""
        try:
            status = json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return []  # not written yet
        return [{**entry, "label": label} for label, entry in status["processes"].items() if entry.get("pid")]

    def restarts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for entry in self.processes():
            counts[entry["name"]] += entry["restarts"]
        return dict(counts)

    def workers(self) -> list[int]:
        return [entry["pid"] for entry in self.processes() if entry["name"] == "worker"]

    def get(self, path: str, **headers: str) -> tuple[int | None, str]:
        """GET on the site as its proxy would pass it on (X-Forwarded-Proto https); None when nothing answers."""
        import requests

        try:
            answer = requests.get(
                f"{self.site}{path}",
                headers={"X-Forwarded-Proto": "https", "X-Real-IP": "127.0.0.1", **headers},  # as the proxy sends
                timeout=5,
                allow_redirects=False,
            )
        except requests.RequestException:
            return None, ""
        return answer.status_code, answer.text


def deployment_env(
    *, scratch: Path, postgres: Postgres, redis: Redis, sandbox: SandboxProcess, web_port: int
) -> tuple[dict[str, str], str]:
    """The production demo's environment (docs/deploy.md's settings), and the metrics token."""
    from cryptography.fernet import Fernet

    site = f"http://127.0.0.1:{web_port}"
    metrics_token = secrets.token_urlsafe(32)
    assert sandbox.cert_file is not None
    cert = str(sandbox.cert_file)
    env = {
        # Only the system's own variables: no setting of a development or test configuration (a test session's
        # PUSH_ENABLED=false, say) leaks in, and no real credential (always the sandbox).
        name: value
        for name, value in os.environ.items()
        if name in SYSTEM_VARIABLES or name.startswith("LC_")
    }
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # gunicorn, celery
        DJANGO_SETTINGS_MODULE="config.settings",
        TASKLIFT_MODE="production",
        TASKLIFT_DEMO="true",
        TASKLIFT_LOCAL_DIR=str(scratch / "local"),  # beat's schedule file
        STATIC_ROOT=str(scratch / "local" / "static"),
        SECRET_KEY=secrets.token_urlsafe(64),
        TASKLIFT_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        EMAIL_HOST="127.0.0.1",  # required in production; nothing here sends mail
        DATABASE_URL=postgres.url,
        REDIS_URL=redis.url,
        SANDBOX_URL=sandbox.tls_url,
        SANDBOX_TLS_URL=sandbox.tls_url,
        SANDBOX_CA_BUNDLE=cert,  # the one CA setting of a demo (docs/deploy.md); HTTPLIB2_CA_CERTS, SSL_CERT_FILE
        # and REQUESTS_CA_BUNDLE stay unset, as the runbook says (SYSTEM_VARIABLES keeps them out of os.environ)
        SITE_URL=site.replace("http://", "https://", 1),  # production refuses http; nothing here follows its links
        PUSH_BASE_URL=site,  # plain http only because the sandbox pushes on loopback (see docs/deploy.md)
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RATELIMIT_IP_META_KEY="HTTP_X_REAL_IP",
        TRUSTED_PROXIES="127.0.0.1",  # as the runbook's Step 5 says: the pushes and the scrapes come from here
        CSRF_TRUSTED_ORIGINS=site,
        SECURE_SSL_REDIRECT="false",  # no proxy in front here to answer http with a redirect
        PORT=str(web_port),
        GUNICORN_BIND=f"127.0.0.1:{web_port}",
        INBOUND_SMTP_HOST="127.0.0.1",  # the `inbound` process (the runbook's port 25 is not ours to take here)
        INBOUND_SMTP_PORT=str(free_ports(1)[0]),
        WEB_CONCURRENCY="2",
        CELERY_WORKER_CONCURRENCY="2",
        METRICS_TOKEN=metrics_token,
        PROMETHEUS_MULTIPROC_DIR=str(scratch / "prometheus"),
        DJANGO_SUPERUSER_EMAIL=SUPERUSER,
        DJANGO_SUPERUSER_PASSWORD=secrets.token_urlsafe(16),
        LOG_LEVEL="INFO",
    )
    # Shorter waits of the safety nets may be asked for (the smoke test does); the defaults otherwise.
    for name in ("EXTRACTION_QUEUED_STALE_SECONDS", "EXTRACTION_REAPER_SECONDS", "EXTRACTION_SCAN_SECONDS"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    (scratch / "prometheus").mkdir(exist_ok=True)
    return env, metrics_token


RUNBOOK_STEPS = (("migrate", "--noinput"), ("collectstatic", "--noinput"), ("createsuperuser", "--noinput"))


def runbook_steps(
    env: dict[str, str],
    log: IO[bytes],
    *,
    steps: tuple[tuple[str, ...], ...] = RUNBOOK_STEPS,
    app: Path = ROOT,
    python: str = sys.executable,
) -> dict[str, float]:
    """docs/deploy.md's steps before the processes start (`manage.py` of the checkout `app`); each one's seconds."""
    took = {}
    for step in steps:
        started = time.monotonic()
        done = subprocess.run(
            [python, "manage.py", *step], cwd=app, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=900
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(step)} ({app.name}) failed with status {done.returncode}")
        took[step[0]] = time.monotonic() - started
    return took


def database_create(postgres: Postgres) -> None:
    import psycopg

    with psycopg.connect(postgres.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{DATABASE}"')


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> float:
    """Poll `condition` until true (at most `timeout` s); the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.25)
    return time.monotonic() - started


def db(query: Callable[[], T], *, timeout: float = 60) -> T:
    """`query` through this process's own database connection, again after a dropped connection (PostgreSQL
    restarts under it), for at most `timeout` s."""
    from django.db import connections
    from django.db.utils import Error as DatabaseError

    deadline = time.monotonic() + timeout
    while True:
        try:
            return query()
        except DatabaseError:
            connections.close_all()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# People, mailboxes and their mail -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mailbox:
    person: int
    provider: str  # "gmail" | "outlook"
    address: str
    user_id: int


@dataclass
class Delivered:
    mailbox: Mailbox
    asks: int
    at: float  # time.monotonic() of the delivery


def people_connect(client: Any, count: int) -> tuple[list[Any], list[Mailbox]]:
    """`count` consenting people, each connecting a Gmail and an Outlook mailbox as the OAuth callbacks do."""
    from accounts.services import consent_grant, user_create

    users, mailboxes = [], []
    for index in range(count):
        user = user_create(email=f"person{index}@tasklift.test", password=secrets.token_urlsafe(16))
        consent_grant(user=user)
        gmail, outlook = f"person{index}@example.com", f"person{index}@outlook.example.com"
        connect_sandbox_gmail(client, user, gmail)
        connect_sandbox_outlook(client, user, outlook)
        users.append(user)
        mailboxes += [Mailbox(index, "gmail", gmail, user.pk), Mailbox(index, "outlook", outlook, user.pk)]
    return users, mailboxes


def mail_plan(mailboxes: list[Mailbox], emails: int, seed: int) -> list[tuple[Mailbox, str, int]]:
    """Every mailbox's `emails` emails, round robin over the mailboxes (so one mailbox's are far apart: Gmail
    pushes at most once a second per address)."""
    first_date = datetime.now(UTC) - timedelta(hours=1)
    mixes = [
        mail_mix(emails, 0.5, seed * 1000 + n, to=m.address, first_date=first_date, step=timedelta(seconds=1))
        for n, m in enumerate(mailboxes)
    ]
    return [(mailboxes[n], mixes[n][i].raw, mixes[n][i].asks) for i in range(emails) for n in range(len(mailboxes))]


def deliver(client: Any, mailbox: Mailbox, raw: str) -> str:
    if mailbox.provider == "gmail":
        return str(client.deliver(mailbox.address, raw)["id"])
    return str(client.deliver_outlook(mailbox.address, raw)["id"])


class Deliverer(threading.Thread):
    """Delivers the plan at a steady pace over `seconds`, whatever else happens (the sandbox never fails)."""

    def __init__(self, client: Any, plan: list[tuple[Mailbox, str, int]], seconds: float) -> None:
        super().__init__(daemon=True)
        self.client, self.plan, self.seconds = client, plan, seconds
        self.delivered: dict[str, Delivered] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        started = time.monotonic()
        step = self.seconds / max(1, len(self.plan))
        try:
            for n, (mailbox, raw, asks) in enumerate(self.plan):
                if self.stop.wait(max(0.0, started + n * step - time.monotonic())):
                    return
                message_id = deliver(self.client, mailbox, raw)
                with self.lock:
                    self.delivered[message_id] = Delivered(mailbox, asks, time.monotonic())
        except BaseException as error:  # reported by the main thread
            self.error = error


class ReadyProbe(threading.Thread):
    """/readyz (or /healthz where there is none) every half second: (time, status) of each answer (None when
    nothing answered)."""

    def __init__(self, deployment: Deployment, path: str) -> None:
        super().__init__(daemon=True)
        self.deployment, self.path = deployment, path
        self.samples: list[tuple[float, int | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            status, _ = self.deployment.get(self.path)
            self.samples.append((time.monotonic(), status))

    def between(self, start: float, end: float) -> list[int | None]:
        return [status for at, status in list(self.samples) if start <= at <= end]


@dataclass
class Fault:
    name: str
    started: float
    ended: float
    detail: str = ""


def fault_run(name: str, *, postgres: Postgres, redis: Redis, deployment: Deployment, down_s: float) -> Fault:
    started = time.monotonic()
    if name == "postgres":
        postgres.stop()
        time.sleep(down_s)
        postgres.start()
        return Fault(name, started, time.monotonic())
    if name == "redis":
        redis.stop()
        time.sleep(down_s)
        redis.start()
        return Fault(name, started, time.monotonic())
    if name == "web":
        # gunicorn's master alone SIGKILLed (issue 35: the web then answered nothing for about a minute): its
        # processes are left holding the port until the supervisor ends what is left of the group and starts it
        # again. Its end is when the new gunicorn answers /healthz (the old processes may answer for a moment).
        (web,) = [entry for entry in deployment.processes() if entry["name"] == "web"]
        pid = web["pid"]
        if os.getpgid(pid) != pid:
            raise RuntimeError(f"web {pid} is not in a process group of its own")
        os.kill(pid, signal.SIGKILL)

        def new_web_answers() -> bool:
            now = [entry for entry in deployment.processes() if entry["name"] == "web"]
            restarted = bool(now) and now[0]["pid"] != pid and now[0]["restarts"] > web["restarts"]
            return restarted and deployment.get("/healthz")[0] == 200

        wait_for(new_web_answers, READY_TIMEOUT_S, "a new web answering")
        return Fault(name, started, time.monotonic(), f"process group {pid}")
    workers = deployment.workers()
    if not workers:
        raise RuntimeError("the supervisor's status file names no worker to kill")
    pid = workers[0]
    if os.getpgid(pid) != pid:  # never the group of the supervisor, or of this process
        raise RuntimeError(f"worker {pid} is not in a process group of its own")
    os.killpg(pid, signal.SIGKILL)  # the worker and its pool, as when its machine dies
    return Fault(name, started, time.monotonic(), f"process group {pid}")


# The benchmark ------------------------------------------------------------------------------------------------------
@dataclass
class Servers:
    """What a deployment benchmark sets up before the app: its folder and log, Debian's PostgreSQL (an empty
    database) and Redis, the sandbox over https, a port for the web, and the runbook's settings for all that."""

    scratch: Path
    log: IO[bytes]  # every process's output
    bin_dir: Path  # PostgreSQL's programs
    postgres: Postgres
    redis: Redis
    sandbox: SandboxProcess
    web_port: int
    env: dict[str, str]
    metrics_token: str


def servers_start(name: str, log_path: Path | None, stack: contextlib.ExitStack) -> Servers:
    """Everything `Servers` names, each stopped (and the folder removed) when `stack` closes; the log's end is
    printed should the benchmark fail."""
    bin_dir = debian_servers_ensure()
    scratch = Path(tempfile.mkdtemp(prefix=f"tasklift-{name}-"))
    stack.callback(shutil.rmtree, scratch, ignore_errors=True)
    scratch.chmod(0o755)  # the postgres user reaches its folder inside
    log = stack.enter_context(open(log_path or scratch.parent / f"{scratch.name}.log", "w+b"))  # noqa: SIM115
    if log_path is None:
        stack.callback(Path(log.name).unlink, missing_ok=True)
    stack.push(lambda kind, *_: _print_tail(log) if kind is not None else None)
    postgres = Postgres(bin_dir, scratch / "postgres")
    postgres.start()
    stack.callback(postgres.stop_if_running)
    redis = Redis(scratch / "redis")
    redis.start()
    stack.callback(redis.stop)
    sandbox = SandboxProcess(require_tls=True, demo="demo@tasklift.test")
    stack.callback(sandbox.stop)
    sandbox.wait_ready()
    database_create(postgres)
    (web_port,) = free_ports(1)
    env, metrics_token = deployment_env(
        scratch=scratch, postgres=postgres, redis=redis, sandbox=sandbox, web_port=web_port
    )
    return Servers(scratch, log, bin_dir, postgres, redis, sandbox, web_port, env, metrics_token)


def bench(args: argparse.Namespace, stack: contextlib.ExitStack) -> dict[str, Any]:
    started = time.perf_counter()
    servers = servers_start("production", args.log, stack)
    scratch, log, bin_dir, postgres, redis, sandbox = (
        servers.scratch,
        servers.log,
        servers.bin_dir,
        servers.postgres,
        servers.redis,
        servers.sandbox,
    )
    web_port, env, metrics_token = servers.web_port, servers.env, servers.metrics_token
    print(
        f"setup: PostgreSQL {bin_dir.parent.name} on port {postgres.port}, redis-server on port {redis.port} "
        f"(no persistence), sandbox at {sandbox.tls_url}, data in {scratch}",
        flush=True,
    )
    runbook_steps(env, log)
    deployment = Deployment(env, f"http://127.0.0.1:{web_port}", scratch / "supervise.json", metrics_token, log)
    deployment.start()
    stack.callback(deployment.stop)

    # This process reads and writes the same database as the deployment, in the same mode.
    os.environ.clear()
    os.environ.update(env, LOG_LEVEL="WARNING")  # the processes' logs go to the log, not this one's screen
    import django

    django.setup()
    from django.conf import settings
    from django.db import connections

    stack.callback(connections.close_all)
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.services import extraction_run_request
    from integrations.models import PushChannel
    from sandbox.client import SandboxClient
    from tasks.models import Task

    steps_s = time.perf_counter() - started
    web_s = wait_for(lambda: deployment.get("/healthz")[0] == 200, READY_TIMEOUT_S, "the web server's /healthz")
    readyz_exists = deployment.get("/readyz")[0] != 404  # until the /readyz of docs/deploy.md lands
    if readyz_exists:
        wait_for(lambda: deployment.get("/readyz")[0] == 200, READY_TIMEOUT_S, "/readyz 200 (every process up)")
    wait_for(lambda: len(deployment.workers()) == 2, 30, "two workers in the supervisor's status file")

    client = SandboxClient(sandbox.url, timeout=60)
    client.push_settings(retry_delays_ms=PUSH_RETRY_DELAYS_MS)
    client.pubsub_subscribe(  # as the operator sets up the push subscription in the GCP console
        settings.GMAIL_PUSH_TOPIC,
        f"{settings.PUSH_BASE_URL}/webhooks/gmail",
        settings.GMAIL_PUSH_SERVICE_ACCOUNT,
        audience=settings.GMAIL_PUSH_AUDIENCE,
    )
    users, mailboxes = people_connect(client, args.people)
    wait_for(lambda: PushChannel.objects.count() == len(mailboxes), 120, "every push channel (opened by a worker)")
    for user in users:  # the first read of each mailbox: Outlook's first delta link
        extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)
    unfinished = ExtractionRun.objects.exclude(status__in=ExtractionRun.FINISHED)
    wait_for(lambda: not unfinished.exists(), 120, "the first runs")
    first_run = ExtractionRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    client.clear_requests()
    client.clear_notifications()
    client.set_gemini_latency(args.llm_latency_ms)
    ready_s = time.perf_counter() - started
    print(
        f"up:    {len(users)} people with {len(mailboxes)} mailboxes, their push channels open; processes "
        f"{[p['label'] for p in deployment.processes()]}; servers and the runbook's steps in {steps_s:.1f} s, "
        f"the web server {web_s:.1f} s later, everything in {ready_s:.1f} s",
        flush=True,
    )

    # Delivery, and the faults during it ------------------------------------------------------------------------
    plan = mail_plan(mailboxes, args.emails, args.seed)
    deliverer = Deliverer(client, plan, args.deliver_seconds)
    probe = ReadyProbe(deployment, "/readyz" if readyz_exists else "/healthz")
    stack.callback(deliverer.stop.set)
    stack.callback(probe.stop.set)
    delivery_started = time.monotonic()
    deliverer.start()
    probe.start()
    faults: list[Fault] = []
    for n, name in enumerate(args.faults):  # spread over the first 70 % of the delivery, the rest after them
        at = delivery_started + args.deliver_seconds * 0.7 * (n + 1) / (len(args.faults) + 1)
        time.sleep(max(0.0, at - time.monotonic()))
        fault = fault_run(name, postgres=postgres, redis=redis, deployment=deployment, down_s=args.down_seconds)
        faults.append(fault)
        print(f"fault: {name} {fault.detail or 'down'} for {fault.ended - fault.started:.1f} s", flush=True)

    # Recovery: /readyz 200 again, and an email delivered after the last fault is read ---------------------------
    recovered_s = flowing_s = None
    last = max((f.ended for f in faults), default=None)
    if last is not None:
        ledger_rows = ProcessedEmail.objects.filter(integration__user__in=users)
        rows_then = db(ledger_rows.count)
        probe_mailbox, probe_raw, probe_asks = mail_plan([mailboxes[0]], 1, args.seed + 7777)[0]
        probe_id = deliver(client, probe_mailbox, probe_raw)
        with deliverer.lock:
            deliverer.delivered[probe_id] = Delivered(probe_mailbox, probe_asks, time.monotonic())
        probe_row = ProcessedEmail.objects.filter(message_id=probe_id)
        ready = "/readyz" if readyz_exists else "/healthz"
        conditions: dict[str, Callable[[], bool]] = {
            f"{ready} 200": lambda: deployment.get(ready)[0] == 200,
            "a new ledger row": lambda: db(ledger_rows.count) > rows_then,  # mail flows again, whichever
            "the email delivered after the last fault in the ledger": lambda: db(probe_row.exists),
        }
        met: dict[str, float] = {}
        deadline = time.monotonic() + args.drain_timeout
        while len(met) < len(conditions) and time.monotonic() < deadline:
            met.update({name: time.monotonic() for name, holds in conditions.items() if name not in met and holds()})
            time.sleep(0.25)
        ready_at, flowing_at, probe_at = (met.get(name) for name in conditions)
        if ready_at is not None and probe_at is not None:
            recovered_s = round(max(ready_at, probe_at) - last, 1)
        if flowing_at is not None:
            flowing_s = round(flowing_at - last, 1)
        for name in conditions.keys() - met.keys():
            print(f"NOT RECOVERED: {name}, not within {args.drain_timeout:.0f} s of the last fault", flush=True)
    deliverer.join(timeout=args.deliver_seconds + 120)
    if deliverer.error is not None:
        raise RuntimeError(f"delivering mail failed: {deliverer.error!r}")

    # Drain, then count ------------------------------------------------------------------------------------------
    delivered = dict(deliverer.delivered)
    ledger = ProcessedEmail.objects.filter(integration__user__in=users)

    def handled() -> set[str]:  # a new query each time (a queryset keeps what it read)
        return set(db(lambda: list(ledger.values_list("message_id", flat=True)))) & delivered.keys()

    drain_started = time.monotonic()
    drained = True
    try:
        wait_for(lambda: len(handled()) == len(delivered), args.drain_timeout, "every email in the ledger")
        active = ExtractionRun.objects.filter(status__in=(ExtractionRun.Status.RUNNING, ExtractionRun.Status.QUEUED))
        wait_for(lambda: not db(active.exists), 120, "no run queued or running")
    except RuntimeError as error:
        drained = False
        print(f"NOT DRAINED: {error}", flush=True)
    drain_s = time.monotonic() - drain_started
    probe.stop.set()

    in_ledger = handled()
    tasks_by_email = Counter(db(lambda: list(Task.objects.filter(user__in=users).values_list("source_id", flat=True))))
    short = {m for m, d in delivered.items() if tasks_by_email[m] < d.asks}
    lost = (delivered.keys() - in_ledger) | short
    duplicates = sum(max(0, tasks_by_email[m] - d.asks) for m, d in delivered.items())
    runs = ExtractionRun.objects.filter(pk__gt=first_run)
    by_status = Counter(db(lambda: list(runs.values_list("status", flat=True))))
    failed = runs.filter(status=ExtractionRun.Status.FAILED)
    failed_codes = Counter(db(lambda: list(failed.values_list("error_code", flat=True))))
    for message_id in sorted(lost, key=lambda m: delivered[m].at)[:10]:
        d = delivered[message_id]
        print(
            f"lost:  {d.mailbox.provider} {d.mailbox.address} {message_id}, delivered at "
            f"+{d.at - delivery_started:.1f} s, {tasks_by_email[message_id]} of {d.asks} tasks, "
            f"{'in' if message_id in in_ledger else 'not in'} the ledger",
            flush=True,
        )
    stuck = db(
        ExtractionRun.objects.filter(status__in=(ExtractionRun.Status.RUNNING, ExtractionRun.Status.QUEUED)).count
    )
    notifications = client.notifications()
    answers = Counter(n["status"] for n in notifications if not n.get("dropped"))
    gemini_calls = sum(1 for r in client.requests("gemini") if r["method"] == "POST")
    metrics_status, metrics_text = deployment.get("/metrics", Authorization=f"Bearer {metrics_token}")
    metrics_unauthenticated, _ = deployment.get("/metrics")
    down_windows = {f.name: (f.started, f.ended) for f in faults if f.name in ("postgres", "redis")}
    readyz_503 = {
        name: (503 in probe.between(*window)) if readyz_exists else None for name, window in down_windows.items()
    }
    figures: dict[str, Any] = {
        "benchmark": "production",
        "version": git_version(),
        "people": args.people,
        "emails_per_mailbox": args.emails,
        "faults": [f.name for f in faults],
        "emails": len(delivered),
        "expected_tasks": sum(d.asks for d in delivered.values()),
        "tasks": sum(tasks_by_email[m] for m in delivered),
        "lost": len(lost),
        "lost_not_in_ledger": len(delivered.keys() - in_ledger),
        "duplicates": duplicates,
        "stuck_runs": stuck,
        "runs": sum(by_status.values()),
        "runs_by_status": dict(by_status),
        "failed_runs_by_code": dict(failed_codes),
        "hand_restarts": 0,  # this benchmark starts no process of the app again: the supervisor must
        "supervisor_restarts": deployment.restarts(),
        "recovered_s": recovered_s,
        "web_recovered_s": next((round(f.ended - f.started, 1) for f in faults if f.name == "web"), None),
        "flowing_s": flowing_s,
        "readyz_503_while_down": (all(readyz_503.values()) if readyz_exists else None) if readyz_503 else None,
        "readyz_503_by_fault": readyz_503,
        "webhook_500s": sum(
            n for status, n in answers.items() if status is not None and status >= 500 and status != 503
        ),
        "webhook_503s": answers.get(503, 0),
        "webhook_unanswered": answers.get(None, 0),
        "push_deliveries": sum(answers.values()),
        "webhook_statuses": {str(k): v for k, v in sorted(answers.items(), key=lambda kv: str(kv[0]))},
        "metrics_scraped": (metrics_status == 200 and "tasklift_" in metrics_text) if metrics_status != 404 else None,
        "metrics_unauthenticated_status": metrics_unauthenticated,
        "gemini_calls": gemini_calls,
        "drained": drained,
        "setup_s": round(ready_s, 1),
        "delivery_s": round(args.deliver_seconds, 1),
        "drain_s": round(drain_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    checks = {
        "lost == 0": figures["lost"] == 0,
        "duplicates == 0": figures["duplicates"] == 0,
        "stuck_runs == 0": figures["stuck_runs"] == 0,
        "every email handled before the drain timeout": drained,
        "hand_restarts == 0": figures["hand_restarts"] == 0,
        "recovered after the last fault (recovered_s)": recovered_s is not None or not faults,
        f"web_recovered_s <= {WEB_RECOVERED_MAX_S:g}": "web" not in figures["faults"]
        or figures["web_recovered_s"] <= WEB_RECOVERED_MAX_S,
        "readyz_503_while_down": figures["readyz_503_while_down"] is True or not down_windows,
        "webhook_500s == 0": figures["webhook_500s"] == 0,
        "metrics_scraped": figures["metrics_scraped"] is True,
    }
    figures["checks_failed"] = [name for name, ok in checks.items() if not ok]
    return figures


def _print_tail(log: IO[bytes]) -> None:
    """The last of every process's output, when the benchmark fails."""
    log.flush()
    log.seek(0)
    print(log.read().decode(errors="replace")[-6000:], file=sys.stderr)


def report(f: dict[str, Any]) -> None:
    print(
        f"mail:  {f['emails']} emails ({f['people']} people x 2 mailboxes x {f['emails_per_mailbox']}, and the one "
        f"after the faults); {f['tasks']} tasks of {f['expected_tasks']} asked; {f['lost']} lost, "
        f"{f['duplicates']} duplicates; {f['runs']} runs {f['runs_by_status']}, {f['stuck_runs']} stuck"
    )
    print(
        f"faults: {', '.join(f['faults']) or 'none'}; recovered in {f['recovered_s']} s (mail flowing again after "
        f"{f['flowing_s']} s); /readyz 503 while down: "
        f"{f['readyz_503_by_fault']}; restarts by the supervisor {f['supervisor_restarts']}, "
        f"by hand {f['hand_restarts']}"
    )
    print(
        f"push:  {f['push_deliveries']} deliveries answered {f['webhook_statuses']}: {f['webhook_500s']} 5xx other "
        f"than 503; /metrics scraped: {f['metrics_scraped']} (without the token: {f['metrics_unauthenticated_status']})"
    )
    print(f"time:  set up in {f['setup_s']} s, {f['delivery_s']} s of delivery, drained in {f['drain_s']} s, "
          f"{f['wall_s']} s in all; {f['gemini_calls']} Gemini calls")  # fmt: skip
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


@contextlib.contextmanager
def _stopped_on_signal() -> Iterator[None]:
    """SIGTERM (a test's timeout, a Ctrl-C'd make) unwinds like an error: everything started is stopped."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def deployment_main(
    banner: str,
    args: argparse.Namespace,
    bench: Callable[[argparse.Namespace, contextlib.ExitStack], dict[str, Any]],
    report: Callable[[dict[str, Any]], None],
) -> int:
    """A benchmark of a deployment: its banner, its run (everything it started stopped at the end, on a signal
    too), its report, its figures as the last line; exit status 1 when a check failed."""
    print(banner, flush=True)
    with _stopped_on_signal(), contextlib.ExitStack() as stack:
        figures = bench(args, stack)
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


def main() -> int:
    args = parse_args()
    banner = (
        f"benchmark production: {args.people} people x Gmail and Outlook x {args.emails} emails by push over "
        f"{args.deliver_seconds:g} s; faults: {', '.join(args.faults) or 'none'} ({args.down_seconds:g} s down)"
    )
    return deployment_main(banner, args, bench, report)


if __name__ == "__main__":
    sys.exit(main())
