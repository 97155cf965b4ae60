"""Running Tasklift code in a process of its own, against this test session's database, Redis and sandbox,
so that a test can kill it as an operator or the kernel would (SIGKILL: no cleanup of any kind)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
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
