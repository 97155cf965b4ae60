"""The task list's browser behaviour: the time zone from the browser at sign-up (confirmed by its email's link), editing
in place, done with undo, and every page at phone width (390 px) without sideways scrolling and with buttons big
enough to tap."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from accounts.models import User
from tasks.models import Task
from tests.e2e.conftest import chromium, confirm_signup, row_action, watch_errors

PHONE = {"width": 390, "height": 844}
WIDE_PAGES = ["/", "/?status=done", "/mailboxes/", "/settings/", "/consent/"]


@pytest.mark.e2e
def test_signup_edit_undo_and_phone_width(
    live_site: str, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    with chromium() as browser:
        context = browser.new_context(viewport=PHONE, timezone_id="Pacific/Auckland")
        context.set_default_timeout(10_000)
        page: Any = context.new_page()
        page_errors, server_errors = watch_errors(page)

        # Sign up: the browser's time zone is taken.
        page.goto(f"{live_site}/signup/")
        page.get_by_label("Email address").fill("phone@example.com")
        page.get_by_label("Password", exact=True).fill("a-long-passphrase-9")
        page.get_by_label("Password confirmation").fill("a-long-passphrase-9")
        page.get_by_role("button", name="Sign up").click()
        confirm_signup(page, live_site, "phone@example.com")
        assert User.objects.get(email="phone@example.com").timezone == "Pacific/Auckland"

        # Add a task with a long title, edit it in place, mark it done, undo.
        page.locator("#id_title").fill("Reply to the landlord about the " + "very " * 20 + "long lease")
        page.locator("#add-task-button").click()
        row = page.locator("#task-list > li.task").first
        expect(row).to_be_visible()
        row_action(row, "edit")
        editing = page.locator("#task-list > li.task.editing")
        expect(editing).to_be_visible()
        editing.locator("textarea").fill("Mention the boiler")
        editing.locator('[data-action="save"]').click()
        expect(page.locator("#task-list .notes")).to_have_text("Mention the boiler")
        page.wait_for_load_state("networkidle")  # the list re-sorts itself after a save
        page.locator('#task-list [data-action="done"]').first.click()
        expect(page.locator("#undo")).to_contain_text("marked done")
        expect(page.locator("#task-list > li.task")).to_have_count(0)
        page.locator("#undo-button").click()
        expect(page.locator("#task-list > li.task")).to_have_count(1)
        assert Task.objects.get().status == Task.Status.OPEN

        # Every page fits a phone and its buttons can be tapped.
        for path in WIDE_PAGES:
            page.goto(f"{live_site}{path}")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{path} scrolls sideways: {width}px"
            small = page.evaluate(
                """() => [...document.querySelectorAll('main button, main a.button')]
                    .filter(b => b.offsetParent !== null && b.getBoundingClientRect().height < 40)
                    .map(b => b.textContent.trim())"""
            )
            assert small == [], f"{path}: buttons too small to tap: {small}"
        page.locator("#nav-toggle").click()  # at 390 px the navigation is behind Menu
        page.locator("#nav-settings").click()
        expect(page.locator("#id_timezone")).to_have_value(re.compile("^Pacific/Auckland$"))
        assert page_errors == []
        assert server_errors == []
        context.close()
        connections.close_all()  # before Playwright stops (see conftest._chromium_page)
