"""`/readyz` and the one beat, with real `celery -A config worker` and `celery -A config beat` processes on
this test run's database, Redis and queue, killed as the kernel would (SIGKILL to the process group)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from pytest_django import Settings

from config.ports import free_port
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request
from sandbox.client import SandboxClient
from tests.conftest import GmailBox
from tests.mail import ask
from tests.processes import ROOT, process_env
from tests.waiting import wait_for

pytestmark = pytest.mark.slow  # web, worker and beat processes (tests/slow.py)

SCAN_JOB = "extraction.jobs.extraction_schedule_job"


class Celery:
    """Celery processes started as the Procfile starts them (plus test settings), each in a process group of
    its own with its output in a file; whatever is still running at the end is killed."""

    def __init__(self, folder: Path, **env: str) -> None:
        self.folder = folder
        self.env = env
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, kind: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", kind, "--loglevel", "INFO", *args],
                cwd=ROOT, env=process_env(PYTHONUNBUFFERED="1", **self.env), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def wait_for_log(self, name: str, text: str, timeout: float = 90) -> float:
        """Wait until `text` is in the log of `name`; returns the time it was seen (time.monotonic)."""
        wait_for(
            lambda: text in self.log(name), timeout=timeout, what=f"{text!r} in the log of {name}", interval=0.2,
            detail=lambda: self.log(name)[-4000:],
        )  # fmt: skip
        return time.monotonic()

    @staticmethod
    def kill(process: subprocess.Popen[bytes]) -> None:
        """kill -9 of the whole group: a worker's main process and its pool's children, with no cleanup."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                self.kill(process)


@pytest.fixture
def celery_processes(tmp_path: Path) -> Iterator[Callable[..., Celery]]:
    made: list[Celery] = []

    def make(**env: str) -> Celery:
        made.append(Celery(tmp_path, **env))
        return made[-1]

    yield make
    for celery in made:
        celery.close()


def readyz(client: Client) -> tuple[int, dict[str, Any]]:
    response = client.get("/readyz")
    return response.status_code, response.json()


