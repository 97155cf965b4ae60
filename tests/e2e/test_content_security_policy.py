"""Every page works in Chromium under the Content-Security-Policy, and a violation would be seen.

Every browser test runs with the policy on and fails on a violation (`chromium()` in conftest.py); this one
visits each page once: log in and sign up, the task list, mailboxes, settings, consent, the admin, and the API
docs, where Swagger UI must load the schema and run a request.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from config.run import ADMIN_PASSWORD
from tests.e2e.conftest import watch_errors
from tests.factories import IntegrationFactory

ADMIN = "admin@tasklift.test"


def _visit(page: Page, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    assert "default-src 'self'" in (response.header_value("Content-Security-Policy") or ""), url
    page.wait_for_load_state("networkidle")


@pytest.mark.e2e
def test_every_page_runs_under_the_policy_without_a_violation(
    live_site: str, demo_user: User, browser_page: Page
) -> None:
    admin = User.objects.get(email=ADMIN)
    integration = IntegrationFactory(user=demo_user)
    page = browser_page
    page_errors, server_errors = watch_errors(page)

    _visit(page, f"{live_site}/signup/")
    _visit(page, f"{live_site}/login/")
    page.get_by_label("Email address").fill(ADMIN)
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")

    for path in [
        "/",
        "/?status=done",
        "/mailboxes/",
        "/settings/",
        "/consent/",
        "/admin/",
        "/admin/accounts/user/",
        f"/admin/accounts/user/{admin.pk}/change/",
        "/admin/accounts/user/add/",
        "/admin/integrations/integration/",
        f"/admin/integrations/integration/{integration.pk}/change/",
        "/admin/tasks/task/",
        "/admin/extraction/extractionrun/",
    ]:
        _visit(page, f"{live_site}{path}")

    # The API docs: Swagger UI reads the schema and runs a request from the page.
    _visit(page, f"{live_site}/api/docs")
    operation = page.locator(".opblock-get:has(.opblock-summary-path[data-path='/api/tasks'])")
    expect(operation).to_be_visible(timeout=30_000)  # the whole document laid out first: over 5 s under load
    operation.locator(".opblock-summary").first.click()
    operation.get_by_role("button", name="Try it out").click()
    operation.get_by_role("button", name="Execute").click()
    expect(operation.locator(".live-responses-table tbody .response-col_status").first).to_have_text("200")

    assert page.context.browser is not None
    assert page.context.browser.csp_violations == []  # type: ignore[attr-defined]
    assert page_errors == [] and server_errors == []


@pytest.mark.e2e
def test_a_violation_is_seen_by_the_browser_tests_and_reported_to_the_server(
    live_site: str, transactional_db: None, browser_page: Page, caplog: pytest.LogCaptureFixture
) -> None:
    page = browser_page
    browser: Any = page.context.browser
    _visit(page, f"{live_site}/login/")

    with caplog.at_level(logging.WARNING, logger="tasklift.csp"):
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
            " document.body.appendChild(s); }"
        )
        deadline = time.monotonic() + 10
        while "csp violation" not in caplog.text and time.monotonic() < deadline:
            page.wait_for_timeout(100)

    assert page.evaluate("window.injected") is None  # the inline script did not run
    [violation] = browser.csp_violations
    assert violation.startswith(f"script-src-elem blocked inline on {live_site}/login/ ")
    assert f"csp violation: script-src-elem blocked inline on {live_site}/login/" in caplog.text
    browser.csp_violations.clear()  # seen on purpose: not a failure of this test
