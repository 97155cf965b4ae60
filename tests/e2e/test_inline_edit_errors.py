"""In a real browser, under DEBUG as `make run` serves the app: an inline edit with a mistake keeps the page
(its header, the other tasks) and shows its errors in the row being edited."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from pytest_django import Settings

from tasks.services import task_create
from tests.e2e.conftest import chromium, new_page, watch_errors
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
        row.locator('[data-action="edit"]').click()
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
