"""`make run`: every process of Tasklift on one machine, stopped together by Ctrl-C.

Starts (or finds) the embedded PostgreSQL and Redis, migrates, seeds the demo accounts, then runs the
sandbox (for every external service that has no real credentials), the web server, a Celery worker
and Celery beat, waits until /healthz is healthy, and prints where to go last.

The worker and beat are the Procfile's (config/supervise.py reads it); the web server is Django's
development server and the sandbox stands in for the external services. A worker or beat that exits is
started again (after 1 s, doubling to 30 s while it keeps dying), with a line saying so and the end of its
log; the web server or the sandbox exiting stops everything, since neither comes back by itself from what
stops it (a port taken, a code error) and the page would just go dark.

Each process writes to its own log under `<TASKLIFT_LOCAL_DIR>/logs/`, so the screen stays calm
(`TASKLIFT_RUN_VERBOSE=1` shows every line instead). The processes run in sessions of their own: Ctrl-C
reaches only this one, which stops them in order (beat, worker, web, sandbox), each with its children.
Should this process be killed outright, the kernel sends each of them SIGTERM (PR_SET_PDEATHSIG), and
the next start, or `make stop`, ends anything still listed in `<TASKLIFT_LOCAL_DIR>/run.pids`.
"""

from __future__ import annotations

import contextlib
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

from config.supervise import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    HEALTHY_AFTER_S,
    ROOT,
    die_with_parent,
    groups_stop,
    process_env,
    procfile_read,
    shell_command,
)

DEMO_PASSWORD = "tasklift-demo"
ADMIN_PASSWORD = "tasklift-admin"
STOP_ORDER = ("inbound", "imap-idle", "beat", "worker", "web", "dovecot", "sandbox")
# Started again when they exit; the others exiting stops everything.
RESTARTED = ("worker", "beat", "imap-idle", "inbound")
PIDS_FILE = "run.pids"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    port = os.environ.get("PORT", "8000")
    os.environ.setdefault("SITE_URL", f"http://127.0.0.1:{port}")  # OAuth callbacks come back to this server
    verbose = os.environ.get("TASKLIFT_RUN_VERBOSE", "").lower() in ("1", "true", "yes")
    if os.geteuid() == 0:
        # Celery warns a worker started as root on every start; on a development machine that is expected (a
        # deployment runs it as its own user, docs/deploy.md), and the warning buried worker.log's first lines.
        # By its message: a category of a package cannot be named here (not importable at interpreter start).
        quiet = "ignore:You're running the worker with superuser privileges"
        warnings = [w for w in os.environ.get("PYTHONWARNINGS", "").split(",") if w]
        os.environ["PYTHONWARNINGS"] = ",".join([*warnings, quiet])
        say("Running as root: fine for a development machine; a deployment runs Tasklift as its own user.")
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

    imap_command, imap_offer = _demo_imap(local_dir)
    inbound_offer = _demo_inbound()
    commands = _commands(port)
    if imap_command is not None:
        commands = {"dovecot": imap_command, **commands}
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
    env = process_env()

    def start(name: str) -> None:
        output: IO[bytes] | None = None
        if not verbose:
            if name not in log_files:
                log_files[name] = (logs / f"{name}.log").open("ab")
            output = log_files[name]
        children[name] = subprocess.Popen(  # noqa: S603 — our own fixed commands
            commands[name], stdout=output, stderr=subprocess.STDOUT if output else None, start_new_session=True,
            preexec_fn=die_with_parent, env=env, cwd=ROOT,
        )  # fmt: skip
        started_at[name] = time.monotonic()
        # Whole or not at all (a new name, then a rename): `make stop` or a test may read it at any moment.
        pids = local_dir / f"{PIDS_FILE}.new"
        pids.write_text(json.dumps({n: c.pid for n, c in children.items()}))
        pids.replace(local_dir / PIDS_FILE)

    started_at: dict[str, float] = {}
    for name in commands:
        say(f"Starting the {name}…")
        start(name)

    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(f"{url}/healthz", children):
        failed = next((n for n, c in children.items() if c.poll() is not None), None)
        say(f"Tasklift did not become healthy{f': the {failed} stopped' if failed else ' within 90 s'}.")
        if failed and not verbose:
            say(_tail(logs / f"{failed}.log"))
        stop_all(code=1)
    _push_ready(url, sandboxed="sandbox" in commands)
    _demo_mail_domain(sandboxed="sandbox" in commands)
    if imap_command is None:
        say(imap_offer)
    sandbox = f"  Sandbox:     {settings.SANDBOX_URL}/_sandbox/requests\n" if "sandbox" in commands else ""
    say(
        f"\nLogs of every process are in {logs}/.\n\n"
        f"  Tasklift is running at {url}/\n"
        f"  Demo login:  demo@tasklift.test / {DEMO_PASSWORD}\n"
        f"  Admin login: admin@tasklift.test / {ADMIN_PASSWORD}  ({url}/admin/)\n"
        f"  Health:      {url}/healthz\n"
        f"{sandbox}"
        f"{imap_offer if imap_command else ''}"
        f"{inbound_offer}"
        "  Ctrl-C stops every process.\n"
    )
    failures: dict[str, int] = {}
    restart_at: dict[str, float] = {}
    while True:
        now = time.monotonic()
        for name, child in list(children.items()):
            if name in restart_at:
                if now >= restart_at[name]:
                    del restart_at[name]
                    start(name)
                continue
            if child.poll() is None:
                continue
            if name not in RESTARTED:
                say(f"The {name} exited with code {child.returncode}; stopping the rest.")
                if not verbose:
                    say(_tail(logs / f"{name}.log"))
                stop_all(code=1)
            groups_stop([child], grace=0)  # what is left of its group (its pool)
            failures[name] = 0 if now - started_at[name] >= HEALTHY_AFTER_S else failures.get(name, 0) + 1
            pause = min(BACKOFF_FIRST_S * 2 ** max(failures[name] - 1, 0), BACKOFF_MAX_S)
            say(f"The {name} exited with code {child.returncode}; starting it again in {pause:.0f} s.")
            if not verbose:
                say(_tail(logs / f"{name}.log", lines=10))
            restart_at[name] = now + pause
        time.sleep(0.5)


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
    procfile = procfile_read(ROOT / "Procfile")  # beat's schedule file: CELERY_BEAT_SCHEDULE_FILENAME
    commands["worker"] = shell_command(procfile["worker"])
    commands["beat"] = shell_command(procfile["beat"])
    commands["imap-idle"] = shell_command(procfile["imap-idle"])
    commands["inbound"] = shell_command(procfile["inbound"])
    return commands


