"""Per-request behaviour of every page: the person's time zone, htmx and an expired session, 405 pages."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render, resolve_url
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from accounts.models import User

Handler = Callable[[HttpRequest], HttpResponse]


class UserTimezoneMiddleware:
    """Dates and times on pages, and what "today" is, in the signed-in person's time zone."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if isinstance(user, User) and user.timezone:
            try:
                timezone.activate(user.timezone)
            except (ValueError, KeyError):  # a zone the system no longer knows (ZoneInfoNotFoundError): UTC
                timezone.deactivate()
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


class HtmxLoginRedirectMiddleware:
    """An htmx request whose session has expired would get the login page swapped into a part of the page.
    Send the whole page to the login instead, with `next` the page the person was on (not the partial)."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or response.status_code != 302:
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login:
            return response
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        page = current.path or "/"
        if current.query:
            page += "?" + current.query
        return HttpResponseClientRedirect(f"{login}?next={quote(page, safe='/')}")


class MethodNotAllowedPageMiddleware:
    """Django's 405 has an empty body; a person who opens a POST-only address gets a page that says so."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.content or request.path.startswith("/api/"):
            return response
        page = render(request, "405.html", status=405)
        if response.has_header("Allow"):
            page["Allow"] = response["Allow"]
        return page
