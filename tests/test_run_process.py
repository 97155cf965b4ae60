"""`make run` as a person uses it: started as a real process group, stopped with Ctrl-C, SIGTERM, or killed
outright, started again, and `make stop` leaving nothing of that checkout running.

Each start runs `python -m config.run` with its own TASKLIFT_LOCAL_DIR (its own embedded PostgreSQL and
Redis) and free ports for the web server and both sandbox listeners, so it never meets a developer's
`make run` or another test run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from config.ports import free_port

pytestmark = pytest.mark.slow  # `make run` and its processes (tests/slow.py)

ROOT = Path(__file__).resolve().parent.parent
# Set by config/settings_test.py for this test run; a `make run` of its own must not inherit them.
TEST_ONLY = (
    "DATABASE_URL",
    "REDIS_URL",
    "REDIS_DB",
    "CACHE_KEY_PREFIX",
    "CELERY_QUEUE",
    "TEST_DATABASE_NAME",
    "MICROSOFT_CA_BUNDLE",
    "GEMINI_RETRY_INITIAL_DELAY_S",
    "INBOUND_DNS_SERVER",
    "INBOUND_WEBHOOK_SECRET",
)


def checkout_env(local_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        TASKLIFT_LOCAL_DIR=str(local_dir),
        PORT=str(free_port()),
        SANDBOX_URL=f"http://127.0.0.1:{free_port()}",
        SANDBOX_TLS_URL=f"https://127.0.0.1:{free_port()}",
        DEMO_IMAP_PORT=str(free_port()),  # not 8993, which a `make run` of another test may hold
        INBOUND_SMTP_PORT=str(free_port()),  # nor 2525
        PYTHONUNBUFFERED="1",
    )
    return env


def start(env: dict[str, str], output: Path) -> subprocess.Popen[bytes]:
    with output.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "config.run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, as a terminal gives `make run`
        )  # fmt: skip


def healthy(env: dict[str, str], process: subprocess.Popen[bytes], output: Path, timeout: float = 150) -> None:
    url = f"http://127.0.0.1:{env['PORT']}/healthz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, output.read_text(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"not healthy in {timeout} s:\n{output.read_text(errors='replace')[-3000:]}")


def processes_of(local_dir: Path) -> list[str]:
    """Every process started for this checkout: they all carry its TASKLIFT_LOCAL_DIR, or name it."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            mine = process.environ().get("TASKLIFT_LOCAL_DIR") == str(local_dir)
            named = str(local_dir) in " ".join(process.info["cmdline"] or [])
        except psutil.Error:
            continue
        if (mine or named) and process.pid != os.getpid():
            found.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])}")
    return found


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    local_dir = tmp_path / "local"
    env = checkout_env(local_dir)
    yield env, tmp_path / "run.out"
    subprocess.run([sys.executable, "-m", "config.embedded", "stop"], cwd=ROOT, env=env, capture_output=True)


def test_make_run_stops_on_every_signal_starts_again_and_make_stop_leaves_nothing(
    checkout: tuple[dict[str, str], Path],
) -> None:
    env, output = checkout
    local_dir = Path(env["TASKLIFT_LOCAL_DIR"])

    for stop_with in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        run = start(env, output)
        healthy(env, run, output)
        if stop_with == signal.SIGKILL:
            run.kill()  # the parent alone, killed outright: the next start must recover by itself
        else:
            os.killpg(run.pid, stop_with)  # what Ctrl-C (or a terminal closing) sends the whole group
        run.wait(timeout=60)
        assert "Traceback" not in output.read_text(errors="replace")

    run = start(env, output)
    healthy(env, run, output)
    deadline = time.monotonic() + 10
    while "Ctrl-C stops every process" not in output.read_text().rsplit("Starting Tasklift", 1)[1]:
        assert time.monotonic() < deadline, output.read_text()[-2000:]
        time.sleep(0.2)
    last = output.read_text().rstrip().splitlines()[-1]
    assert last.strip() == "Ctrl-C stops every process."  # where to go is the last thing on the screen
    # The forward-to door runs with the rest: the demo person's address takes an email their server forwards,
    # once they agreed to AI reading.
    grant = "from accounts.services import consent_grant as g; from accounts.models import User as U; "
    grant += "g(user=U.objects.get(email='demo@tasklift.test'))"
    subprocess.run([sys.executable, "manage.py", "shell", "-c", grant], cwd=ROOT, env=env, check=True, timeout=120)
    sent = subprocess.run(
        [sys.executable, "-m", "sandbox.forward_send", "--port", env["INBOUND_SMTP_PORT"]],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert sent.returncode == 0 and "taken (250)" in sent.stdout, sent.stdout + sent.stderr[-2000:]
    os.killpg(run.pid, signal.SIGINT)
    run.wait(timeout=60)

    stopped = subprocess.run(
        [sys.executable, "-m", "config.embedded", "stop"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert stopped.returncode == 0, stopped.stderr
    assert "embedded PostgreSQL stopped" in stopped.stdout
    deadline = time.monotonic() + 15
    while processes_of(local_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(local_dir) == []

    cleaned = subprocess.run(
        [sys.executable, "-m", "config.embedded", "clean"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert cleaned.returncode == 0, cleaned.stderr
    assert not local_dir.exists()


def test_make_clean_stops_the_servers_before_it_deletes_their_data(checkout: tuple[dict[str, str], Path]) -> None:
    env, _ = checkout
    local_dir = Path(env["TASKLIFT_LOCAL_DIR"])
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env, capture_output=True, text=True
    )  # starts the embedded PostgreSQL and Redis of this checkout
    assert started.returncode == 0, started.stderr

    cleaned = subprocess.run(
        [sys.executable, "-m", "config.embedded", "clean"], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert cleaned.returncode == 0, cleaned.stderr
    assert processes_of(local_dir) == []
    assert not local_dir.exists()


def test_make_run_starts_a_killed_worker_again_and_keeps_the_rest_running(
    checkout: tuple[dict[str, str], Path],
) -> None:
    env, output = checkout
    local_dir = Path(env["TASKLIFT_LOCAL_DIR"])
    run = start(env, output)
    try:
        healthy(env, run, output)
        log = local_dir / "logs" / "worker.log"
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        listed = json.loads((local_dir / "run.pids").read_text())
        web, killed = listed["web"], listed["worker"]

        os.killpg(killed, signal.SIGKILL)  # the worker with its pool, as the kernel's OOM killer or an operator

        deadline = time.monotonic() + 60
        while json.loads((local_dir / "run.pids").read_text())["worker"] == killed:
            assert run.poll() is None, output.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, output.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        worker = json.loads((local_dir / "run.pids").read_text())["worker"]
        while log.read_text(errors="replace").count(" ready.") < 2:  # the new worker takes jobs
            assert time.monotonic() < deadline + 60, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        assert psutil.pid_exists(worker) and not psutil.pid_exists(killed)
        if os.geteuid() == 0:  # Celery's warning to root, expected on a development machine, is not logged
            assert "SecurityWarning" not in log.read_text(errors="replace")
        assert "The worker exited with code -9; starting it again in 1 s." in output.read_text()
        assert json.loads((local_dir / "run.pids").read_text())["web"] == web  # nothing else was touched
        healthy(env, run, output, timeout=10)
    finally:
        os.killpg(run.pid, signal.SIGINT)
        run.wait(timeout=60)
    assert run.returncode == 0
