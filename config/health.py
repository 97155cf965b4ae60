"""`/healthz` and `/readyz`.

`/healthz` is liveness: this web process answers, and so do the database, the cache and the broker it needs
(three round trips). It stays what `make run`, the tests and supervisors have always waited on.

`/readyz` is readiness of the whole deployment, for a load balancer or an operator: 200 only when the
database and Redis answer, this process can serve its static files, a worker is alive and beat ticks; else
503 naming each failing part with what to do. A few round trips, never cached. The reasons are sentences
written here, never an exception's text (which may carry a host, a user or a path); the details go to the log.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestStaticFilesStorage, staticfiles_storage
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.celery import app as celery_app
from config.heartbeat import beat_tick_age, readiness_redis, workers_alive
from config.version import version

logger = logging.getLogger(__name__)


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _cache() -> None:
    cache.set("healthz", "ok", timeout=10)
    if cache.get("healthz") != "ok":
        raise RuntimeError("the cache did not return what was written")


def _broker() -> None:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


CHECKS: dict[str, Callable[[], None]] = {"database": _database, "cache": _cache, "broker": _broker}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    results: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # a health check reports every failure instead of raising
            results[name] = f"error: {type(exc).__name__}"
    healthy = all(v == "ok" for v in results.values())
    return JsonResponse({"status": "ok" if healthy else "error", "checks": results}, status=200 if healthy else 503)


# Readiness ------------------------------------------------------------------------------------------
MANIFEST_PROBE = "css/app.css"  # every page links it: missing from the manifest, every page is a 500


class NotReady(Exception):
    """A part is not ready; the message is what /readyz shows (written for a person, never secret)."""


def _ready_database() -> str:
    try:
        _database()
    except Exception as error:
        logger.warning("readyz: the database did not answer: %r", error)
        raise NotReady(
            f"the database did not answer ({type(error).__name__}); check DATABASE_URL and PostgreSQL"
        ) from error
    return "ok"


def _ready_redis() -> str:
    try:
        readiness_redis().ping()
    except Exception as error:
        logger.warning("readyz: Redis did not answer: %r", error)
        raise NotReady(
            f"Redis did not answer ({type(error).__name__}); check REDIS_URL and the Redis server"
        ) from error
    return "ok"


def _ready_static() -> str:
    if not settings.PRODUCTION:
        return "ok (finders)"  # development serves static files from the source folders
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    try:
        paths = json.loads(manifest.read_text())["paths"]
    except FileNotFoundError:
        raise NotReady(
            "no static manifest (STATIC_ROOT/staticfiles.json): run `manage.py collectstatic --noinput`"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("readyz: the static manifest %s cannot be read: %r", manifest, error)
        raise NotReady(
            "the static manifest (STATIC_ROOT/staticfiles.json) cannot be read: run collectstatic again"
        ) from error
    if MANIFEST_PROBE not in paths:
        raise NotReady(f"the static manifest does not name {MANIFEST_PROBE}: run `manage.py collectstatic --noinput`")
    try:
        # What a page does. The storage reads the manifest once per process, so a process that started before
        # collectstatic wrote it keeps failing every page until it is restarted.
        storage = cast(ManifestStaticFilesStorage, staticfiles_storage)  # production's (settings.STORAGES)
        stored = storage.stored_name(MANIFEST_PROBE)
    except ValueError:
        raise NotReady("this web process started before collectstatic wrote the manifest: restart it") from None
    if not storage.exists(stored):
        raise NotReady(f"the manifest names {stored}, which is not in STATIC_ROOT: run collectstatic again")
    return "ok (manifest)"


def _ready_worker() -> str:
    window = settings.READYZ_WORKER_SECONDS
    try:
        ages = workers_alive(within_s=window)
    except Exception as error:
        logger.warning("readyz: worker heartbeats unreadable: %r", error)
        raise NotReady("cannot tell: the workers' heartbeats are kept in Redis, which did not answer") from error
    if not ages:
        raise NotReady(
            f"no worker has written its heartbeat in the last {window} s (READYZ_WORKER_SECONDS): "
            "start `celery -A config worker`, or read the workers' logs"
        )
    return f"ok ({len(ages)} seen in the last {window} s)"


def _ready_beat() -> str:
    window = settings.READYZ_BEAT_SECONDS
    try:
        age = beat_tick_age()
    except Exception as error:
        logger.warning("readyz: beat's tick unreadable: %r", error)
        raise NotReady("cannot tell: beat's last tick is kept in Redis, which did not answer") from error
    if age is None or age > window:
        last = "none in the last day" if age is None else f"the last {int(age)} s ago"
        raise NotReady(
            f"beat has not ticked within {window} s (READYZ_BEAT_SECONDS; {last}): "
            "start one `celery -A config beat`, or read its log"
        )
    return f"ok (last tick {int(age)} s ago)"


def _ready_processes() -> str:
    """Under `config.supervise --status-file` (SUPERVISE_STATUS_FILE, which it gives its processes): none of
    them left stopped because its settings are wrong (the sentence naming the setting, config/startup.py)."""
    path = os.environ.get("SUPERVISE_STATUS_FILE", "").strip()
    try:
        processes = json.loads(Path(path).read_text())["processes"]
        given_up = {label: p["gave_up"] for label, p in processes.items() if p.get("gave_up")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        logger.warning("readyz: the supervisor's status file %s cannot be read: %r", path, error)
        raise NotReady("the supervisor's status file (SUPERVISE_STATUS_FILE) cannot be read") from error
    if given_up:
        raise NotReady(
            "; ".join(f"{label} is stopped: {why}" for label, why in sorted(given_up.items()))
            + " (fix the settings file, then send the supervisor SIGHUP)"
        )
    return f"ok ({len(processes)} supervised)"


READY_CHECKS: dict[str, Callable[[], str]] = {
    "database": _ready_database,
    "redis": _ready_redis,
    "static": _ready_static,
    "worker": _ready_worker,
    "beat": _ready_beat,
}


def ready_checks() -> dict[str, Callable[[], str]]:
    """The checks of this web: the supervisor's processes too when it runs under one with a status file."""
    if os.environ.get("SUPERVISE_STATUS_FILE", "").strip():
        return {**READY_CHECKS, "processes": _ready_processes}
    return READY_CHECKS


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    results: dict[str, str] = {}
    for name, check in ready_checks().items():
        try:
            results[name] = check()
        except NotReady as not_ready:
            results[name] = f"error: {not_ready}"
        except Exception as error:  # a readiness check reports every failure instead of raising
            logger.exception("readyz: the %s check failed", name)
            results[name] = f"error: the check itself failed ({type(error).__name__})"
    ready = all(value.startswith("ok") for value in results.values())
    return JsonResponse(
        {"status": "ok" if ready else "error", "version": version(), "checks": results}, status=200 if ready else 503
    )
