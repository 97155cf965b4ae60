"""A process that cannot start because of its settings says so once, clearly, and exits with its own code.

Every check of a setting raises ImproperlyConfigured with a sentence that names the setting and never its value
("TASKLIFT_ENCRYPTION_KEYS: key 2 of 2 is not a Fernet key …"). At the start of web, worker and beat that
sentence becomes one log line (JSON in production, like every line), is written where the supervisor asked
(`TASKLIFT_EXIT_REASON_FILE`, config/supervise.py), and the process exits with EXIT_SETTINGS, 78 (sysexits.h's
EX_CONFIG): a supervisor tells "the settings are wrong, restarting will not help" from a crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.logconfig import log_line
from config.version import version

EXIT_SETTINGS = 78
REASON_FILE_VARIABLE = "TASKLIFT_EXIT_REASON_FILE"
ROOT = Path(__file__).resolve().parent.parent


def settings_problem() -> str | None:
    """What is wrong with this environment's settings (the sentence of their check), or None: the settings
    module read here, as every process reads it."""
    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018 — reading one setting loads them all
    except ImproperlyConfigured as error:
        return str(error)
    return None


def refuse_to_start(role: str, problem: str) -> None:
    """The one line, the reason for the supervisor, and exit 78."""
    line = log_line(
        "tasklift.start",
        logging.CRITICAL,
        f"Tasklift {version()} cannot start {role}: {problem}",
        role=role,
        version=version(),
        setting_error=problem,
    )
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    reason_file = os.environ.get(REASON_FILE_VARIABLE, "").strip()
    if reason_file:
        with contextlib.suppress(OSError):  # the line above says it too
            Path(reason_file).write_text(problem)
    raise SystemExit(EXIT_SETTINGS)


def settings_or_exit(role: str) -> None:
    """In a worker or beat, before anything else: the settings load, or the process exits 78 saying why."""
    problem = settings_problem()
    if problem is not None:
        refuse_to_start(role, problem)


def settings_or_exit_apart(role: str) -> None:
    """The same for gunicorn's master, which must not import the settings itself (a `reload` forks new workers
    from it, which would keep its modules, the old code's, and in development it would start the embedded
    servers): the settings are read by a short process of their own, with this one's environment."""
    production = os.environ.get("TASKLIFT_MODE", "").strip() == "production"
    named = all(os.environ.get(name, "").strip() for name in ("DATABASE_URL", "REDIS_URL"))
    if not (production or named):
        return  # settings without servers named start the embedded ones: read by the web's processes only
    check = subprocess.run(
        [sys.executable, "-c", "from config.startup import settings_problem; print(settings_problem() or '')"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Anything else than a setting's sentence (the code itself failing to import) is gunicorn's to report.
    lines = check.stdout.strip().splitlines()
    if check.returncode == 0 and lines:
        refuse_to_start(role, lines[-1])
