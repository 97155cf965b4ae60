"""The one error tree. Services raise these; the API and the views turn them into messages."""

from __future__ import annotations

from typing import Any


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


class RateLimitedError(ApplicationError):
    status = 429

    def __init__(self, message: str, *, retry_after: int, code: str = "rate_limited") -> None:
        super().__init__(message, code=code, extra={"retry_after": retry_after})
        self.retry_after = retry_after
