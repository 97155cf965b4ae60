"""`make run`: every process of Tasklift on one machine, stopped together by Ctrl-C.

Starts (or finds) the embedded PostgreSQL and Redis, migrates, seeds the demo accounts, then runs the
sandbox (for every external service that has no real credentials), the web server, a Celery worker
and Celery beat, and waits until /healthz is healthy before printing where to go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from types import FrameType
from urllib.parse import urlsplit

import django

DEMO_PASSWORD = "tasklift-demo"
ADMIN_PASSWORD = "tasklift-admin"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()  # starts the embedded PostgreSQL and Redis when no URL is configured
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    call_command("seed_demo", password=DEMO_PASSWORD, admin_password=ADMIN_PASSWORD)

    port = os.environ.get("PORT", "8000")
    python = sys.executable
    commands: dict[str, list[str]] = {}
    if settings.GOOGLE_SIMULATED or settings.GEMINI_SIMULATED:
        sandbox = urlsplit(settings.SANDBOX_URL)
        commands["sandbox"] = [
            python, "-m", "sandbox", "--host", sandbox.hostname or "127.0.0.1",
            "--port", str(sandbox.port or 8765), "--demo", "demo@tasklift.test",
        ]  # fmt: skip
    commands["web"] = [python, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    commands["worker"] = [python, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2"]
    commands["beat"] = [
        python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
        "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME,
    ]  # fmt: skip

    children: dict[str, subprocess.Popen[bytes]] = {}

    def stop_all(signum: int | None = None, frame: FrameType | None = None) -> None:
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + 10
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        print("\nTasklift stopped (PostgreSQL and Redis keep running; `make stop` ends them).", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    for name, command in commands.items():
        children[name] = subprocess.Popen(command)  # noqa: S603 — our own fixed commands

    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(f"{url}/healthz", children):
        print("Tasklift did not become healthy within 60 s; see the output above.", flush=True)
        stop_all()
    print(
        f"\n  Tasklift is running at {url}/\n"
        f"  Demo login:  demo@tasklift.test / {DEMO_PASSWORD}\n"
        f"  Admin login: admin@tasklift.test / {ADMIN_PASSWORD}  ({url}/admin/)\n"
        f"  Health:      {url}/healthz\n"
        + (f"  Sandbox:     {settings.SANDBOX_URL}/_sandbox/requests\n" if "sandbox" in commands else "")
        + "  Ctrl-C stops every process.\n",
        flush=True,
    )
    while True:
        for name, child in children.items():
            if child.poll() is not None:
                print(f"{name} exited with code {child.returncode}; stopping the rest.", flush=True)
                stop_all()
        time.sleep(1)


def wait_healthy(url: str, children: dict[str, subprocess.Popen[bytes]], timeout: float = 60) -> bool:
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


if __name__ == "__main__":
    main()
