"""The Mailboxes page in a browser, from the keyboard: "Disconnect" asks first, saying what becomes of the
mailbox's tasks, and only the second, red button disconnects."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from integrations.models import Integration
from tasks.services import task_insert_from_emails
from tests.e2e.conftest import chromium, new_page, tab_to, watch_errors
from tests.factories import IntegrationFactory, UserFactory, email_task_row


@pytest.mark.e2e
def test_keyboard_disconnect_asks_first_and_says_what_happens_to_its_tasks(
    live_site: str, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    user = UserFactory(email="boxes@example.com")
    mailbox = IntegrationFactory(user=user, account_address="boxes@example.com")
    task_insert_from_emails(rows=[email_task_row(user, mailbox, "m1", "Send the slides")])
    with chromium() as browser:
        page: Any = new_page(browser)
        page_errors, server_errors = watch_errors(page)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill("boxes@example.com")
        page.get_by_label("Password").fill("correct-horse-battery")
        page.get_by_role("button", name="Log in").click()
        page.goto(f"{live_site}/mailboxes/")

        first = page.locator(f"#disconnect-{mailbox.pk}")
        confirm = page.locator(f"#disconnect-confirm-{mailbox.pk}")
        expect(first).to_be_visible()
        expect(confirm).to_be_hidden()
        # It does not look like the buttons beside it.
        color = first.evaluate("el => getComputedStyle(el).color")
        assert color == "rgb(180, 35, 24)", color

        tab_to(page, first)
        page.keyboard.press("Enter")
        expect(confirm).to_be_visible()
        expect(page.locator(f"#disconnect-step-{mailbox.pk}")).to_contain_text(
            "The 1 open task from this mailbox stays in your list"
        )
        mailbox.refresh_from_db()
        assert mailbox.status == Integration.Status.ACTIVE  # asking changed nothing

        page.keyboard.press("Enter")  # changing one's mind closes it again
        expect(confirm).to_be_hidden()
        page.keyboard.press("Enter")
        tab_to(page, confirm)
        page.keyboard.press("Enter")
        expect(page.locator(".messages")).to_contain_text("is disconnected")
        expect(page.locator(f"#mailbox-{mailbox.pk}")).to_have_count(0)
        mailbox.refresh_from_db()
        assert mailbox.status == Integration.Status.DISCONNECTED
        page.goto(f"{live_site}/")
        expect(page.locator("#task-list")).to_contain_text("Send the slides")
        assert page_errors == [] and server_errors == []
