"""`python -m config.supervise [web=N] [worker=N] [beat=N]`: the Procfile's processes, kept running.

Reads the Procfile (the one list of processes: `name: command` lines, `#` comments; one command a line) and
runs each process `count` times (default once each; `worker=0` leaves one out), each as `sh -c 'exec COMMAND'`
from the Procfile's folder, in a process group of its own, with this virtualenv's bin first on PATH and the
environment passed on. Killed outright (SIGKILL), it leaves nothing running: the kernel sends each process
SIGTERM (PR_SET_PDEATHSIG).

- **Restarts**: a process that exits, whatever its exit code, is started again after a pause that doubles
  from 1 s to at most 30 s while it keeps dying within a minute of its start, with one line
  `restarted worker.2 (exit 1)` (a negative code is the signal that ended it, -9 for SIGKILL).
- **Stopping**: SIGTERM or SIGINT stops the processes in the reverse order of the Procfile (beat, worker, web):
  SIGTERM to each process group, SIGKILL to what is left after the grace (`--grace`, default: web 35 s, longer
  than gunicorn's graceful timeout of 30 s; worker 600 s, longer than a run's soft time limit of 540 s, so a run
  in flight ends by itself rather than being done again; beat 10 s). A second signal kills at once. The exit
  code is 0.
- **Output**: every line of each process on stdout, prefixed `worker.1 | `; with `--log-dir DIR`, each
  process's output goes to `DIR/worker.1.log` instead and stdout keeps this supervisor's own lines.
- **Metrics**: with `--metrics-clear`, `manage.py metrics_clear` empties PROMETHEUS_MULTIPROC_DIR before anything
  starts (the deployment of this machine starts here; a process restarted later keeps its counts).
- **Status**: with `--status-file PATH`, a JSON object rewritten at every start and exit:
  `{"pid": supervisor pid, "processes": {"worker.1": {"pid", "restarts", "running", "last_exit", "gave_up"}}}`;
  `pid` is also the process group's id (`os.killpg(pid, SIGKILL)` kills a worker with its pool). Its path is
  passed on as SUPERVISE_STATUS_FILE, so that `/readyz` names a process given up on.
- **Settings**: with `--env-file PATH` (the runbook's /etc/tasklift/tasklift.env), the file is read again, as
  `sh` reads it (`set -a; . PATH`), for every process started: a key added to it reaches the next process
  started, and a key taken out of it is gone. SIGHUP restarts the processes one by one (web, the workers,
  beat: each stopped as at the stop, then started again on the file as it is now), the supervisor staying up.
- **Wrong settings**: a process that exits 78 (config/startup.py: its settings are wrong, restarting it will not
  help) is tried three times, then left stopped: one line `gave up on web.1: its settings are wrong: …` naming
  the setting, `gave_up` with that sentence in the status file, until SIGHUP (after the file is fixed).

**web=N** means N gunicorn *processes*, not N gunicorns: one gunicorn binds the port (gunicorn.conf.py: PORT or
GUNICORN_BIND) and forks `WEB_CONCURRENCY` processes, which it restarts itself; a second gunicorn on the same
port could not bind. So `web=N` runs one web with WEB_CONCURRENCY=N (without `web=`, WEB_CONCURRENCY is read
from the environment; gunicorn.conf.py's default is 3). `worker=N` runs N Celery workers, each named
`worker.N@host` (CELERY_WORKER_HOSTNAME) with CELERY_WORKER_CONCURRENCY processes of its own; run `beat=1`
(one beat: docs/deploy.md).

honcho (and foreman) were looked at: they run a Procfile but stop everything when one process exits, which
is what this must not do; supervisord or systemd (deploy/systemd/) do restart, and this is the small
equivalent that a benchmark or a single machine can run from the repository alone.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 60.0  # a process that ran this long starts again after the first pause, not a longer one
COPY_DRAIN_S = 5.0  # at the stop, how long a stopped process's last output may take to be relayed
GRACE_S = {"web": 35.0, "worker": 600.0, "beat": 10.0, "imap-idle": 10.0, "inbound": 35.0}
GRACE_DEFAULT_S = 30.0
# A process that forks its own processes: its count is how many it forks, through this variable.
FORKS_ITSELF = {"web": "WEB_CONCURRENCY"}
_PR_SET_PDEATHSIG = 1
EXIT_SETTINGS = 78  # config/startup.py: the process's settings are wrong
SETTINGS_TRIES = 3  # exits 78 in a row before a process is left stopped
RELOAD_SETTLE_S = 2.0  # after a restart on SIGHUP, how long a process runs before the next one is restarted
_SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}  # what `sh` sets of itself, not the file's


def procfile_read(path: Path) -> dict[str, str]:
    """The Procfile's processes in order: `name: command` a line; blank lines and `#` comments skipped."""
    processes: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, command = line.partition(":")
        if not colon or not re.fullmatch(r"[A-Za-z_][\w-]*", name.strip()) or not command.strip():
            raise ValueError(f"{path}:{number}: expected `name: command`, got {line!r}")
        processes[name.strip()] = command.strip()
    return processes


