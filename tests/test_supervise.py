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
print(name, "settings", os.environ.get("TASKLIFT_ENCRYPTION_KEYS"), os.environ.get("OLD_SETTING"), flush=True)
while True:
    time.sleep(0.1)
"""


class Supervised:
    """`python -m config.supervise` on a Procfile of stand-ins, with its output collected as it comes."""

    def __init__(self, folder: Path, procfile: str, *args: str, env: dict[str, str] | None = None) -> None:
        (folder / "program.py").write_text(PROGRAM)
        (folder / "Procfile").write_text(procfile)
        self.status_file = folder / "status.json"
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.supervise", "--procfile", str(folder / "Procfile"),
             "--status-file", str(self.status_file), *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {}), "PATH": "/usr/bin:/bin"},  # `python` must come from the virtualenv
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def output(self) -> list[str]:
        if self.process.poll() is not None:
            self.reader.join(timeout=10)  # the supervisor ended: its last lines, read to the pipe's end
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

    def start(procfile: str, *args: str, env: dict[str, str] | None = None) -> Supervised:
        started.append(Supervised(tmp_path, procfile, *args, env=env))
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


def test_supervise_reads_the_settings_file_again_for_each_process_and_sighup_restarts_them_one_by_one(
    supervise: Callable[..., Supervised], tmp_path: Path
) -> None:
    """Issue 35: deploy/env.sh read the settings file once, when the supervisor started; after a key was added to
    TASKLIFT_ENCRYPTION_KEYS a restarted worker still had one key. With `--env-file`, each process started reads
    the file as it is then (a key taken out is gone too); SIGHUP restarts each in turn, the supervisor staying."""
    settings_file = tmp_path / "tasklift.env"
    settings_file.write_text("# the runbook's file\nTASKLIFT_ENCRYPTION_KEYS=old-key\nOLD_SETTING='kept for now'\n")
    # As deploy/env.sh starts it: the file's variables already in the supervisor's environment.
    run = supervise(
        PROCFILE, "beat=0", "--env-file", str(settings_file),
        env={"TASKLIFT_ENCRYPTION_KEYS": "old-key", "OLD_SETTING": "kept for now"},
    )  # fmt: skip
    run.wait_for(lambda: run.output().count("worker.1 | worker settings old-key kept for now") == 1, "worker up")
    run.wait_for(lambda: "web.1 | web settings old-key kept for now" in run.output(), "web up")

    settings_file.write_text("TASKLIFT_ENCRYPTION_KEYS=new-key,old-key\n")  # a key added, a setting taken out
    killed = run.status()["worker.1"]["pid"]
    assert isinstance(killed, int)
    os.killpg(killed, signal.SIGKILL)
    run.wait_for(lambda: "worker.1 | worker settings new-key,old-key None" in run.output(), "restarted worker")
    assert "web.1 | web settings new-key,old-key None" not in run.output()  # the web was not restarted

    supervisor = run.process.pid
    web_before = run.status()["web.1"]["pid"]
    run.process.send_signal(signal.SIGHUP)
    run.wait_for(lambda: "reloaded" in run.output(), "reloaded")
    assert run.process.poll() is None and run.process.pid == supervisor  # the supervisor stayed up
    assert run.status()["web.1"]["pid"] != web_before
    restarted = [(at, line) for at, line in run.lines if line.endswith("(reload)")]
    assert [line for _, line in restarted] == ["restarted web.1 (reload)", "restarted worker.1 (reload)"]
    assert restarted[1][0] - restarted[0][0] >= 2.0  # one by one: the next once the last has run 2 s
    told = [line for line in run.output() if line.endswith(" stopping")]
    assert told == ["web.1 | web stopping", "worker.1 | worker stopping"], "\n".join(run.output())
    assert "web.1 | web settings new-key,old-key None" in run.output()
    assert run.output().count("worker.1 | worker settings new-key,old-key None") == 2
    assert all(p["running"] for p in run.status().values())


def test_a_procfile_line_that_is_not_name_colon_command_is_refused(tmp_path: Path) -> None:
    from config.supervise import procfile_read

    (tmp_path / "Procfile").write_text("web: gunicorn config.wsgi\nworker celery -A config worker\n")

    with pytest.raises(ValueError, match=r"Procfile:2: expected `name: command`"):
        procfile_read(tmp_path / "Procfile")
    assert procfile_read(ROOT / "Procfile") == {
        "web": "gunicorn config.wsgi --config gunicorn.conf.py",
        "worker": "celery -A config --quiet worker --loglevel INFO",
        "beat": "celery -A config --quiet beat --loglevel INFO",
        "imap-idle": "python -m config.imap_idle",
        "inbound": "python -m config.inbound",
    }


class Deployment:
    """`python -m config.supervise web=1 worker=1 beat=0 imap-idle=0 inbound=0` on the real Procfile (gunicorn, a Celery
    worker) and the test database, each process's output in its log file, the supervisor's own lines collected."""

    def __init__(self, folder: Path, *args: str, **env: str) -> None:
        from django.conf import settings

        from config.ports import free_port
        from tests.processes import process_env

        self.folder = folder
        self.port = free_port()
        # A queue of its own: on this run's queue the worker took up jobs other tests had left queued (a run
        # of their people), and the stop waited on them, past this test's 90 s (its grace is a run's 600 s).
        environment = process_env(
            PORT=str(self.port), WEB_CONCURRENCY="3", PATH="/usr/bin:/bin", REDIS_URL=settings.REDIS_URL,
            CELERY_QUEUE=f"{settings.CELERY_TASK_DEFAULT_QUEUE}-supervise-{self.port}", **env,
        )  # fmt: skip
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.supervise", "web=1", "worker=1", "beat=0", "imap-idle=0", "inbound=0",
             "--status-file", str(folder / "status.json"), "--log-dir", str(folder / "logs"), *args],
            cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def log(self, label: str) -> str:
        path = self.folder / "logs" / f"{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def status(self) -> dict[str, dict[str, object]]:
        try:
            return dict(json.loads((self.folder / "status.json").read_text())["processes"])
        except (OSError, ValueError):
            return {}

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, "the supervisor exited:\n" + "\n".join(self.lines)
            assert time.monotonic() < deadline, (
                f"{what}:\n" + "\n".join(self.lines) + f"\n{self.log('worker.1')[-3000:]}\n{self.log('web.1')[-3000:]}"
            )
            time.sleep(0.5)

    def get(self, path: str) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()
        except OSError:
            return 0, ""

    def healthy(self) -> bool:
        return self.get("/healthz")[0] == 200

    def worker_ready(self, times: int = 1) -> bool:
        return self.log("worker.1").count(" ready.") >= times

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=90)
        return "\n".join(self.lines)


@pytest.mark.django_db(transaction=True)
def test_the_procfiles_web_and_worker_run_and_a_killed_worker_comes_back(tmp_path: Path) -> None:
    """The real Procfile (gunicorn, a Celery worker) on the test database: what `sh -c`, the virtualenv's PATH
    and gunicorn.conf.py make of it. Beat is left out (`beat=0`): its schedule file is a `make run`'s."""
    deployment = Deployment(tmp_path)
    try:
        deployment.wait_for(deployment.healthy, "gunicorn did not answer")
        deployment.wait_for(deployment.worker_ready, "no worker")
        status = deployment.status
        assert sorted(status()) == ["web.1", "worker.1"]
        web = psutil.Process(int(str(status()["web.1"]["pid"])))
        assert len(web.children()) == 1  # web=1: one gunicorn process, whatever WEB_CONCURRENCY said
        assert "worker.1@" in deployment.log("worker.1")  # the Celery node's name

        killed = int(str(status()["worker.1"]["pid"]))
        os.killpg(killed, signal.SIGKILL)
        deployment.wait_for(lambda: deployment.worker_ready(2), "the worker did not come back")
        assert status()["worker.1"]["restarts"] == 1 and not psutil.pid_exists(killed)
        assert deployment.healthy()
    finally:
        output = deployment.stop()
    assert deployment.process.returncode == 0, output
    assert "restarted worker.1 (exit -9)" in output
    assert output.index("stopping worker") < output.index("stopping web")


