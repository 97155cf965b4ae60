"""While Redis (the cache, the counters, Celery's broker) or PostgreSQL is out of reach (a restart), every
request that needs it is answered 503 with Retry-After, never a 500: a page saying to try again for a person,
the API's error shape (`unavailable`) for a program, and nothing half-done (a run whose job could not be sent
is ended at once, extraction_run_send).

Only the errors of a part being out of reach are turned into 503s, so that a bug stays a 500 with its
traceback in the log. What raises them: redis-py (the cache, django-ratelimit, the sliding counters as
CountingUnavailable), kombu once Celery's publish retries are spent, and the database's driver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import kombu.exceptions
import redis.exceptions
from django import db
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from accounts.counting import CountingUnavailable
from config.errors import UnavailableError, error_body

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 30  # about a restart of PostgreSQL or Redis

UNAVAILABLE = (
    db.OperationalError,
    db.InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
    CountingUnavailable,
)

MESSAGE = "Tasklift cannot take this request right now: a part of it is restarting. Try again in a moment."


def unavailable(*, retry_after: int = RETRY_AFTER_S) -> UnavailableError:
    """The error to raise where a counter or the broker could not be reached."""
    return UnavailableError(MESSAGE, retry_after=retry_after)


def unavailable_response(request: HttpRequest, *, retry_after: int = RETRY_AFTER_S) -> HttpResponse:
    """The 503 for this request: JSON for the API, a fragment for htmx (shown above the page), else a page."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse(error_body("unavailable", MESSAGE, {"retry_after": retry_after}), status=503)
    elif request.headers.get("HX-Request") == "true":
        response = render(request, "_unavailable_notice.html", {"wait_seconds": retry_after}, status=503)
        response["HX-Retarget"] = "#main"
        response["HX-Reswap"] = "afterbegin"
    else:
        response = render(request, "accounts/unavailable.html", {"wait_seconds": retry_after}, status=503)
    response["Retry-After"] = str(retry_after)
    return response


class UnavailableMiddleware:
    """Turns the errors of a part out of reach, raised by any view, into unavailable_response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, UnavailableError):
            return unavailable_response(request, retry_after=exception.retry_after)
        if not isinstance(exception, UNAVAILABLE):
            return None
        logger.warning(
            "%s %s answered 503: %s.%s",
            request.method,
            request.path,
            type(exception).__module__,
            type(exception).__name__,
        )
        return unavailable_response(request)