DEMO_IMAP_PASSWORD = "tasklift-imap-demo"


def _port_or_free(port: int) -> int:
    """`port` when nothing listens there, else another free one (a second checkout beside the first)."""
    import socket

    from config.ports import free_port

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return free_port()
    return port


def _demo_imap(local_dir: Path) -> tuple[list[str] | None, str]:
    """The demo IMAP server (Debian's Dovecot, sandbox/dovecot.py) and the line that offers it; or None and the
    line that says why there is none. Its certificate is the one IMAP_CA_BUNDLE names for every process."""
    from sandbox.dovecot import dovecot_missing

    missing = dovecot_missing()
    if missing:
        return None, f"No demo IMAP mailbox: {missing}."
    port = os.environ.get("DEMO_IMAP_PORT") or str(_port_or_free(8993))
    os.environ["IMAP_CA_BUNDLE"] = str(local_dir / "dovecot" / "ca.pem")
    os.environ["IMAP_ALLOW_PRIVATE_HOSTS"] = "true"  # the demo server is on this machine
    command = [
        sys.executable, "-m", "sandbox.dovecot", "--root", str(local_dir / "dovecot" / "server"),
        "--ca-file", os.environ["IMAP_CA_BUNDLE"], "--port", port, "--user", "demo@imap.tasklift.test",
        "--password", DEMO_IMAP_PASSWORD,
    ]  # fmt: skip
    offer = (
        f"  Demo IMAP:   Mailboxes → Another mailbox → Another server: 127.0.0.1, port {port}, TLS, "
        f"demo@imap.tasklift.test / {DEMO_IMAP_PASSWORD}\n"
    )
    return command, offer


def _demo_inbound() -> str:
    """The `inbound` process on this machine (INBOUND_SMTP_PORT, 2525 or a free port), its checks' DNS the
    sandbox's; and the line that says how to forward the demo person an email."""
    from django.conf import settings

    port = os.environ.get("INBOUND_SMTP_PORT") or str(_port_or_free(2525))
    os.environ["INBOUND_SMTP_PORT"] = port
    os.environ["INBOUND_SMTP_HOST"] = "127.0.0.1"
    sandbox_port = settings.SANDBOX_URL.rpartition(":")[2]
    os.environ.setdefault("INBOUND_DNS_SERVER", f"127.0.0.1:{sandbox_port}")  # sandbox/dns.py
    return (
        f"  Forward-to:  Settings shows the demo person's address; once they agree to AI reading, "
        f"`{sys.executable} -m sandbox.forward_send --port {port}` forwards them an email\n"
    )


def _demo_mail_domain(*, sandboxed: bool) -> None:
    """The demo domain's SPF and DMARC in the sandbox's DNS, so that mail sent from this machine as the demo
    person passes the forward-to address's checks (sandbox/forward_send.py signs it too)."""
    if not sandboxed:
        return
    from django.conf import settings

    from sandbox.client import SandboxClient

    try:
        SandboxClient(settings.SANDBOX_URL).mail_domain("tasklift.test")
    except Exception as error:  # the forward-to demo only
        say(f"The demo forward-to address will refuse mail: the sandbox's DNS refused the demo domain ({error}).")


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


def _stop(child: subprocess.Popen[bytes], *, grace: float = 10) -> None:
    """SIGTERM to the child's whole session (a Celery worker's pool, runserver's child), then SIGKILL."""
    groups_stop([child], grace=grace)


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
            # still ours: a session leader (a pid reused since would rarely be one) running Python
            if os.getpgid(process.pid) == process.pid and any("python" in part for part in process.cmdline()[:1]):
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
