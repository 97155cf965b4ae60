"""In the browser: quick add shows what it understood while the person types, and saves it; snooze takes a
task off the list to a date; the Settings page turns on the digest and makes a calendar link shown once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from tasks.models import Task
from tasks.snooze import person_today
from tests.e2e.conftest import chromium, row_action, watch_errors
from tests.factories import UserFactory


@pytest.mark.e2e
def test_quick_add_preview_snooze_and_reminder_settings_in_the_browser(
    live_site: str, transactional_db: None, _django_orm_beside_playwright: None
) -> None:
    user = UserFactory(email="quick@example.com", timezone="Asia/Tokyo")
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        page: Any = context.new_page()
        page_errors, server_errors = watch_errors(page)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill(user.email)
        page.get_by_label("Password").fill("correct-horse-battery")
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{live_site}/")

        # Quick add: the preview says what will be saved before anything is.
        page.locator("#id_title").press_sequentially("Call Sam tomorrow 3pm")
        preview = page.locator("#quick-add-preview")
        # The first preview of a process loads dateparser (about 2 s, more on a busy machine).
        expect(preview).to_contain_text("“Call Sam”", timeout=30_000)
        tomorrow = person_today(user=user) + timedelta(days=1)
        expect(preview).to_have_attribute("data-due", tomorrow.isoformat())
        page.locator("#id_keep_as_typed").check()  # the preview follows: no date taken from the words
        expect(preview).to_have_attribute("data-due", "")
        page.locator("#id_keep_as_typed").uncheck()
        expect(preview).to_have_attribute("data-due", tomorrow.isoformat())
        assert not Task.objects.exists()
        page.locator("#add-task-button").click()
        row = page.locator("#task-list > li.task").first
        expect(row.locator(".task-title")).to_have_text("Call Sam")
        expect(row.locator(".badge.due")).to_have_attribute("data-due", tomorrow.isoformat())

        # Snooze it to next week: the row goes, the notice says until when.
        row_action(row, "snooze")
        row.locator('input[name="snoozed_until"]').fill((tomorrow + timedelta(days=7)).isoformat())
        row.locator('[data-action="snooze-save"]').click()
        expect(page.locator("#undo")).to_contain_text("snoozed until")
        expect(page.locator("#task-list > li.task")).to_have_count(0)
        assert Task.objects.get().snoozed_until == tomorrow + timedelta(days=7)

        # Settings: the digest turned on, a calendar link made and shown once.
        page.goto(f"{live_site}/settings/")
        page.locator("#digest-enabled").check()
        page.locator("#save-digest").click()
        expect(page.locator(".messages")).to_contain_text("morning digest")
        expect(page.locator("#digest-enabled")).to_be_checked()
        page.locator("#create-calendar").click()
        link = page.locator("#new-calendar-url").input_value()
        assert "/calendar/tl_cal_" in link and link.endswith(".ics")
        feed = page.request.get(link)
        assert feed.status == 200 and b"BEGIN:VCALENDAR" in feed.body()
        page.goto(f"{live_site}/settings/")
        expect(page.locator("#new-calendar-url")).to_have_count(0)  # never shown again
        assert page_errors == [] and server_errors == []
    connections.close_all()
