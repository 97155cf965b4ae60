"""With Redis out of reach (a restart), no route answers 500: what needs it (a counter, the cache, Celery's
broker) answers 503 with Retry-After, a page for a person and the API's error shape for a program; what does
not need it keeps working.

Every route of the site is asked, by GET and by POST, signed in (a session in the database) and signed out, and
every operation of the API document with a personal access token: one gunicorn, as the Procfile starts it, with
REDIS_URL naming a port where nothing listens, beside this session's database and sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver

from accounts.models import User
from accounts.services import access_token_create, consent_grant
from config.api import api
from config.urls import urlpatterns
from extraction.models import ExtractionRun
from reminders.calendar import calendar_feed_create
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_task
from tests.integrations.test_webhooks_unavailable import Web, closed_port

# slow: gunicorn without its Redis (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REPORT = b'{"csp-report": {"document-uri": "https://tasklift.test/", "violated-directive": "script-src"}}'


@pytest.fixture(scope="module")
def web_without_redis(
    django_db_setup: None, sandbox_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Web]:
    web = Web(tmp_path_factory.mktemp("redis-down") / "web.log", REDIS_URL=f"redis://127.0.0.1:{closed_port()}/1")
    yield web
    web.stop()


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    """Every path pattern of the URLconf, as a regular-expression-free route ("tasks/<int:task_id>")."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if route.startswith("admin/"):
                yield "admin/"
                yield "admin/login/"
                continue
            yield from _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route


class Person:
    """One of everything a route's path can name, owned by a consenting person with a session."""

    def __init__(self) -> None:
        self.user: User = UserFactory(email="down@example.com")
        consent_grant(user=self.user)
        integration = IntegrationFactory(user=self.user)
        task = email_task(self.user, integration, "m1", "Send the deck")
        event = TaskEventFactory(task=task)
        feed, self.feed_secret = calendar_feed_create(user=self.user)
        run = ExtractionRun.objects.create(user=self.user, trigger="manual", status=ExtractionRun.Status.SUCCEEDED)
        token, self.token = access_token_create(user=self.user, name="down")
        self.ids = {
            "task_id": task.pk,
            "event_id": event.pk,
            "feed_id": feed.pk,
            "run_id": run.pk,
            "integration_id": integration.pk,
            "token_id": token.pk,
            "entry_id": 1,
            "muted_id": 1,
        }
        client = Client()
        client.force_login(self.user)
        self.session = client.cookies[settings.SESSION_COOKIE_NAME].value

    def path(self, route: str) -> str:
        def value(match: re.Match[str]) -> str:
            converter, name = match.group(1) or "str", match.group(2)
            if name == "secret":
                return self.feed_secret
            return str(self.ids.get(name, 1)) if converter == "int" else "x"

        path = re.sub(r"<(?:(\w+):)?(\w+)>", value, route)
        return "/" + path.replace("^", "").replace("$", "").replace("\\", "")


def _browser(web: Web, session: str | None) -> requests.Session:
    browser = requests.Session()
    if session:
        browser.cookies.set(settings.SESSION_COOKIE_NAME, session)
    browser.get(f"http://127.0.0.1:{web.port}/login/", timeout=60)  # the CSRF cookie
    browser.headers["X-CSRFToken"] = browser.cookies.get(settings.CSRF_COOKIE_NAME) or ""
    return browser


def assert_no_500(answers: dict[str, requests.Response]) -> None:
    failures = {what: r.status_code for what, r in answers.items() if r.status_code >= 500 and r.status_code != 503}
    assert not failures, failures
    for what, response in answers.items():
        # /healthz and /readyz report the part that is down (a 503 is their answer, not "ask again")
        if response.status_code == 503 and "/healthz" not in what and "/readyz" not in what:
            assert int(response.headers.get("Retry-After", 0)) > 0, what


def test_redis_down_no_route_answers_500(web_without_redis: Web) -> None:
    person = Person()
    base = f"http://127.0.0.1:{web_without_redis.port}"
    # First (the walk below changes things, consent among them): what needs Redis says so. "Extract now" and the
    # CSP reports cannot be counted.
    browser = _browser(web_without_redis, person.session)
    extract = browser.post(f"{base}/extract", timeout=60, allow_redirects=False)
    assert extract.status_code == 503 and "Try again in" in extract.text
    htmx = browser.post(f"{base}/extract", headers={"HX-Request": "true"}, timeout=60)
    assert htmx.status_code == 503 and htmx.headers["HX-Retarget"] == "#main" and 'role="alert"' in htmx.text
    report = requests.post(
        f"{base}/csp-report/", data=REPORT, headers={"Content-Type": "application/csp-report"}, timeout=60
    )
    assert report.status_code == 503 and int(report.headers["Retry-After"]) > 0

    routes = sorted(set(_routes(urlpatterns)) - {"api/", "metrics"})
    answers: dict[str, requests.Response] = {}
    for signed_in in (False, True):
        browser = _browser(web_without_redis, person.session if signed_in else None)
        for route in routes:
            path = person.path(route)
            for method in ("GET", "POST"):
                for as_htmx in (False, True):
                    headers = {"HX-Request": "true"} if as_htmx else {}
                    answers[f"{method} {path} signed_in={signed_in} htmx={as_htmx}"] = browser.request(
                        method, base + path, headers=headers, timeout=60, allow_redirects=False
                    )
    assert len(answers) > 200
    assert_no_500(answers)
    assert not ExtractionRun.objects.exclude(status=ExtractionRun.Status.SUCCEEDED).exists()
    assert "Traceback" not in web_without_redis.log.read_text()


def test_redis_down_no_api_operation_answers_500(web_without_redis: Web) -> None:
    person = Person()
    base = f"http://127.0.0.1:{web_without_redis.port}"
    document = api.get_openapi_schema()
    prefix = "/api"
    bearer = {"Authorization": f"Bearer {person.token}"}
    start = requests.post(f"{base}/api/extraction/runs", headers=bearer, timeout=60)
    assert start.status_code == 503, start.text
    assert start.json()["code"] == "unavailable" and int(start.headers["Retry-After"]) > 0

    answers: dict[str, requests.Response] = {}
    for path, operations in document["paths"].items():
        concrete = re.sub(r"\{(\w+)\}", lambda m: str(person.ids.get(m.group(1), 1)), path)
        url = base + (concrete if concrete.startswith(prefix) else prefix + concrete)
        for method in operations:
            for headers in ({}, bearer):
                answers[f"{method.upper()} {concrete} token={bool(headers)}"] = requests.request(
                    method.upper(), url, json={}, headers=headers, timeout=60
                )
    assert len(answers) > 20
    assert_no_500(answers)
    assert not ExtractionRun.objects.exclude(status=ExtractionRun.Status.SUCCEEDED).exists()
    assert "Traceback" not in web_without_redis.log.read_text()
