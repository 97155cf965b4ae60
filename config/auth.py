"""How the API knows who calls: a personal access token (`Authorization: Bearer tl_…`) for programs, or the
browser's session with its CSRF token. No credentials at all is a 401; a session without CSRF on a write is
a 403, never the other way round."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from accounts.models import User
from accounts.services import access_token_authenticate
from config.errors import ApplicationError


class NotAuthenticatedError(ApplicationError):
    status = 401


class ForbiddenError(ApplicationError):
    status = 403


class BearerToken(HttpBearer):
    """A personal access token. A token that is sent but not valid is refused outright, rather than the
    request falling back to a session the program did not mean to use."""

    def __call__(self, request: HttpRequest) -> User | None:
        header = request.headers.get("Authorization", "")
        scheme, _, secret = header.partition(" ")
        if not header:
            return None
        if scheme.lower() != "bearer" or not secret.strip():
            raise NotAuthenticatedError(
                "Send a personal access token as 'Authorization: Bearer <token>'.", code="invalid_token"
            )
        return self.authenticate(request, secret.strip())

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = access_token_authenticate(secret=token)
        if user is None:
            raise NotAuthenticatedError(
                "This access token is not valid: it may have been revoked. Create a new one on the API.",
                code="invalid_token",
            )
        request.user = user
        request.auth_by_token = True  # type: ignore[attr-defined]
        try:  # as the session's middleware does for pages (and undoes after every request)
            timezone.activate(user.timezone)
        except (ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError: a zone the system forgot
            timezone.deactivate()
        return user


class SessionWithCsrf(APIKeyCookie):
    """The signed-in browser. Anonymous is checked before CSRF, so a caller without any credentials learns
    that it must authenticate, not that a CSRF token is missing."""

    param_name = settings.SESSION_COOKIE_NAME

    def __call__(self, request: HttpRequest) -> Any:
        user = request.user
        if not user.is_authenticated:
            return None
        if not getattr(request, "_ninja_csrf_exempt", False) and check_csrf(request) is not None:
            raise ForbiddenError(
                "The CSRF token is missing or wrong. A browser sends the csrftoken cookie's value as the "
                "X-CSRFToken header; a program uses a personal access token instead.",
                code="csrf_failed",
            )
        return user

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return request.user if request.user.is_authenticated else None  # pragma: no cover (see __call__)


api_auth = [BearerToken(), SessionWithCsrf()]


def require_session(request: HttpRequest) -> None:
    """Some things only the person at a browser may do (make or revoke tokens), so that a leaked token
    cannot make itself a successor."""
    if getattr(request, "auth_by_token", False):
        raise ForbiddenError(
            "Access tokens can only be managed when signed in with a browser, not with a token.",
            code="session_required",
        )
