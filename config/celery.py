"""The Celery app. Background work lives in `<app>/jobs.py`, so "task" always means a to-do item."""

import contextlib
import ctypes
import ctypes.util
import logging
import logging.config
import os
import sys
from pathlib import Path
from typing import Any

from celery import Celery
from celery.apps import worker as celery_worker_app
from celery.signals import (
    celeryd_init,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)

from config import broker
from config.heartbeat import WorkerHeartbeat
from config.logcontext import log_job_set
from config.startup import settings_or_exit
from config.version import log_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def _celery_role() -> str | None:
    """`worker` or `beat` when this process is `celery … worker` or `celery … beat`, else None."""
    if not sys.argv or Path(sys.argv[0]).name != "celery":
        return None
    return next((word for word in sys.argv[1:] if word in ("worker", "beat")), None)


_role = _celery_role()
if _role is not None:
    settings_or_exit(_role)  # wrong settings: one line naming the setting, exit 78, before Celery reads them

logger = logging.getLogger(__name__)

broker.install()  # before any connection: a worker that outlives a Redis restart (config/broker.py)
app = Celery("tasklift")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(related_name="jobs")
app.steps["consumer"].add(WorkerHeartbeat)  # what /readyz reads to know a worker is alive (config/heartbeat.py)


@celeryd_init.connect
@setup_logging.connect
def _logging(**kwargs: Any) -> None:
    """The worker and beat log through our LOGGING (one handler, redacting, with the run ids, LOG_FORMAT),
    not Celery's own handlers: without a receiver of setup_logging Celery gives its task and multiprocessing
    loggers handlers of their own, which neither redact nor write JSON. LOG_LEVEL rules, not --loglevel.
    Set up already when the worker starts (celeryd_init), so that its first warnings are log lines too."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    logging.captureWarnings(True)
    sender = kwargs.get("sender")  # celeryd_init: the worker's node name
    _log_start(str(sender) if isinstance(sender, str) else None)


_started = False


def _log_start(hostname: str | None) -> None:
    """Once a process, the first line it logs: the version, and what Celery's banner (off: `--quiet` in the
    Procfile; not JSON) would have said of a worker."""
    global _started
    if _started:
        return
    _started = True
    if hostname is None:  # setup_logging alone: beat (a worker's celeryd_init comes first, with its name)
        log_start(_role or "worker")
        return
    concurrency = app.conf.worker_concurrency or os.cpu_count() or 1
    log_start("worker", hostname=hostname, concurrency=int(concurrency), queue=str(app.conf.task_default_queue))


def _say(msg: str, f: Any = sys.__stderr__) -> None:
    """Celery's few words outside its logging (`worker: Warm shutdown (MainProcess)` on SIGTERM), written as one
    log line of ours (JSON in production) rather than as bare text. Like Celery's own: formatted without the
    logging module's locks and written with one os.write, as it runs inside a signal handler."""
    from config.logconfig import log_line

    with contextlib.suppress(OSError, AttributeError, ValueError):  # losing it must not stop the shutdown
        os.write(f.fileno(), (log_line("celery.apps.worker", logging.INFO, msg.strip()) + "\n").encode())


celery_worker_app.safe_say = _say


@task_prerun.connect
def _job_started(task_id: str | None = None, **kwargs: Any) -> None:
    log_job_set(task_id)  # every line of a job carries Celery's task id


@task_postrun.connect
def _job_ended(**kwargs: Any) -> None:
    log_job_set(None)


M_ARENA_MAX = -8  # glibc's mallopt parameter: how many heaps malloc may keep


def malloc_arenas_limit(arenas: int = 2) -> bool:
    """At most `arenas` malloc heaps in this process (and the processes it forks). glibc gives threads that
    allocate at the same time heaps of their own, up to eight per core; a run's threads (its Gemini calls,
    its fetch ahead) leave each fragmented, and a long run's memory crept with the mail it read (about 1 KB
    an email, measured: benchmarks/README.md). Takes effect for heaps made after it: call it before threads
    start. False where the C library is not glibc (nothing done)."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    return bool(mallopt and mallopt(M_ARENA_MAX, arenas))


@worker_init.connect
def _warm_up(**kwargs: Any) -> None:
    """Before the worker takes jobs (and before a prefork pool forks, so its children share it): bound
    malloc's heaps, and load what the first extraction run would otherwise load in the middle of its batches."""
    from integrations.mail.clean import clean_warm_up

    malloc_arenas_limit()
    clean_warm_up()


@worker_process_init.connect
def _make_clients(**kwargs: Any) -> None:
    """In each process of a prefork pool, once forked (its HTTP connections are its own): the Gemini client
    its runs share (extraction/llm.py gemini_client), made before the first run rather than in it."""
    from extraction.llm import gemini_client

    try:
        gemini_client()
    except Exception:  # a misconfiguration: the first run reports it; the worker still starts
        logger.exception("could not make the Gemini client at the worker's start")


@worker_process_shutdown.connect
def _metrics_process_dead(pid: int | None = None, **kwargs: Any) -> None:
    """A pool process exits: its live gauges go with it (its counters stay counted, config/metrics.py)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
