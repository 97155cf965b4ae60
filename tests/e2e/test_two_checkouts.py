"""Two `make run`s side by side, as two checkouts of a newcomer would be: each `python -m config.run` with its own
port, sandbox ports and TASKLIFT_LOCAL_DIR (so its own embedded PostgreSQL and Redis), both running at once.
In each, the whole demo journey in Chromium: log in, give AI consent, connect Gmail and Outlook through the
sandbox consent pages, "Extract now", tasks. Then Ctrl-C and `config.embedded stop` leave nothing running.

Nothing of the test session is shared with them: not its database, Redis, sandbox or settings. The children get
the environment of a person's shell, without what config/settings_test.py put into this process's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import expect

from config.ports import free_port
from config.settings_test import PER_RUN_ENV
from tests.e2e.conftest import (
    chromium,
    connect_gmail,
    connect_outlook,
    expect_tasks_listed,
    log_in_and_consent,
    new_page,
    press_extract_now,
    watch_errors,
)

# What config/settings_test.py sets in os.environ (and so in every child's), plus what would point a child
# at shared servers or another instance; each child gets its own values of the ones it needs.
NOT_INHERITED = (
    *PER_RUN_ENV,
    "REDIS_DB",
    "GEMINI_RETRY_INITIAL_DELAY_S",
    "DATABASE_URL",
    "REDIS_URL",
    "SITE_URL",
    "PORT",
    "TASKLIFT_LOCAL_DIR",
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)
HEALTHY_WITHIN_S = 120  # a first start initialises PostgreSQL; two of them share the machine's cores
STOPPED_WITHIN_S = 60


@dataclass
class Checkout:
    """One `python -m config.run`, the leader of its own process group."""

    name: str
    local_dir: Path
    port: int = field(default_factory=free_port)
    sandbox_port: int = field(default_factory=free_port)
    tls_port: int = field(default_factory=free_port)
    imap_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sandbox_url(self) -> str:
        return f"http://127.0.0.1:{self.sandbox_port}"

    @property
    def output(self) -> Path:
        return self.local_dir / "make-run.out"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        env.update(
            PORT=str(self.port),  # and SITE_URL follows it: `make run` derives it from PORT
            SANDBOX_URL=self.sandbox_url,
            SANDBOX_TLS_URL=f"https://127.0.0.1:{self.tls_port}",
            DEMO_IMAP_PORT=str(self.imap_port),  # both start at once: each its own demo IMAP server's port
            TASKLIFT_LOCAL_DIR=str(self.local_dir),
            DJANGO_SETTINGS_MODULE="config.settings",
        )
        return env

    def start(self) -> None:
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "config.run"],
                cwd=settings.BASE_DIR,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def interrupt(self) -> int:
        """Ctrl-C, as a person's terminal sends it: SIGINT to the foreground process group."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=STOPPED_WITHIN_S)

    def embedded_stop(self) -> subprocess.CompletedProcess[str]:
        """`make stop` of this checkout: its PostgreSQL and Redis, and anything `make run` left behind."""
        return subprocess.run(
            [sys.executable, "-m", "config.embedded", "stop"],
            cwd=settings.BASE_DIR,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def marks(self) -> re.Pattern[str]:
        """What in a command line says a process belongs to this checkout (whole words: port 8001 is not 80012)."""
        marks = [str(self.local_dir), f"127.0.0.1:{self.port}", f"--port {self.sandbox_port}"]
        marks.append(f"--tls-port {self.tls_port}")
        return re.compile("|".join(f"{re.escape(mark)}(?=[\\s/]|$)" for mark in marks))

    def leftovers(self, family: dict[int, Process] | None = None) -> dict[int, str]:
        """Processes of this checkout still alive, by pid: those whose command line says so (postgres -D DIR,
        redis-server's socket, runserver's address, the sandbox's ports), those whose environment holds its
        TASKLIFT_LOCAL_DIR (the Celery worker's command line names neither; redis-server overwrites the memory
        /proc shows as its environment), and any process of `family` still alive (PostgreSQL's backends,
        a Celery pool: orphans name nothing of the checkout once their parent is gone)."""
        family = family or {}
        marks = self.marks()
        env_mark = f"TASKLIFT_LOCAL_DIR={self.local_dir}".encode()
        found: dict[int, str] = {}
        for process in _processes():
            if marks.search(process.args) or family.get(process.pid) == process:
                found[process.pid] = process.args
                continue
            with contextlib.suppress(OSError):  # gone meanwhile, or not ours to read
                if env_mark in Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0"):
                    found[process.pid] = process.args
        return found

    def family(self) -> dict[int, Process]:
        """This checkout's processes and all their descendants, now."""
        processes = {process.pid: process for process in _processes()}
        members = set(self.leftovers())
        grew = True
        while grew:
            children = {pid for pid, process in processes.items() if process.ppid in members} - members
            members |= children
            grew = bool(children)
        return {pid: processes[pid] for pid in members if pid in processes}

    def explain(self) -> str:
        parts = [f"--- {self.name}: {self.output}", _tail(self.output)]
        logs = self.local_dir / "logs"
        for log in sorted(logs.glob("*.log")) if logs.exists() else []:
            parts += [f"--- {self.name}: {log}", _tail(log)]
        return "\n".join(parts)

    def kill_everything_left(self) -> None:
        """After a failed test: end whatever of this checkout still runs (all of it started by this test)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.embedded_stop()
        for pid in self.leftovers():  # processes this test started, found as the test itself finds them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    started: int  # clock ticks after boot: a pid used again by another process does not compare equal
    args: str = field(compare=False)


def _processes() -> Iterator[Process]:
    """Every process but this one, kernel threads and zombies."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            # /proc/PID/stat is "pid (comm) state ppid ...", starttime the 22nd field; comm may hold spaces.
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            ppid, started = int(fields[1]), int(fields[19])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if args:  # empty for kernel threads and zombies
            yield Process(int(proc.name), ppid, started, args)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(none)"


@pytest.fixture
def two_checkouts() -> Iterator[list[Checkout]]:
    """Two `make run`s started together, both healthy; whatever the test leaves of them is ended afterwards."""
    checkouts = [Checkout(name, Path(tempfile.mkdtemp(prefix=f"tasklift-{name}-"))) for name in ("first", "second")]
    try:
        for checkout in checkouts:
            checkout.start()
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        waiting = list(checkouts)
        while waiting and time.monotonic() < deadline:
            for checkout in list(waiting):
                assert checkout.process is not None
                if checkout.process.poll() is not None:
                    pytest.fail(
                        f"{checkout.name} exited with {checkout.process.returncode} before it was healthy\n"
                        + checkout.explain()
                    )
                if checkout.healthy():
                    waiting.remove(checkout)
            time.sleep(0.5)
        if waiting:
            pytest.fail(
                f"not healthy within {HEALTHY_WITHIN_S} s: {[c.name for c in waiting]}\n"
                + "\n".join(c.explain() for c in waiting)
            )
        yield checkouts
    finally:
        for checkout in checkouts:
            checkout.kill_everything_left()
            if not checkout.leftovers():
                shutil.rmtree(checkout.local_dir, ignore_errors=True)


def demo_journey(page: Any, checkout: Checkout) -> None:
    """Log in, give AI consent, connect both demo mailboxes, Extract now: tasks of both appear."""
    page_errors, server_errors = watch_errors(page)
    log_in_and_consent(page, checkout.url)
    connect_gmail(page, checkout.url, sandbox_url=checkout.sandbox_url)
    connect_outlook(page, checkout.url, sandbox_url=checkout.sandbox_url)
    expect(page.locator("#mailbox-list > li")).to_have_count(2)

    ended = press_extract_now(page, checkout.url)
    status = page.locator("#run-status")
    assert ended == "succeeded", f"{checkout.name}: the run ended {ended}: {status.inner_text()}"
    expect_tasks_listed(page)
    links = [
        str(href)
        for href in page.locator("#task-list > li.task a.mailbox-link").evaluate_all(
            "links => links.map(link => link.getAttribute('href'))"
        )
    ]
    assert links, f"{checkout.name}: no task lists its email"
    assert any(link.startswith("https://mail.google.com/") for link in links), f"{checkout.name}: no Gmail task"
    assert any(link.startswith("https://outlook.office365.com/") for link in links), f"{checkout.name}: no Outlook"
    expect(status).to_contain_text("tasks created")
    assert page_errors == [], f"{checkout.name}: {page_errors}"
    assert server_errors == [], f"{checkout.name}: {server_errors}"


@pytest.mark.e2e
def test_two_checkouts_run_side_by_side_and_stop_without_leftovers(two_checkouts: list[Checkout]) -> None:
    with chromium() as browser:
        for checkout in two_checkouts:
            # A context each: cookies are per host, not per port, so the two apps on 127.0.0.1 would
            # otherwise overwrite each other's session cookie.
            page = new_page(browser)
            try:
                demo_journey(page, checkout)
            except AssertionError as failure:
                raise AssertionError(f"{failure}\n{checkout.explain()}") from failure
            finally:
                page.context.close()
        # Both are still healthy after both journeys: neither disturbed the other.
        assert [c.name for c in two_checkouts if not c.healthy()] == []

    families = {checkout.name: checkout.family() for checkout in two_checkouts}
    for checkout in two_checkouts:
        returncode = checkout.interrupt()
        assert returncode == 0, f"{checkout.name}: `make run` exited {returncode} on Ctrl-C\n{checkout.explain()}"
        assert "Tasklift stopped" in checkout.output.read_text(errors="replace"), checkout.explain()
        stopped = checkout.embedded_stop()
        assert stopped.returncode == 0, f"{checkout.name}: `make stop` failed:\n{stopped.stdout}{stopped.stderr}"
    for checkout in two_checkouts:
        left = checkout.leftovers(families[checkout.name])
        assert left == {}, f"{checkout.name} left processes running: {left}\n{checkout.explain()}"
