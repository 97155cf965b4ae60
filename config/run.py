"""`make run`: every process of Tasklift on one machine, stopped together by Ctrl-C.

Starts (or finds) the embedded PostgreSQL and Redis, migrates, seeds the demo accounts, then runs the
sandbox (for every external service that has no real credentials), the web server, a Celery worker
and Celery beat, waits until /healthz is healthy, and prints where to go last.

Each process writes to its own log under `<TASKLIFT_LOCAL_DIR>/logs/`, so the screen stays calm
(`TASKLIFT_RUN_VERBOSE=1` shows every line instead). The processes run in sessions of their own: Ctrl-C
reaches only this one, which stops them in order (beat, worker, web, sandbox), each with its children.
Should this process be killed outright, the kernel sends each of them SIGTERM (PR_SET_PDEATHSIG), and
the next start, or `make stop`, ends anything still listed in `<TASKLIFT_LOCAL_DIR>/run.pids`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType
from typing import IO
from urllib.parse import urlsplit

import django

DEMO_PASSWORD = "tasklift-demo"
ADMIN_PASSWORD = "tasklift-admin"
STOP_ORDER = ("beat", "worker", "web", "sandbox")
PIDS_FILE = "run.pids"
_PR_SET_PDEATHSIG = 1


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    port = os.environ.get("PORT", "8000")
    os.environ.setdefault("SITE_URL", f"http://127.0.0.1:{port}")  # OAuth callbacks come back to this server
    verbose = os.environ.get("TASKLIFT_RUN_VERBOSE", "").lower() in ("1", "true", "yes")
    say("Starting Tasklift: embedded PostgreSQL and Redis…")
    django.setup()  # starts the embedded PostgreSQL and Redis when no URL is configured
    from django.conf import settings
    from django.core.management import call_command

    local_dir = Path(settings.LOCAL_DIR)
    stop_leftovers(local_dir)  # a previous `make run` killed outright may have left some behind
    say("Migrating the database and seeding the demo accounts…")
    call_command("migrate", interactive=False, verbosity=0)
    call_command("seed_demo", password=DEMO_PASSWORD, admin_password=ADMIN_PASSWORD)
    call_command("metrics_clear", verbosity=0)  # no process of ours runs yet (stop_leftovers)

    commands = _commands(port)
    logs = local_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    children: dict[str, subprocess.Popen[bytes]] = {}
    log_files: dict[str, IO[bytes]] = {}

    def stop_all(signum: int | None = None, frame: FrameType | None = None, *, code: int = 0) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
        say("\nStopping Tasklift…")
        for name in STOP_ORDER:
            if name in children:
                _stop(children[name])
        (local_dir / PIDS_FILE).unlink(missing_ok=True)
        for handle in log_files.values():
            handle.close()
        say("Tasklift stopped. PostgreSQL and Redis keep running for the next start; `make stop` ends them.")
        sys.exit(code)

    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGHUP, stop_all)
    for name, command in commands.items():
        say(f"Starting the {name}…")
        output: IO[bytes] | None = None
        if not verbose:
            output = log_files[name] = (logs / f"{name}.log").open("ab")
        children[name] = subprocess.Popen(  # noqa: S603 — our own fixed commands
            command, stdout=output, stderr=subprocess.STDOUT if output else None, start_new_session=True,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
        (local_dir / PIDS_FILE).write_text(json.dumps({n: c.pid for n, c in children.items()}))

    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(f"{url}/healthz", children):
        failed = next((n for n, c in children.items() if c.poll() is not None), None)
        say(f"Tasklift did not become healthy{f': the {failed} stopped' if failed else ' within 90 s'}.")
        if failed and not verbose:
            say(_tail(logs / f"{failed}.log"))
        stop_all(code=1)
    _push_ready(url, sandboxed="sandbox" in commands)
    sandbox = f"  Sandbox:     {settings.SANDBOX_URL}/_sandbox/requests\n" if "sandbox" in commands else ""
    say(
        f"\nLogs of every process are in {logs}/.\n\n"
        f"  Tasklift is running at {url}/\n"
        f"  Demo login:  demo@tasklift.test / {DEMO_PASSWORD}\n"
        f"  Admin login: admin@tasklift.test / {ADMIN_PASSWORD}  ({url}/admin/)\n"
        f"  Health:      {url}/healthz\n"
        f"{sandbox}"
        "  Ctrl-C stops every process.\n"
    )
    while True:
        for name, child in children.items():
            if child.poll() is not None:
                say(f"The {name} exited with code {child.returncode}; stopping the rest.")
                if not verbose:
                    say(_tail(logs / f"{name}.log"))
                stop_all(code=1)
        time.sleep(1)


def _commands(port: str) -> dict[str, list[str]]:
    """Every process to start, by name. The sandbox follows SANDBOX_URL and SANDBOX_TLS_URL, and writes its
    certificate where the app trusts it (MICROSOFT_CA_BUNDLE, under TASKLIFT_LOCAL_DIR by default)."""
    from django.conf import settings

    python = sys.executable
    commands: dict[str, list[str]] = {}
    if settings.GOOGLE_SIMULATED or settings.GEMINI_SIMULATED or settings.MICROSOFT_SIMULATED:
        sandbox, tls = urlsplit(settings.SANDBOX_URL), urlsplit(settings.SANDBOX_TLS_URL)
        commands["sandbox"] = [
            python, "-m", "sandbox", "--host", sandbox.hostname or "127.0.0.1", "--port", str(sandbox.port or 8765),
            "--tls-port", str(tls.port or 8766), "--cert-file", settings.MICROSOFT_CA_BUNDLE,
            "--demo", "demo@tasklift.test",
        ]  # fmt: skip
    commands["web"] = [python, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    commands["worker"] = [python, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2"]
    commands["beat"] = [
        python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
        "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME,
    ]  # fmt: skip
    return commands


def _push_ready(url: str, *, sandboxed: bool) -> None:
    """Push in development: the sandbox's Pub/Sub pushes Gmail's topic to this server (as an operator sets
    up the push subscription in the GCP console), and the push channels of connected mailboxes are opened."""
    from django.conf import settings

    if not settings.PUSH_ENABLED:
        return
    if sandboxed and settings.GOOGLE_SIMULATED:
        from sandbox.client import SandboxClient

        try:
            SandboxClient(settings.SANDBOX_URL).pubsub_subscribe(
                settings.GMAIL_PUSH_TOPIC,
                f"{url}/webhooks/gmail",
                settings.GMAIL_PUSH_SERVICE_ACCOUNT,
                audience=settings.GMAIL_PUSH_AUDIENCE,
            )
        except Exception as error:  # push is a speed-up: polling still reads the mail
            say(f"Gmail push is off for this run (the sandbox refused the Pub/Sub subscription: {error}).")
    from integrations.jobs import push_channels_maintain_job

    try:
        push_channels_maintain_job.delay()
    except Exception as error:
        say(f"Push channels open at beat's next maintenance ({error}).")


def _die_with_parent() -> None:
    """In the child, before exec: the kernel sends it SIGTERM when `make run` dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(child: subprocess.Popen[bytes], *, grace: float = 10) -> None:
    """SIGTERM to the child's whole session (a Celery worker's pool, runserver's child), then SIGKILL."""
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # whatever of its session is left
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=5)


def stop_leftovers(local_dir: Path) -> None:
    """End the processes that a `make run` of this checkout left running (it was killed outright)."""
    import psutil

    pids_file = local_dir / PIDS_FILE
    try:
        listed = json.loads(pids_file.read_text())
    except (OSError, ValueError):
        listed = {}
    for name, pid in listed.items() if isinstance(listed, dict) else []:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            process = psutil.Process(int(pid))
            if os.getpgid(process.pid) == process.pid and "python" in process.name():  # still ours, a leader
                say(f"Stopping the {name} left running by an earlier start…")
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(10)
    pids_file.unlink(missing_ok=True)


def wait_healthy(url: str, children: dict[str, subprocess.Popen[bytes]], timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children.values()):
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 — our own loopback URL
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"Last lines of {path}:\n" + "\n".join(f"  {line}" for line in text)


def say(message: str) -> None:
    print(message, flush=True)


if __name__ == "__main__":
    main()
