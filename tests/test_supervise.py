"""`python -m config.supervise`: the Procfile's processes kept running, as an operator or a benchmark runs them.

The processes here are small Python programs standing in for gunicorn and Celery (what they run is not the
point: that any of them comes back, and how they stop), each saying what it was given and when it is told to
stop. tests/test_run_process.py and tests/test_broker_restart.py run the real ones.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.processes import ROOT

pytestmark = pytest.mark.slow  # the supervisor and its processes (tests/slow.py)

PROGRAM = """
import os, signal, sys, time

name = sys.argv[1]
if name == "crasher":
    sys.exit(3)

def stop(signum, frame):
    print(name, "stopping", flush=True)
    time.sleep(0.3)  # a worker finishing its job: the next group is told only once this one is gone
    print(name, "stopped", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)
print(name, "up", os.environ.get("WEB_CONCURRENCY"), os.environ.get("CELERY_WORKER_HOSTNAME"), flush=True)
while True:
    time.sleep(0.1)
"""


class Supervised:
    """`python -m config.supervise` on a Procfile of stand-ins, with its output collected as it comes."""

    def __init__(self, folder: Path, procfile: str, *args: str) -> None:
        (folder / "program.py").write_text(PROGRAM)
        (folder / "Procfile").write_text(procfile)
        self.status_file = folder / "status.json"
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.supervise", "--procfile", str(folder / "Procfile"),
             "--status-file", str(self.status_file), *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PATH": "/usr/bin:/bin"},  # `python` must come from the virtualenv
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def output(self) -> list[str]:
        return [line for _, line in self.lines]

    def status(self) -> dict[str, dict[str, object]]:
        try:
            return dict(json.loads(self.status_file.read_text())["processes"])
        except (OSError, ValueError):
            return {}

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"{what} within {timeout} s:\n" + "\n".join(self.output())
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Callable[..., Supervised]]:
    started: list[Supervised] = []

    def start(procfile: str, *args: str) -> Supervised:
        started.append(Supervised(tmp_path, procfile, *args))
        return started[-1]

    yield start
    for supervised in started:
        supervised.stop()


PROCFILE = """# the stand-ins, in the real Procfile's order
web: python program.py web
worker: python program.py worker