def wait_for_readyz(client: Client, until: Callable[[int, dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
    last: list[tuple[int, dict[str, Any]]] = []

    def arrived() -> bool:
        last[:] = [readyz(client)]
        return until(*last[0])

    wait_for(arrived, timeout=timeout, interval=0.25, what="/readyz to get there", detail=lambda: f"last: {last}")
    return last[0][1]


def scans_queued() -> int:
    """Scan jobs waiting in this test run's queue (nothing consumes it in the beat test)."""
    connection = redis.Redis.from_url(settings.REDIS_URL)
    messages = connection.lrange(settings.CELERY_TASK_DEFAULT_QUEUE, 0, -1)
    return sum(json.loads(message)["headers"]["task"] == SCAN_JOB for message in messages)


@pytest.mark.django_db(transaction=True)
def test_readyz_names_the_worker_until_one_runs_keeps_it_through_a_long_run_and_names_it_once_killed(
    client: Client,
    settings: Settings,
    celery_processes: Callable[..., Celery],
    sandbox: SandboxClient,
    gmail: GmailBox,
) -> None:
    """An operator's load balancer sends no traffic to a deployment whose mail would never be read: with no
    worker alive `/readyz` is 503 and says so; a worker busy with a run far longer than READYZ_WORKER_SECONDS
    (its only pool process taken) still counts as alive; SIGKILLed, it stops counting within the window."""
    window = 3
    settings.READYZ_WORKER_SECONDS = window
    celery = celery_processes(READYZ_WORKER_SECONDS=str(window), BEAT_LOCK_SECONDS="3", READYZ_BEAT_SECONDS="3")
    celery.start("beat", "beat", "--schedule", str(celery.folder / "beat-schedule"))

    wait_for_readyz(client, lambda status, body: body["checks"]["beat"].startswith("ok"), timeout=90)
    status, body = readyz(client)
    assert status == 503
    assert body["status"] == "error"
    assert body["checks"]["worker"].startswith("error: no worker has written its heartbeat in the last 3 s")
    assert [name for name, value in body["checks"].items() if not value.startswith("ok")] == ["worker"]

    worker = celery.start("worker", "worker", "--concurrency", "1")
    body = wait_for_readyz(client, lambda status, body: status == 200, timeout=120)
    assert body == {
        "status": "ok",
        "version": body["version"],  # the release's (tests/test_production.py reads it against pyproject.toml)
        "checks": {
            "database": "ok",
            "redis": "ok",
            "static": "ok (finders)",
            "worker": "ok (1 seen in the last 3 s)",
            "beat": body["checks"]["beat"],
        },
    }

    # A run that holds the worker's only pool process for several windows: Gemini answers after 4 windows.
    sandbox.set_gemini_latency(4 * window * 1000)
    gmail.deliver(ask(1))
    run, _ = extraction_run_request(user=gmail.integration.user, trigger=ExtractionRun.Trigger.MANUAL)
    deadline = time.monotonic() + 90
    while ExtractionRun.objects.get(pk=run.pk).status == ExtractionRun.Status.QUEUED:
        assert time.monotonic() < deadline, "the worker never started the run"
        time.sleep(0.2)
    started = time.monotonic()
    answers = []
    while ExtractionRun.objects.get(pk=run.pk).status == ExtractionRun.Status.RUNNING:
        assert time.monotonic() - started < 90, "the run never ended"
        answers.append(readyz(client)[0])
        time.sleep(0.25)
    assert time.monotonic() - started > 3 * window  # the worker was busy for several windows...
    assert set(answers) == {200}  # ...and counted as alive throughout
    assert ExtractionRun.objects.get(pk=run.pk).status == ExtractionRun.Status.SUCCEEDED

    celery.kill(worker)
    killed = time.monotonic()
    body = wait_for_readyz(client, lambda status, body: status == 503, timeout=30)
    assert time.monotonic() - killed <= window + 2
    assert body["checks"]["worker"].startswith("error: no worker has written its heartbeat")


def test_a_second_beat_sends_nothing_while_the_first_runs_and_takes_over_when_it_is_killed(
    celery_processes: Callable[..., Celery],
) -> None:
    """Two beats started by mistake (or one per host, for failover) send the schedule once, not twice; when
    the one sending dies outright (kill -9: it frees nothing), the other takes over within a lock's expiry."""
    lock_seconds = 3
    celery = celery_processes(BEAT_LOCK_SECONDS=str(lock_seconds), READYZ_BEAT_SECONDS="3", EXTRACTION_SCAN_SECONDS="1")
    first = celery.start("first", "beat", "--schedule", str(celery.folder / "first-schedule"))
    celery.wait_for_log("first", f"Sending due task extraction-schedule ({SCAN_JOB})")
    celery.start("second", "beat", "--schedule", str(celery.folder / "second-schedule"))
    celery.wait_for_log("second", "is waiting for the lock held by beat")  # its first tick

    before = scans_queued()
    time.sleep(6)  # a count over a span of time: what one beat sends in it, and not two
    sent = scans_queued() - before
    assert 3 <= sent <= 8  # one beat's scans (one a second), not two beats' (about 12)
    assert "Sending due task" not in celery.log("second")
    assert "holds the lock: this beat sends the schedule" in celery.log("first")
    assert "is waiting for the lock held by beat" in celery.log("second")  # what its operator reads

    celery.kill(first)
    killed = time.monotonic()
    took_over = celery.wait_for_log("second", "took over the lock: this beat sends the schedule", timeout=60)
    assert took_over - killed <= lock_seconds * 4 / 3 + 2  # the lock's expiry, then the next try
    celery.wait_for_log("second", f"Sending due task extraction-schedule ({SCAN_JOB})", timeout=10)
    after = scans_queued()
    wait_for(lambda: scans_queued() > after, timeout=10, what="a scan sent by the second beat")

    # Redis restarted without persistence: the lock is gone. The beat finds its token gone, and takes the lock
    # again (no other beat is waiting); the scan goes on.
    lock = f"{settings.CACHES['default']['KEY_PREFIX']}:readiness:beat-lock"
    assert redis.Redis.from_url(settings.REDIS_URL).delete(lock) == 1
    celery.wait_for_log("second", "lost its lock (Redis restarted", timeout=10)
    after = scans_queued()
    wait_for(lambda: scans_queued() > after, timeout=10, what="a scan sent once the lock is taken again")
    assert celery.log("second").count("holds the lock: this beat sends the schedule") == 1


def closed_port() -> int:
    return free_port()  # nothing listens there


def readyz_in_a_process(**env: str) -> tuple[int, dict[str, Any], float]:
    """/readyz as a web process started with `env` answers it, and how long it took (seconds)."""
    script = (
        "import django, json, time; django.setup();"
        "from django.test import Client; start = time.monotonic();"
        "response = Client().get('/readyz');"
        "print(json.dumps([response.status_code, response.json(), time.monotonic() - start]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=process_env(**env),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    status, body, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return status, body, seconds


def test_readyz_names_the_database_when_it_is_unreachable_and_shows_no_secret() -> None:
    """A web process whose DATABASE_URL points at a closed port answers /readyz at once with a 503 that
    names the database, and nothing of the URL (its password above all)."""
    port = closed_port()
    status, body, seconds = readyz_in_a_process(
        DATABASE_URL=f"postgresql://tasklift:hunter2-not-shown@127.0.0.1:{port}/tasklift"
    )
    assert status == 503
    assert body["status"] == "error"
    assert body["checks"]["database"] == (
        "error: the database did not answer (OperationalError); check DATABASE_URL and PostgreSQL"
    )
    assert body["checks"]["redis"] == "ok"
    assert seconds < 5
    shown = json.dumps(body)
    assert "hunter2" not in shown and str(port) not in shown and "tasklift:" not in shown


def test_readyz_names_redis_and_what_it_cannot_tell_when_redis_is_unreachable() -> None:
    """Redis down (restarting): /readyz says so at once, and that it cannot tell whether a worker or beat is
    alive (their heartbeats are in Redis), rather than calling them dead."""
    port = closed_port()
    status, body, seconds = readyz_in_a_process(REDIS_URL=f"redis://:hunter2-not-shown@127.0.0.1:{port}/0")
    assert status == 503
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"] == (
        "error: Redis did not answer (ConnectionError); check REDIS_URL and the Redis server"
    )
    assert body["checks"]["worker"].startswith("error: cannot tell: the workers' heartbeats are kept in Redis")
    assert body["checks"]["beat"].startswith("error: cannot tell: beat's last tick is kept in Redis")
    assert seconds < 5
    assert "hunter2" not in json.dumps(body)


PRODUCTION_PAGES = """
import django, json, subprocess, sys; django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
client = Client(raise_request_exception=False, HTTP_X_FORWARDED_PROTO="https")
try:
    page = client.get("/login/").status_code
except ValueError:  # the missing manifest entry; raised again by the 500 page, which links the stylesheet too
    page = 500
answers = [page, client.get("/readyz").json()["checks"]["static"]]
if sys.argv[1] == "collect":
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    answers.append(client.get("/readyz").json()["checks"]["static"])
else:  # a probe from inside asks over plain http; a person's browser is sent to https
    plain = Client(raise_request_exception=False)
    answers += [plain.get("/readyz").status_code, plain.get("/login/").status_code]
print(json.dumps(answers))
"""


def test_readyz_names_the_static_manifest_in_production_until_collectstatic_and_a_restart(tmp_path: Path) -> None:
    """The outage of issue 19: in production without collectstatic every page is a 500 while /healthz says
    200. /readyz names the static files and what to do: collectstatic, then restart the processes that
    started before it (their storage read the manifest once, at their first page). A probe asking over plain
    http gets that answer, not the redirect to https that pages get."""
    from tests.test_settings import _production

    base = process_env(
        DJANGO_SETTINGS_MODULE="config.settings",  # not the test settings, which turn the real services off
        TASKLIFT_LOCAL_DIR=str(tmp_path),  # STATIC_ROOT is under it: empty
        ALLOWED_HOSTS="testserver",
    )
    # Production's settings with this run's Redis and its test database (process_env's).
    environment = {**base, **_production(), "DATABASE_URL": base["DATABASE_URL"]}
    environment.pop("OAUTHLIB_INSECURE_TRANSPORT", None)

    def pages(step: str) -> list[Any]:
        result = subprocess.run(
            [sys.executable, "-c", PRODUCTION_PAGES, step], cwd=ROOT, env=environment,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        return list(json.loads(result.stdout.strip().splitlines()[-1]))

    before, static_before, static_after_collect = pages("collect")
    assert before == 500
    assert static_before == (
        "error: no static manifest (STATIC_ROOT/staticfiles.json): run `manage.py collectstatic --noinput`"
    )
    assert static_after_collect == (
        "error: this web process started before collectstatic wrote the manifest: restart it"
    )
    restarted, static_restarted, probe_over_http, page_over_http = pages("serve")
    assert restarted == 200
    assert static_restarted == "ok (manifest)"
    assert probe_over_http == 503  # the answer itself (no worker runs here), not a redirect that looks like "up"
    assert page_over_http == 301


@pytest.mark.django_db
def test_readyz_is_a_few_round_trips_and_never_cached(
    client: Client, django_assert_max_num_queries: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load balancer asks every few seconds, from every web process: one database query and three Redis
    round trips (ping, the workers' heartbeats, beat's tick), and no cache between it and the truth."""
    import redis.connection

    client.get("/readyz")  # the connections made, as in a process that has served before
    sends: list[bytes] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: redis.connection.AbstractConnection, command: Any, check_health: bool = True) -> None:
        sends.append(command if isinstance(command, bytes) else b"".join(bytes(part) for part in command))
        send(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    with django_assert_max_num_queries(1):
        response = client.get("/readyz")
    assert response.status_code == 503  # no worker, no beat in this test
    assert len(sends) <= 3
    assert "no-store" in response["Cache-Control"]
