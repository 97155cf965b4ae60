"""The Celery app. Background work lives in `<app>/jobs.py`, so "task" always means a to-do item."""

import ctypes
import ctypes.util
import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init

from config import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)

broker.install()  # before any connection: a worker that outlives a Redis restart (config/broker.py)
app = Celery("tasklift")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(related_name="jobs")


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