beat: python program.py beat
"""


def alive(pid: object) -> bool:
    return isinstance(pid, int) and psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_a_killed_worker_comes_back_and_a_stop_goes_beat_worker_web(supervise: Callable[..., Supervised]) -> None:
    run = supervise(PROCFILE, "web=2", "worker=2", "beat=1")
    run.wait_for(lambda: len(run.status()) == 4 and all(p["running"] for p in run.status().values()), "all up")
    run.wait_for(lambda: sum(" up " in line for line in run.output()) == 4, "each says it is up")
    assert sorted(run.status()) == ["beat.1", "web.1", "worker.1", "worker.2"]  # web=2: one gunicorn, 2 processes
    assert "web.1 | web up 2 None" in run.output()
    assert "worker.2 | worker up None worker.2@%h" in run.output()  # two workers, two Celery node names

    killed = run.status()["worker.1"]["pid"]
    assert isinstance(killed, int)
    os.killpg(killed, signal.SIGKILL)  # what the benchmark does: the worker with its whole group
    run.wait_for(
        lambda: run.status()["worker.1"] == {**run.status()["worker.1"], "restarts": 1, "running": True}, "back"
    )
    assert "restarted worker.1 (exit -9)" in run.output()
    assert run.status()["worker.1"]["pid"] != killed
    assert run.status()["worker.2"]["restarts"] == 0

    pids = [p["pid"] for p in run.status().values()]
    run.process.send_signal(signal.SIGTERM)
    assert run.process.wait(timeout=30) == 0
    told = [line.split(" | ", 1)[1] for line in run.output() if line.endswith(" stopping")]
    # Each group is told once the one before has gone (0.3 s after it was told): beat, both workers, web.
    assert told == ["beat stopping", "worker stopping", "worker stopping", "web stopping"]
    assert sum(line.endswith(" stopped") for line in run.output()) == 4  # each had the time to finish
    assert not any(alive(pid) for pid in pids)


def test_a_process_that_keeps_dying_is_restarted_ever_more_slowly(supervise: Callable[..., Supervised]) -> None:
    run = supervise("worker: python program.py worker\ncrasher: python program.py crasher\n")
    run.wait_for(lambda: run.output().count("restarted crasher.1 (exit 3)") >= 3, "three restarts", timeout=40)
    restarts = [at for at, line in run.lines if line == "restarted crasher.1 (exit 3)"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(restarts)]
    assert 1.5 < gaps[0] < 3.5 and 3.5 < gaps[1] < 6.5  # 1 s, then 2 s, then 4 s: doubling, up to 30 s
    assert run.status()["worker.1"]["restarts"] == 0

    worker = run.status()["worker.1"]["pid"]
    run.process.kill()  # the supervisor killed outright: the kernel tells its processes
    run.process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def test_a_procfile_line_that_is_not_name_colon_command_is_refused(tmp_path: Path) -> None:
    from config.supervise import procfile_read

    (tmp_path / "Procfile").write_text("web: gunicorn config.wsgi\nworker celery -A config worker\n")

    with pytest.raises(ValueError, match=r"Procfile:2: expected `name: command`"):
        procfile_read(tmp_path / "Procfile")
    assert procfile_read(ROOT / "Procfile") == {
        "web": "gunicorn config.wsgi --config gunicorn.conf.py",
        "worker": "celery -A config worker --loglevel INFO",
        "beat": "celery -A config beat --loglevel INFO",
    }


@pytest.mark.django_db(transaction=True)
def test_the_procfiles_web_and_worker_run_and_a_killed_worker_comes_back(tmp_path: Path) -> None:
    """The real Procfile (gunicorn, a Celery worker) on the test database: what `sh -c`, the virtualenv's PATH
    and gunicorn.conf.py make of it. Beat is left out (`beat=0`): its schedule file is a `make run`'s."""
    import urllib.request

    from tests.processes import process_env
    from tests.test_run_process import free_port

    port = free_port()
    env = process_env(PORT=str(port), WEB_CONCURRENCY="3", PATH="/usr/bin:/bin")
    supervise = subprocess.Popen(
        [sys.executable, "-m", "config.supervise", "web=1", "worker=1", "beat=0",
         "--status-file", str(tmp_path / "status.json"), "--log-dir", str(tmp_path / "logs")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker_log = tmp_path / "logs" / "worker.1.log"

    def status() -> dict[str, dict[str, object]]:
        try:
            return dict(json.loads((tmp_path / "status.json").read_text())["processes"])
        except (OSError, ValueError):
            return {}

    def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert supervise.poll() is None, f"the supervisor exited: {supervise.communicate()[0]}"
            assert time.monotonic() < deadline, f"{what}:\n{worker_log.read_text(errors='replace')[-3000:]}"
            time.sleep(0.5)

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        wait_for(healthy, "gunicorn did not answer")
        wait_for(lambda: worker_log.exists() and " ready." in worker_log.read_text(errors="replace"), "no worker")
        assert sorted(status()) == ["web.1", "worker.1"]
        web = psutil.Process(int(str(status()["web.1"]["pid"])))
        assert len(web.children()) == 1  # web=1: one gunicorn process, whatever WEB_CONCURRENCY said
        assert "worker.1@" in worker_log.read_text(errors="replace")  # the Celery node's name

        killed = int(str(status()["worker.1"]["pid"]))
        os.killpg(killed, signal.SIGKILL)
        wait_for(lambda: worker_log.read_text(errors="replace").count(" ready.") == 2, "the worker did not come back")
        assert status()["worker.1"]["restarts"] == 1 and not psutil.pid_exists(killed)
        assert healthy()
    finally:
        supervise.send_signal(signal.SIGTERM)
        output = supervise.communicate(timeout=90)[0]
    assert supervise.returncode == 0, output
    assert "restarted worker.1 (exit -9)" in output
    assert output.index("stopping worker") < output.index("stopping web")
