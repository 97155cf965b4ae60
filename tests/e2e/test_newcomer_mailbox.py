"""A newcomer's first day in a real browser (issue 23 points 11, 2 and 9): a Gmail mailbox of an address the
sandbox does not know, filled with the demo mail from the consent page; "Extract now" and the run line that
says what happened since the person last looked; then "Never make tasks from this sender" on a task, shown and
undone in Settings."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from accounts.models import User
from extraction.models import MutedSender
from sandbox.client import SandboxClient
from sandbox.demo.messages import EXPECTED_OPEN, EXPECTED_TASKS
from tests.e2e.conftest import FINISHED, RUN_TIMEOUT_MS, log_in_and_consent, open_row_menu, watch_errors

MINE = "newcomer@example.net"


@pytest.mark.e2e
def test_newcomer_fills_a_mailbox_from_the_consent_page_and_mutes_a_muted_sender(
    live_site: str, demo_user: User, sandbox: SandboxClient, celery_worker: Any, browser_page: Page
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    log_in_and_consent(page, live_site)

    page.get_by_role("link", name="Mailboxes", exact=True).click()
    page.get_by_role("button", name="Connect Gmail").click()
    expect(page).to_have_url(re.compile("^" + re.escape(f"{settings.SANDBOX_URL}/google/o/oauth2/auth?")))
    page.get_by_label("Account email").fill(MINE)
    page.get_by_role("button", name="Fill this mailbox with the demo mail").click()
    expect(page.get_by_role("status")).to_contain_text(f"{MINE} now holds the")
    expect(page.get_by_label("Account email")).to_have_value(MINE)
    page.get_by_role("button", name="Allow").click()
    expect(page.locator(".messages")).to_contain_text(f"Gmail {MINE} is connected.")

    page.get_by_role("link", name="Tasks", exact=True).click()
    page.get_by_role("button", name="Extract now").click()
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    expected = sum(EXPECTED_OPEN.values())  # the open list: asks and promises
    expect(status).to_contain_text("Since you last looked")
    expect(status).to_contain_text(f"{EXPECTED_TASKS} tasks created")
    tasks = page.locator("#task-list li.task")  # the demo's last-week mail under "From before you connected" too,
    page.locator("#task-list details.earlier-group > summary").click()  # whose rows come when it is opened
    expect(tasks).to_have_count(expected)

    page.wait_for_load_state("networkidle")  # the list has redrawn itself after the run
    first = page.locator("#task-list > li.task[data-kind=ask]").first  # outside the collapsed group; not your own mail
    sender = first.locator(".meta bdi").first.inner_text()
    open_row_menu(first).get_by_role("menuitem", name="Never make tasks from this sender").click()
    expect(page.locator(".messages")).to_contain_text("Tasklift will make no more tasks from")
    muted = MutedSender.objects.get(user=demo_user)
    assert muted.address in sender.lower()

    page.get_by_role("link", name="Settings", exact=True).click()
    section = page.locator("#muted-senders")
    expect(section).to_contain_text(muted.address)
    section.get_by_role("button", name="Undo").click()
    expect(page.locator(".messages")).to_contain_text(f"Mail from {muted.address} is read again")
    expect(page.locator("#no-muted")).to_be_visible()
    assert not MutedSender.objects.exists()
    assert page_errors == [] and server_errors == []
