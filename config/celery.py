"""The Celery app. Background work lives in `<app>/jobs.py`, so "task" always means a to-do item."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)

app = Celery("tasklift")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(related_name="jobs")


@worker_init.connect
def _warm_up(**kwargs: Any) -> None:
    """Before the worker takes jobs (and before a prefork pool forks, so its children share it): load
    what the first extraction run would otherwise load in the middle of its batches."""
    from integrations.mail.clean import clean_warm_up

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
