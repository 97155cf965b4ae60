"""gunicorn's settings for the web process (the Procfile's `web`), read from the environment like the app's.

`PORT` (default 8000) and `GUNICORN_BIND` say where it listens, `WEB_CONCURRENCY` how many processes it forks.
"""

import os
from typing import Any

bind = os.environ.get("GUNICORN_BIND") or f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = timeout

# Metrics (config/metrics.py): every worker writes its counts under PROMETHEUS_MULTIPROC_DIR, the directory
# config/settings.py names by default (TASKLIFT_LOCAL_DIR/metrics); the master needs it too, to tidy after a
# worker that exits.
os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR",
    os.path.join(
        os.environ.get("TASKLIFT_LOCAL_DIR", "").strip() or os.path.join(os.path.dirname(__file__), ".local"), "metrics"
    ),
)


def child_exit(server: Any, worker: Any) -> None:
    """A worker is gone: its live gauges go with it (its counters stay counted)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


# gunicorn's error and access logs through our logging configuration (LOG_FORMAT, LOG_LEVEL): one JSON
# object a line in production, redacted (config/logfilters.py: no token, OAuth code or state, or secret of a reset
# or confirmation link reaches the access log, in the request line or the Referer).
# Setting logconfig_dict is also what turns gunicorn's access log on.
from config.logconfig import log_settings, logging_config  # noqa: E402

_log_format, _log_level = log_settings()
logconfig_dict = logging_config(log_format=_log_format, level=_log_level)

from gunicorn.glogging import Logger  # noqa: E402


class StartLogger(Logger):
    """gunicorn's logger, which logs first, once its configuration is set, which Tasklift this web runs
    (config/version.py), before gunicorn's own `Starting gunicorn` line."""

    started = False  # once: gunicorn sets its logger up again on a reload (SIGHUP), in the same master

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        if StartLogger.started:
            return
        StartLogger.started = True
        from config.version import log_start

        log_start("web", bind=",".join(cfg.bind), processes=int(cfg.workers))


logger_class = StartLogger


def on_starting(server: Any) -> None:
    """Wrong settings stop the web before it forks anything: one line naming the setting, exit 78
    (config/startup.py), which its supervisor does not restart in a loop."""
    from config.startup import settings_or_exit_apart

    settings_or_exit_apart("web")