def healthcheck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m config.healthcheck ARGS`, as compose or a host's monitor runs it."""
    return subprocess.run(
        [sys.executable, "-m", "config.healthcheck", *args],
        cwd=ROOT, env={**os.environ, "GUNICORN_BIND": "", **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_supervise_gives_up_on_wrong_settings_names_the_setting_and_readyz_says_it(tmp_path: Path) -> None:
    """Issue 35: one key of TASKLIFT_ENCRYPTION_KEYS with its trailing `=` cut made every process exit at start
    and be restarted with backoff for ever; /readyz gave no answer, and the sentence naming the key was only in
    the supervisor's output. Now each process exits 78 saying which setting; after three tries it is left
    stopped, the status file and the supervisor's output say why; SIGHUP on the fixed file starts it again; a
    worker stopped so while the web runs is named by /readyz."""
    from cryptography.fernet import Fernet

    good = [Fernet.generate_key().decode(), Fernet.generate_key().decode()]
    cut = f"{good[0]},{good[1].rstrip('=')}"
    settings_file = tmp_path / "tasklift.env"
    settings_file.write_text(f"TASKLIFT_ENCRYPTION_KEYS={cut}\n")
    wrong = "TASKLIFT_ENCRYPTION_KEYS: key 2 of 2 is not a Fernet key"
    deployment = Deployment(tmp_path, "--env-file", str(settings_file), TASKLIFT_ENCRYPTION_KEYS=cut)
    status = deployment.status
    try:
        # Both refuse to start, three times each, and are left stopped, saying why.
        deployment.wait_for(
            lambda: all(p.get("gave_up") for p in status().values()) and len(status()) == 2, "both given up"
        )
        for label in ("web.1", "worker.1"):
            assert status()[label]["last_exit"] == 78 and status()[label]["restarts"] == 2, status()
            assert wrong in str(status()[label]["gave_up"]), status()
            assert any(
                line.startswith(f"gave up on {label}: its settings are wrong: {wrong}") for line in deployment.lines
            )
            assert deployment.log(label).count(f"cannot start {label.split('.')[0]}: {wrong}") == 3
        assert not deployment.healthy()
        check = healthcheck("supervise", str(tmp_path / "status.json"))
        assert check.returncode == 1 and f"web.1: its settings are wrong: {wrong}" in check.stdout, check

        # The file fixed, SIGHUP: both start again, each on the file as it is now.
        settings_file.write_text(f"TASKLIFT_ENCRYPTION_KEYS={good[0]},{good[1]}\n")
        deployment.process.send_signal(signal.SIGHUP)
        deployment.wait_for(deployment.healthy, "the web did not start again")
        deployment.wait_for(deployment.worker_ready, "the worker did not start again")
        code, body = deployment.get("/readyz")
        assert json.loads(body)["checks"]["processes"] == "ok (2 supervised)", body
        check = healthcheck("supervise", str(tmp_path / "status.json"))
        assert (check.returncode, check.stdout) == (0, "supervise: healthy\n"), check
        check = healthcheck("web", PORT=str(deployment.port))  # /readyz: 503 here, no beat runs (beat=0)
        assert check.returncode == 1 and "/readyz answered 503" in check.stdout and "'beat'" in check.stdout, check

        # Wrong again, and only the worker restarted (killed): the web, still up, names it on /readyz.
        settings_file.write_text(f"TASKLIFT_ENCRYPTION_KEYS={cut}\n")
        os.killpg(int(str(status()["worker.1"]["pid"])), signal.SIGKILL)
        deployment.wait_for(lambda: bool(status()["worker.1"].get("gave_up")), "the worker given up")
        code, body = deployment.get("/readyz")
        assert code == 503, body
        said = json.loads(body)["checks"]["processes"]
        assert said.startswith(f"error: worker.1 is stopped: its settings are wrong: {wrong} (44 characters"), body
        assert said.endswith("(fix the settings file, then send the supervisor SIGHUP)") and "web.1" not in said
        assert deployment.healthy()
    finally:
        output = deployment.stop()
    assert deployment.process.returncode == 0, output
