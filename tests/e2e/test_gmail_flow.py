"""The demo journey in a real browser: log in, give AI consent, connect Gmail through the (sandbox) Google
consent screen, press "Extract now", and see the tasks of the demo inbox appear."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.demo.messages import DEMO_ADDRESS, EXPECTED_OPEN, EXPECTED_TASKS
from tasks.models import Task
from tests.e2e.conftest import FINISHED, ROWS_JS, RUN_TIMEOUT_MS, earlier_open, log_in_and_consent, watch_errors

SCREENSHOT = settings.BASE_DIR / "test-artifacts" / "e2e-gmail-tasks.png"


@pytest.mark.e2e
def test_connect_gmail_and_extract_now_lists_the_demo_tasks(
    live_site: str, demo_user: User, demo_mailbox: str, celery_worker: Any, browser_page: Page
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    expected_total = sum(EXPECTED_OPEN.values())  # the open list: asks and promises
    assert expected_total > 0

    log_in_and_consent(page, live_site)

    # Connect Gmail: Tasklift sends the browser to the sandbox's Google consent screen.
    page.get_by_role("link", name="Mailboxes", exact=True).click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    page.get_by_role("button", name="Connect Gmail").click()
    expect(page).to_have_url(re.compile("^" + re.escape(f"{settings.SANDBOX_URL}/google/o/oauth2/auth?")))
    expect(page).to_have_title("Sign in - Google Accounts (sandbox)")
    expect(page.get_by_text("Sandbox consent page: no real Google account is involved.")).to_be_visible()
    expect(page.get_by_text("https://www.googleapis.com/auth/gmail.readonly")).to_be_visible()
    address = page.get_by_label("Account email")
    expect(address).to_have_value(DEMO_ADDRESS)  # the only sandbox mailbox is offered by default
    address.fill(DEMO_ADDRESS)
    page.get_by_role("button", name="Allow").click()

    # Back on Mailboxes (the callback went to SITE_URL, the live server): the mailbox is active.
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    expect(page.locator(".messages")).to_contain_text(f"Gmail {DEMO_ADDRESS} is connected.")
    mailbox = page.locator("#mailbox-list > li").filter(has_text=DEMO_ADDRESS)
    expect(mailbox).to_have_count(1)
    expect(mailbox.locator("strong")).to_have_text("Gmail")
    expect(mailbox.locator(".badge")).to_have_text("Active")

    # Extract now: the run is queued for the Celery worker and its status is polled by htmx.
    page.get_by_role("link", name="Tasks", exact=True).click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator("#mailbox-needed")).to_have_count(0)
    tasks = page.locator("#task-list li.task")
    expect(tasks).to_have_count(0)
    page.get_by_role("button", name="Extract now").click()
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile(r"^(queued|running|succeeded)$"))
    expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    run = ExtractionRun.objects.get(user=demo_user)
    assert status.get_attribute("data-status") == "succeeded", (
        f"run ended {run.status}: {run.error_code} {run.error_message}; page says: {status.inner_text()}"
    )

    # The finished run's HX-Trigger (tasksChanged) makes #task-list fetch itself again.
    expect(page.locator("#task-list > li.empty")).to_have_count(0)
    expect(page.locator("#task-list > li.task").first).to_be_visible()
    earlier_open(page)  # the demo's last-week mail, past due then, under "From before you connected"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    rows: list[dict[str, Any]] = tasks.evaluate_all(ROWS_JS)
    shown = Counter(row["subject"] for row in rows)
    wanted = Counter(EXPECTED_OPEN)
    assert len(rows) == expected_total, (
        f"{len(rows)} task rows, expected {expected_total} (the run read {run.emails_fetched} emails and created "
        f"{run.tasks_created} tasks); missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    )
    assert shown == wanted, f"missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    expect(status).to_contain_text(f"{EXPECTED_TASKS} tasks created")  # with the waiting item and the closed ask
    assert Task.objects.filter(user=demo_user, source=Task.Source.EMAIL_AI).count() == EXPECTED_TASKS
    for row in rows:
        assert row["title"], row
        assert re.match(r"^From \S.* · ", row["meta"]), f"no sender shown: {row}"
        assert row["href"] and row["href"].startswith("https://mail.google.com/"), f"no Gmail link: {row}"
    assert page_errors == []
    assert server_errors == []
