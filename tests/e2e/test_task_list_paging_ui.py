"""The task list in a browser when a person has more tasks than a page: "Load more" and scrolling append the
next pages, and when the list refreshes itself (a bulk action, a run) it keeps every page that was loaded."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from tasks.models import Task
from tasks.views import PAGE_SIZE
from tests.e2e.conftest import chromium, new_page
from tests.factories import UserFactory
from tests.tasks.test_task_list_paging import add_tasks


@pytest.mark.e2e
def test_load_more_scrolling_and_a_refresh_keep_every_page(
    live_site: str, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    user = UserFactory(email="many@example.com")
    add_tasks(user, 2 * PAGE_SIZE + 20)
    with chromium() as browser:
        page: Any = new_page(browser)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill("many@example.com")
        page.get_by_label("Password").fill("correct-horse-battery")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{live_site}/")
        rows = page.locator("#task-list > li.task")
        expect(rows).to_have_count(PAGE_SIZE)

        page.locator("#load-more-button").click()  # a press
        expect(rows).to_have_count(2 * PAGE_SIZE)
        page.locator("#load-more").scroll_into_view_if_needed()  # scrolling to the end loads the rest
        expect(rows).to_have_count(2 * PAGE_SIZE + 20)
        expect(page.locator("#load-more")).to_have_count(0)
        shown = rows.evaluate_all("rows => rows.map(row => Number(row.dataset.taskId))")
        assert len(set(shown)) == len(shown) == 2 * PAGE_SIZE + 20

        # A bulk action refreshes the list: every loaded page stays, less the task that is done.
        last = rows.last
        last_id = int(str(last.get_attribute("data-task-id")))
        last.locator(".select-task").check()
        page.locator("#bulk-done").click()
        expect(page.locator("#undo")).to_contain_text("1 task marked done")
        expect(page.locator(f"#task-{last_id}")).to_have_count(0)
        expect(rows).to_have_count(2 * PAGE_SIZE + 19)
        assert Task.objects.get(pk=last_id).status == Task.Status.DONE
        connections.close_all()  # before Playwright stops (see conftest._chromium_page)
