"""The Celery app. Background work lives in `<app>/jobs.py`, so "task" always means a to-do item."""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("tasklift")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(related_name="jobs")


@worker_init.connect
def _warm_up(**kwargs: Any) -> None:
    """Before the worker takes jobs (and before a prefork pool forks, so its children share it): load
    what the first extraction run would otherwise load in the middle of its batches."""
    from integrations.mail.clean import clean_warm_up

    clean_warm_up()
