"""Every answer carries the Content-Security-Policy; no page of ours needs inline script or style to work; the
browser's violation reports are logged, bounded and rate-limited. (tests/e2e checks the policy in Chromium.)"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import pytest
from django.test import Client

from accounts.services import consent_grant
from integrations.models import Integration
from tests.factories import IntegrationFactory, UserFactory

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/?status=done",
    "/mailboxes/",
    "/settings/",
    "/consent/",
    "/api/docs",
    "/admin/",
    "/admin/accounts/user/",
]
ANONYMOUS_PAGES = ["/login/", "/signup/", "/admin/login/"]


def _directives(response: Any) -> dict[str, str]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.strip() for part in policy.split(";") if part.strip()}


@pytest.fixture
def staff_client(client: Client) -> Client:
    user = UserFactory(is_staff=True, is_superuser=True)
    consent_grant(user=user)
    IntegrationFactory(user=user)  # the mailboxes page with a mailbox on it
    client.force_login(user)
    return client


def test_every_page_and_api_answer_carries_the_policy(staff_client: Client) -> None:
    anonymous = Client()
    responses = [staff_client.get(path) for path in PAGES] + [anonymous.get(path) for path in ANONYMOUS_PAGES]
    responses += [staff_client.get("/api/tasks"), anonymous.get("/api/tasks"), anonymous.get("/nowhere")]
    for response in responses:
        directives = _directives(response)
        assert directives["default-src"] == "default-src 'self'", response.request["PATH_INFO"]
        assert directives["img-src"] == "img-src 'self' data:"
        assert directives["object-src"] == "object-src 'none'"
        assert directives["base-uri"] == "base-uri 'none'"
        assert directives["frame-ancestors"] == "frame-ancestors 'none'"
        assert directives["report-uri"] == "report-uri /csp-report/"
        assert not {"script-src", "style-src"} & set(directives)  # both are default-src: 'self' only
        assert "unsafe" not in response["Content-Security-Policy"]


def test_no_page_has_inline_script_or_style(staff_client: Client) -> None:
    """What the policy would block, found in the HTML itself: script without src, style elements and attributes,
    event handler attributes, javascript: links."""
    anonymous = Client()
    integration = Integration.objects.get()
    admin_forms = [
        f"/admin/accounts/user/{integration.user_id}/change/",
        "/admin/accounts/user/add/",
        f"/admin/integrations/integration/{integration.pk}/change/",
        "/admin/tasks/task/",
    ]
    pages = {path: staff_client.get(path) for path in PAGES + admin_forms}
    pages |= {path: anonymous.get(path) for path in ANONYMOUS_PAGES}
    for path, response in pages.items():
        assert response.status_code == 200, path
        html = response.content.decode()
        scripts = re.findall(r"<script\b([^>]*)>", html)
        assert scripts, path
        for attributes in scripts:
            assert "src=" in attributes or 'type="application/json"' in attributes, (path, attributes)
        assert not re.search(r"<style\b", html), path
        assert not re.search(r"\sstyle=", html), path
        assert not re.search(r"\son[a-z]+=", html), path
        assert "javascript:" not in html, path


def test_the_api_docs_start_swagger_ui_from_a_static_script(client: Client) -> None:
    page = client.get("/api/docs").content.decode()
    assert '<script src="/static/js/api-docs.js"></script>' in page
    assert '<script id="swagger-config" type="application/json">' in page
    assert '"url": "/api/openapi.json"' in page
    assert re.search(r'data-csrf-token="\w{32,}"', page)


# Reports ------------------------------------------------------------------------------------------------

REPORT = {
    "csp-report": {
        "document-uri": "https://tasklift.example/integrations/google/callback?code=4/secret-code&state=s3cret",
        "referrer": "",
        "violated-directive": "script-src-elem",
        "effective-directive": "script-src-elem",
        "original-policy": "default-src 'self'; report-uri /csp-report/",
        "disposition": "enforce",
        "blocked-uri": "inline",
        "line-number": 12,
        "source-file": "https://tasklift.example/integrations/google/callback?code=4/secret-code",
        "status-code": 200,
        "script-sample": "",
    }
}


def _post_report(client: Client, body: Any, content_type: str = "application/csp-report") -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/csp-report/", data, content_type=content_type)


def test_a_violation_report_is_logged_without_the_urls_queries(caplog: pytest.LogCaptureFixture) -> None:
    client = Client(enforce_csrf_checks=True)  # a browser sends reports without a CSRF token
    with caplog.at_level(logging.WARNING, logger="tasklift.csp"):
        response = _post_report(client, REPORT)
    assert response.status_code == 204
    [line] = [r.getMessage() for r in caplog.records if r.name == "tasklift.csp"]
    assert line == (
        "csp violation: script-src-elem blocked inline on https://tasklift.example/integrations/google/callback "
        "(https://tasklift.example/integrations/google/callback:12)"
    )
    assert "secret" not in caplog.text


def test_reports_of_the_reporting_api_are_logged_too(caplog: pytest.LogCaptureFixture) -> None:
    body = [
        {
            "type": "csp-violation",
            "body": {"effectiveDirective": "img-src", "blockedURL": "https://evil.example/x.png", "documentURL": "/"},
        }
    ]
    with caplog.at_level(logging.WARNING, logger="tasklift.csp"):
        assert _post_report(Client(), body, "application/reports+json").status_code == 204
    assert "csp violation: img-src blocked https://evil.example/x.png on /" in caplog.text


def test_the_report_endpoint_takes_only_small_csp_reports(settings: Any) -> None:
    client = Client()
    assert client.get("/csp-report/").status_code == 405
    assert _post_report(client, "not json").status_code == 400
    assert _post_report(client, {"something": "else"}).status_code == 400
    oversized = {"csp-report": {**REPORT["csp-report"], "script-sample": "x" * settings.CSP_REPORT_MAX_BYTES}}
    assert _post_report(client, oversized).status_code == 413


def test_the_report_endpoint_is_rate_limited_per_client_address(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.CSP_REPORTS_PER_MINUTE = 2
    with caplog.at_level(logging.WARNING, logger="tasklift.csp"):
        answers = [_post_report(Client(), REPORT) for _ in range(4)]
    assert [a.status_code for a in answers] == [204, 204, 429, 429]
    assert 1 <= int(answers[-1]["Retry-After"]) <= 60
    assert len([r for r in caplog.records if r.name == "tasklift.csp"]) == 2


def test_the_report_limit_is_a_sliding_window(settings: Any) -> None:
    """Past the point where a fixed window of a third of this one would start again, still refused, with the
    wait until the first report leaves; once the first reports are older than the window, taken again. Times
    are read around each request, so a slow machine moves the waits, not the outcome."""
    settings.CSP_REPORTS_PER_MINUTE = 2
    settings.RATE_WINDOW_SECONDS = window = 6
    first_sent = time.time()
    first = [_post_report(Client(), REPORT).status_code for _ in range(2)]
    counted_by = time.time()
    time.sleep(max(0.0, first_sent + window / 3 + 0.1 - time.time()))
    halfway_sent = time.time()
    halfway = _post_report(Client(), REPORT)
    halfway_answered = time.time()

    assert first == [204, 204]
    assert halfway.status_code == 429
    # The oldest report leaves between `window` after it was sent and `window` after both were counted.
    waited_least, waited_most = first_sent + window - halfway_answered, counted_by + window - halfway_sent
    assert int(waited_least) <= int(halfway["Retry-After"]) <= int(waited_most) + 1
    time.sleep(max(0.0, counted_by + window + 0.2 - time.time()))
    assert _post_report(Client(), REPORT).status_code == 204


def test_a_long_field_is_cut_and_control_characters_do_not_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    report = {"csp-report": {**REPORT["csp-report"], "effective-directive": "x\nFAKE LINE" + "y" * 1000}}
    with caplog.at_level(logging.WARNING, logger="tasklift.csp"):
        assert _post_report(Client(), report).status_code == 204
    [line] = [r.getMessage() for r in caplog.records if r.name == "tasklift.csp"]
    assert "\n" not in line and "x FAKE LINE" in line and len(line) < 600