def process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a Procfile process: ours, with this virtualenv's bin first on PATH."""
    env = {**os.environ, **(extra or {})}
    env["PATH"] = os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", os.defpath)])
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the log as they are written
    return env


def env_file_read(path: Path) -> dict[str, str]:
    """The variables a settings file sets, read as deploy/env.sh reads it: `sh` sources it with `set -a` in an
    empty environment and prints its environment. Raises ValueError (with sh's message) when sh cannot read it."""
    result = subprocess.run(  # noqa: S603 — sh, and the operator's own settings file
        ["sh", "-c", 'set -a; . "$1" && exec env -0', "sh", str(path)],  # noqa: S607
        env={}, capture_output=True, timeout=30, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ValueError(result.stderr.decode(errors="replace").strip() or f"sh exited {result.returncode}")
    variables = {}
    for entry in result.stdout.split(b"\0"):
        name, equals, value = entry.decode(errors="replace").partition("=")
        if equals and name not in _SHELL_OWN:
            variables[name] = value
    return variables


def shell_command(command: str) -> list[str]:
    """A Procfile line through `sh -c`, `exec`ed: the command itself leads its process group, so that it has
    the signals and its exit code, and the kernel tells it when its parent dies (die_with_parent)."""
    return ["sh", "-c", f"exec {command}"]


def die_with_parent() -> None:
    """In the child, before exec: the kernel sends it SIGTERM when its parent dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def group_signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def groups_stop(children: list[subprocess.Popen[bytes]], *, grace: float, hurry: threading.Event | None = None) -> None:
    """SIGTERM to each child's process group, then SIGKILL to every group once `grace` has passed (or at once
    when `hurry` is set), so that nothing of them is left: a Celery worker's pool, gunicorn's processes.

    It waits for the whole group, not the child alone: the child is `sh`, which dies of the SIGTERM at once
    while the command it runs (a worker finishing its jobs) takes its time."""
    for child in children:
        if child.poll() is None:
            group_signal(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not (hurry and hurry.is_set()):
        for child in children:
            child.poll()  # reaps the leader, so that its group ends when its last process does
        if not any(group_alive(child.pid) for child in children):
            break
        time.sleep(0.1)
    for child in children:
        group_signal(child.pid, signal.SIGKILL)  # whatever of its group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


@dataclass
class Instance:
    """One running copy of a Procfile process, `name.number`."""

    name: str
    number: int
    command: str
    extra: dict[str, str]  # its own variables, over the environment and the settings file
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    failures: int = 0  # exits in a row within HEALTHY_AFTER_S of the start
    settings_failures: int = 0  # exits 78 in a row
    gave_up: str | None = None  # why it is left stopped (its settings are wrong), until SIGHUP
    reloading: bool = False  # being restarted by SIGHUP: the main loop leaves it alone
    started_at: float = 0.0
    restart_at: float | None = None
    last_exit: int | None = None
    log: IO[bytes] | None = field(default=None, repr=False)
    copier: threading.Thread | None = field(default=None, repr=False)  # relays its output (no --log-dir)

    @property
    def label(self) -> str:
        return f"{self.name}.{self.number}"


class Supervisor:
    def __init__(
        self,
        processes: dict[str, str],
        counts: dict[str, int],
        *,
        cwd: Path,
        log_dir: Path | None = None,
        status_file: Path | None = None,
        grace: float | None = None,
        env_file: Path | None = None,
    ) -> None:
        self.cwd = cwd
        self.log_dir = log_dir
        self.status_file = status_file
        self.grace = grace
        self.env_file = env_file
        self.order = list(processes)
        self.instances: list[Instance] = []
        self.stopping = threading.Event()
        self.hurry = threading.Event()
        self.reload_wanted = threading.Event()
        self.reload_queue: list[Instance] = []  # SIGHUP: the processes still to restart, in order
        self.reload_current: Instance | None = None
        self.reload_phase = ""  # "stopping", then "settling"
        self.reload_until = 0.0
        self.output_lock = threading.Lock()
        self.reasons = Path(tempfile.mkdtemp(prefix="tasklift-supervise-"))  # each process's exit-78 sentence
        # The environment under the settings file: ours, less what the file set when we started (deploy/env.sh
        # sourced it into ours), so that a key taken out of the file is gone from the next process too.
        self.file_env = self._file_read() if env_file is not None else {}
        self.base_env = {k: v for k, v in os.environ.items() if k not in self.file_env}
        for name, command in processes.items():
            count = counts.get(name, 1)
            if name in FORKS_ITSELF and count:
                extra = {FORKS_ITSELF[name]: str(count)} if name in counts else {}
                self.instances.append(Instance(name, 1, command, extra))
                continue
            for number in range(1, count + 1):
                extra = {"CELERY_WORKER_HOSTNAME": f"{name}.{number}@%h"} if name == "worker" else {}
                self.instances.append(Instance(name, number, command, extra))

    def _file_read(self) -> dict[str, str]:
        assert self.env_file is not None
        try:
            return env_file_read(self.env_file)
        except (OSError, ValueError, subprocess.TimeoutExpired) as error:
            if not hasattr(self, "file_env"):
                raise SystemExit(f"cannot read the settings file {self.env_file}: {error}") from None
            self.say(f"cannot read the settings file {self.env_file} ({error}): its last good reading is used")
            return self.file_env

    def environment(self, instance: Instance) -> dict[str, str]:
        """A process's environment at its start: ours, the settings file as it is now, its own variables."""
        if self.env_file is not None:
            self.file_env = self._file_read()
        env = process_env({**self.file_env, **instance.extra})
        for name in set(os.environ) - set(self.base_env) - set(self.file_env):
            env.pop(name, None)  # set by the file when we started, and no longer
        env["TASKLIFT_EXIT_REASON_FILE"] = str(self.reasons / f"{instance.label}.reason")
        if self.status_file is not None:
            env["SUPERVISE_STATUS_FILE"] = str(self.status_file.resolve())
        return env

    def say(self, line: str) -> None:
        with self.output_lock:
            sys.stdout.write(f"{line}\n")
            sys.stdout.flush()

    def start(self, instance: Instance) -> None:
        (self.reasons / f"{instance.label}.reason").unlink(missing_ok=True)  # the sentence of this start's exit only
        output: IO[bytes] | int = subprocess.PIPE
        if self.log_dir is not None:
            if instance.log is None:
                instance.log = (self.log_dir / f"{instance.label}.log").open("ab")
            output = instance.log
        instance.process = subprocess.Popen(  # noqa: S603 — the Procfile's own commands
            shell_command(instance.command), cwd=self.cwd, env=self.environment(instance), stdin=subprocess.DEVNULL,
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
        )  # fmt: skip
        instance.started_at = time.monotonic()
        instance.restart_at = None
        if instance.process.stdout is not None:
            instance.copier = threading.Thread(target=self._copy, args=(instance, instance.process.stdout), daemon=True)
            instance.copier.start()
        self.write_status()

    def _copy(self, instance: Instance, stream: IO[bytes]) -> None:
        prefix = f"{instance.label} | "
        for raw in iter(stream.readline, b""):
            self.say(prefix + raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    def run(self) -> int:
        for instance in self.instances:
            self.start(instance)
        while not self.stopping.is_set():
            now = time.monotonic()
            self.reload_step(now)
            for instance in self.instances:
                if self.stopping.is_set():
                    break
                if instance.reloading or instance.gave_up is not None:
                    continue
                process = instance.process
                if process is not None and instance.restart_at is None and process.poll() is not None:
                    self._exited(instance, process.returncode, now)
                elif instance.restart_at is not None and now >= instance.restart_at:
                    instance.restarts += 1
                    self.say(f"restarted {instance.label} (exit {instance.last_exit})")
                    self.start(instance)
            self.stopping.wait(0.2)
        self.stop()
        return 0

    def _exited(self, instance: Instance, code: int, now: float) -> None:
        instance.last_exit = code
        if instance.process is not None:
            group_signal(instance.process.pid, signal.SIGKILL)  # what it left of its group (a pool's children)
        instance.settings_failures = instance.settings_failures + 1 if code == EXIT_SETTINGS else 0
        if instance.settings_failures >= SETTINGS_TRIES:
            reason_file = self.reasons / f"{instance.label}.reason"
            reason = reason_file.read_text().strip() if reason_file.exists() else "(it did not say which)"
            instance.gave_up = f"its settings are wrong: {reason}"
            self.say(
                f"gave up on {instance.label}: {instance.gave_up} (exit {code}, {SETTINGS_TRIES} times); fix the "
                f"settings, then `kill -HUP {os.getpid()}` starts it again"
            )
            self.write_status()
            return
        instance.failures = 0 if now - instance.started_at >= HEALTHY_AFTER_S else instance.failures + 1
        pause = min(BACKOFF_FIRST_S * 2 ** max(instance.failures - 1, 0), BACKOFF_MAX_S)
        instance.restart_at = now + pause
        self.write_status()

    def reload_step(self, now: float) -> None:
        """SIGHUP, a step at each turn of the main loop: each process in the Procfile's order stopped (as at the
        stop, its grace given), started again on the settings file as it is now, and the next one once it has run
        RELOAD_SETTLE_S; a process given up on is tried again. In the main thread: the kernel's SIGTERM on the
        parent's death (die_with_parent) follows the thread that started a process, not the supervisor."""
        if self.reload_wanted.is_set() and not self.reload_queue and self.reload_current is None:
            self.reload_wanted.clear()
            self.reload_queue = list(self.instances)
            self.say("reloading: each process restarted in turn, on the settings as they are now")
        if self.reload_current is None:
            if not self.reload_queue:
                return
            instance = self.reload_queue.pop(0)
            instance.reloading = True
            if instance.process is not None and instance.process.poll() is None:
                group_signal(instance.process.pid, signal.SIGTERM)
            grace = self.grace if self.grace is not None else GRACE_S.get(instance.name, GRACE_DEFAULT_S)
            self.reload_current, self.reload_phase, self.reload_until = instance, "stopping", now + grace
        instance = self.reload_current
        if self.reload_phase == "stopping":
            process = instance.process
            if process is not None:
                process.poll()  # reaps the leader, so that its group ends when its last process does
                if group_alive(process.pid) and now < self.reload_until and not self.hurry.is_set():
                    return
                group_signal(process.pid, signal.SIGKILL)  # what is left of it after the grace
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            instance.gave_up, instance.settings_failures, instance.failures = None, 0, 0
            instance.restarts += 1
            self.say(f"restarted {instance.label} (reload)")
            self.start(instance)
            self.reload_phase, self.reload_until = "settling", now + RELOAD_SETTLE_S
        elif now >= self.reload_until or (instance.process is not None and instance.process.poll() is not None):
            instance.reloading = False  # running, or dead already: the main loop's to restart
            self.reload_current = None
            if not self.reload_queue:
                self.say("reloaded")

    def stop(self) -> None:
        for name in reversed(self.order):
            group = [i for i in self.instances if i.name == name and i.process is not None]
            if not group:
                continue
            self.say(f"stopping {name}")
            grace = self.grace if self.grace is not None else GRACE_S.get(name, GRACE_DEFAULT_S)
            groups_stop([i.process for i in group if i.process is not None], grace=grace, hurry=self.hurry)
            for instance in group:
                instance.restart_at = None
                if instance.process is not None:
                    instance.last_exit = instance.process.returncode
                if instance.copier is not None:
                    # Its last lines ("stopped", a worker's warm shutdown) are said before the supervisor ends:
                    # its relay is a daemon thread, which the exit would cut short.
                    instance.copier.join(timeout=COPY_DRAIN_S)
        for instance in self.instances:
            if instance.log is not None:
                instance.log.close()
        self.write_status()
        shutil.rmtree(self.reasons, ignore_errors=True)
        self.say("stopped")

    def on_signal(self, signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            self.reload_wanted.set()
            return
        if self.stopping.is_set():
            self.hurry.set()  # a second Ctrl-C: no more waiting for the grace
        self.stopping.set()

    def write_status(self) -> None:
        if self.status_file is None:
            return
        status = {
            "pid": os.getpid(),
            "processes": {
                i.label: {
                    "name": i.name,
                    "pid": i.process.pid if i.process else None,
                    "restarts": i.restarts,
                    "running": bool(i.process and i.process.poll() is None and i.restart_at is None),
                    "last_exit": i.last_exit,
                    "gave_up": i.gave_up,
                }
                for i in self.instances
            },
        }
        temporary = self.status_file.with_name(f".{self.status_file.name}.{os.getpid()}")
        temporary.write_text(json.dumps(status, indent=1))
        temporary.replace(self.status_file)  # a reader never sees half a file


def parse_counts(words: list[str], processes: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in words:
        name, equals, number = word.partition("=")
        if not equals or not number.isdigit():
            raise SystemExit(f"expected NAME=COUNT (e.g. worker=2), got {word!r}")
        if name not in processes:
            raise SystemExit(f"{name!r} is not in the Procfile (it has: {', '.join(processes)})")
        counts[name] = int(number)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.supervise", description=__doc__.split("\n")[0])
    parser.add_argument("counts", nargs="*", metavar="NAME=COUNT", help="how many of a process (default 1 each)")
    parser.add_argument("--procfile", type=Path, default=ROOT / "Procfile")
    parser.add_argument("--log-dir", type=Path, help="each process's output to DIR/NAME.N.log, not stdout")
    parser.add_argument("--status-file", type=Path, help="a JSON file of each process's pid and restarts")
    parser.add_argument("--grace", type=float, help="seconds between SIGTERM and SIGKILL at the stop, for all")
    parser.add_argument(
        "--env-file", type=Path, help="a settings file (sh syntax) read again for every process started"
    )
    parser.add_argument(
        "--metrics-clear", action="store_true", help="empty PROMETHEUS_MULTIPROC_DIR first (manage.py metrics_clear)"
    )
    args = parser.parse_args(argv)
    if args.metrics_clear:
        # The deployment starts here: no process of it runs yet, so last time's metric files can go.
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "metrics_clear"], cwd=ROOT, check=True)  # noqa: S603
    processes = procfile_read(args.procfile)
    counts = parse_counts(args.counts, processes)
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(
        processes,
        counts,
        cwd=args.procfile.resolve().parent,
        log_dir=args.log_dir,
        status_file=args.status_file,
        grace=args.grace,
        env_file=args.env_file,
    )
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, supervisor.on_signal)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
