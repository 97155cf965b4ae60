"""The one error tree. Services raise these; the API and the views turn them into messages."""

from __future__ import annotations

from typing import Any


def error_body(code: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's error shape: a stable `code`, a `message` for people, and what else a program needs."""
    return {"code": code, "message": message, "extra": extra or {}}


class ApplicationError(Exception):
    """An error a person can act on. `code` is stable for programs, `message` is for people."""

    status = 400

    def __init__(self, message: str, *, code: str = "error", extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra or {}


class NotFoundError(ApplicationError):
    status = 404


class ConflictError(ApplicationError):
    """Valid by itself, but not with what the resource is now (a time for a task that has no date)."""

    status = 409


class WaitError(ApplicationError):
    """Asked again after `retry_after` seconds, the request can succeed: answered with Retry-After."""

    def __init__(self, message: str, *, retry_after: int, code: str) -> None:
        super().__init__(message, code=code, extra={"retry_after": retry_after})
        self.retry_after = retry_after


class RateLimitedError(WaitError):
    status = 429

    def __init__(self, message: str, *, retry_after: int, code: str = "rate_limited") -> None:
        super().__init__(message, retry_after=retry_after, code=code)


class UnavailableError(WaitError):
    """A part the request needs (Redis, the broker) is out of reach for a moment: a 503, never a 500."""

    status = 503

    def __init__(self, message: str, *, retry_after: int, code: str = "unavailable") -> None:
        super().__init__(message, retry_after=retry_after, code=code)
