"""In a real browser, under DEBUG as `make run` serves the app: an inline edit with a mistake keeps the page
(its header, the other tasks) and shows its errors in the row being edited."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from pytest_django import Settings

from tasks.services import task_create
from tests.e2e.conftest import chromium, new_page, row_action, watch_errors
from tests.factories import UserFactory


@pytest.mark.e2e
def test_inline_edit_mistake_shows_errors_in_the_row_under_debug(
    live_site: str, settings: Settings, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    settings.DEBUG = True  # what `make run` serves
    user = UserFactory(email="editor@example.com")
    task = task_create(user=user, title="Call the plumber")
    task_create(user=user, title="Water the plants")
    with chromium() as browser:
        page: Any = new_page(browser)
        page_errors, server_errors = watch_errors(page)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill("editor@example.com")
        page.get_by_label("Password").fill("correct-horse-battery")
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{live_site}/")

        row = page.locator(f"#task-{task.pk}")
        row_action(row, "edit")
        editing = page.locator(f"#task-{task.pk}.editing")
        expect(editing).to_be_visible()
        editing.get_by_label("Title").fill("")
        editing.locator('[data-action="save"]').click()

        expect(editing.locator(".field-error, .errorlist").first).to_be_visible()
        expect(editing).to_contain_text("This field is required")
        expect(page.locator(".topbar")).to_be_visible()  # the page is still the page
        expect(page.locator("#task-list > li.task")).to_have_count(2)
        expect(page.locator("#task-list")).to_contain_text("Water the plants")

        # Corrected, it saves in place.
        editing.get_by_label("Title").fill("Call the plumber today")
        editing.locator('[data-action="save"]').click()
        expect(page.locator("#task-list")).to_contain_text("Call the plumber today")
        assert page_errors == [] and server_errors == []


@pytest.mark.e2e
def test_keyboard_edit_with_a_mistake_keeps_the_page_and_its_focus_under_debug(
    live_site: str, settings: Settings, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    """The same mistake made without the mouse: e edits, the emptied title is saved with Enter, the errors show
    in the row with the focus still in the form, and the corrected title saves with Enter."""
    settings.DEBUG = True
    user = UserFactory(email="keys@example.com")
    task_create(user=user, title="Water the plants")
    task = task_create(user=user, title="Call the plumber")  # the newest: first in the list
    with chromium() as browser:
        page: Any = new_page(browser)
        page_errors, server_errors = watch_errors(page)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill("keys@example.com")
        page.get_by_label("Password").fill("correct-horse-battery")
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{live_site}/")

        page.keyboard.press("j")
        page.keyboard.press("e")
        editing = page.locator(f"#task-{task.pk}.editing")
        title = editing.get_by_label("Title")
        expect(title).to_be_focused()
        page.keyboard.press("Control+A")
        page.keyboard.press("Backspace")
        page.keyboard.press("Enter")

        expect(editing).to_contain_text("This field is required")
        expect(page.locator(".topbar")).to_be_visible()
        expect(page.locator("#task-list > li.task")).to_have_count(2)
        expect(title).to_be_focused()  # the form with its errors has the focus, on the title to correct
        page.keyboard.type("Call the plumber today")
        page.keyboard.press("Enter")
        expect(page.locator(f"#task-{task.pk} .task-title")).to_have_text("Call the plumber today")
        assert page_errors == [] and server_errors == []
