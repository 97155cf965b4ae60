"""Running Tasklift code in a process of its own, against this test session's database, Redis and sandbox,
so that a test can kill it as an operator or the kernel would (SIGKILL: no cleanup of any kind)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that shares this test's database (the test database, not the
    development one), Redis database, Celery queue and sandbox."""
    database_url = urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{connection.settings_dict['NAME']}"))
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": database_url,
        "TEST_DATABASE_NAME": connection.settings_dict["NAME"],
        **extra,
    }


def deployment_benchmark(name: str, *args: str, timeout: float) -> tuple[int, dict[str, Any], str]:
    """benchmarks/<name>.py, a benchmark of a whole deployment (benchmarks/production.py, upgrade.py), in a
    process group of its own: its exit status, the figures of its last line and its output. With the safety nets'
    waits shortened (a run whose queued job went with Redis is sent again quickly). Past `timeout` it is told to
    stop (it stops everything it started) and the test fails."""
    import contextlib
    import json
    import signal

    import pytest

    env = {**os.environ, "EXTRACTION_QUEUED_STALE_SECONDS": "15", "EXTRACTION_REAPER_SECONDS": "5"}
    process = subprocess.Popen(
        [sys.executable, f"benchmarks/{name}.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)  # the benchmark stops everything it started, then exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=120)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"the smoke form of {name} did not finish within {timeout:g} s")
    lines = stdout.strip().splitlines()
    try:
        figures = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"no JSON line at the end (status {process.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return process.returncode, figures, stdout[-3000:]


def run_extract(email: str, *, crash_point: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`manage.py extract EMAIL` in its own process; with `crash_point` ("name[:n]", see
    extraction/crashpoints.py) it kills itself there. A killed process has returncode -9."""
    env = process_env(EXTRACTION_CRASH_POINT=crash_point)
    return subprocess.run(
        [sys.executable, "manage.py", "extract", email],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Forker:
    """A process that imports Tasklift once, then forks a fresh child for each run or job asked of it.

    Starting `manage.py` costs seconds of imports (google-genai alone is over one); a matrix of crashes
    pays that once. Each child is still a process of its own, with its own database connections and lease,
    and dies by SIGKILL exactly as a `manage.py` one would. The forking process itself holds no connection
    and no thread, so a child inherits nothing that runs. Stop it with `close()`.
    """

    def __init__(self, **env: str) -> None:
        """`env`: settings for every child, as environment variables (e.g. EXTRACTION_LLM_CONCURRENCY)."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.processes"],
            cwd=ROOT,
            env=process_env(**env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def extract(self, email: str, *, crash_point: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`manage.py extract EMAIL` in a child (see run_extract)."""
        return self._ask({"command": "extract", "email": email, "crash_point": crash_point}, timeout)

    def job(self, run_id: int, *, crash_point: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """What a worker does with a queued run's job (`extraction_run_job`), in a child."""
        return self._ask({"command": "job", "run_id": run_id, "crash_point": crash_point}, timeout)

    def _ask(self, request: dict[str, object], timeout: float) -> subprocess.CompletedProcess[str]:
        import json
        import select

        assert self.process.stdin is not None and self.process.stdout is not None
        before = _sessions()
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"the forking process gave no answer for {request} (exit {self.process.poll()})")
        answer = json.loads(line)
        if answer["returncode"] < 0:
            # A killed child's sessions end when PostgreSQL notices its sockets closed, a moment after the
            # child is gone: till then its advisory lock holds, and its runner looks alive to the reaper.
            from tests.waiting import wait_for

            wait_for(lambda: _sessions() <= before, timeout=30, what="the killed child's database sessions to end")
        return subprocess.CompletedProcess([str(request)], answer["returncode"], answer["output"], answer["output"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _sessions() -> set[int]:
    """The server processes of this database's sessions now (the children's, this test's and any other's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {row[0] for row in cursor.fetchall()}


def _serve_forks() -> None:
    """The forking process (`python -m tests.processes`): one JSON request a line in, one answer a line out."""
    import json
    import tempfile
    import traceback

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from extraction.jobs import extraction_run_job

    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile() as output:
            pid = os.fork()
            if pid == 0:  # the child: one run or job, then out without any cleanup of the parent's
                os.dup2(output.fileno(), 1)
                os.dup2(output.fileno(), 2)
                code = 0
                try:
                    settings.EXTRACTION_CRASH_POINT = request["crash_point"]
                    if request["command"] == "extract":
                        call_command("extract", request["email"])
                    else:
                        extraction_run_job.apply(args=[request["run_id"]], throw=True)
                except BaseException:
                    traceback.print_exc()
                    code = 1
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            output.seek(0)
            text = output.read().decode(errors="replace")[-4000:]
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "output": text}), flush=True)


if __name__ == "__main__":
    _serve_forks()


def run_mail_job(
    job: str, *, relay_port: int, local_dir: str, crash_point: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """A reminders job (`digest_chunk_job`, `reminder_chunk_job`) run once in its own process, sending through
    the relay at `relay_port` (sandbox/smtp.py); with `crash_point` it kills itself there (returncode -9)."""
    child = process_env(
        TASKLIFT_LOCAL_DIR=local_dir,
        REDIS_URL=settings.REDIS_URL,
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(relay_port),
        EMAIL_USE_TLS="false",
        EXTRACTION_CRASH_POINT=crash_point,
        **env,
    )
    script = f"from reminders.jobs import {job}; print({job}.apply().get())"
    command = [sys.executable, "manage.py", "shell", "-c", script]
    return subprocess.run(command, cwd=ROOT, env=child, capture_output=True, text=True, timeout=180)
