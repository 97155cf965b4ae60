"""The reminders of issue 23 point 5 in Chromium: the digest's unsubscribe link works for someone signed out
(it asks first, then turns the digest off, which Settings then shows), and a calendar link made in Settings is
shown once, read by a calendar as iCalendar carrying the dated task, and refused once revoked."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import icalendar
import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import User
from reminders.digest import digest_enabled, digest_set, unsubscribe_link_make
from tasks.services import task_create
from tests.e2e.conftest import chromium, new_page, watch_errors
from tests.factories import UserFactory

pytestmark = pytest.mark.e2e

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's


@pytest.fixture
def browser(live_site: str, _django_orm_beside_playwright: None) -> Iterator[Any]:
    with chromium() as opened:
        yield opened
        connections.close_all()  # before Playwright stops (see conftest._chromium_page)


def log_in(page: Any, live_site: str, user: User) -> None:
    page.goto(f"{live_site}/login/")
    page.get_by_label("Email address").fill(user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")


def test_digest_unsubscribe_link_works_signed_out_and_settings_show_it_off(
    live_site: str, transactional_db: None, browser: Any
) -> None:
    user = UserFactory(email="digest@example.com")
    digest_set(user=user, enabled=True)
    link = unsubscribe_link_make(user=user).replace(settings.SITE_URL, live_site)
    page = new_page(browser)  # nobody signed in
    page_errors, server_errors = watch_errors(page)
    page.goto(link)
    expect(page.locator("#unsubscribe")).to_be_visible()
    assert digest_enabled(user=user)  # opening the link (as a mail scanner does) changes nothing
    page.locator("#unsubscribe").click()
    expect(page.locator("#unsubscribed")).to_contain_text("digest@example.com")
    assert not digest_enabled(user=user)

    log_in(page, live_site, user)
    page.goto(f"{live_site}/settings/")
    expect(page.locator("#digest-enabled")).not_to_be_checked()
    assert page_errors == [] and server_errors == []


def test_calendar_link_shown_once_parsed_by_icalendar_and_refused_once_revoked(
    live_site: str, transactional_db: None, browser: Any
) -> None:
    user = UserFactory(email="calendar@example.com")
    due = timezone.localdate() + timedelta(days=2)
    task_create(user=user, title="Renew the passport", due_date=due)
    task_create(user=user, title="No date here")
    page = new_page(browser)
    page_errors, server_errors = watch_errors(page)
    log_in(page, live_site, user)
    page.goto(f"{live_site}/settings/")
    page.locator("#create-calendar").click()
    link = page.locator("#new-calendar-url").input_value()
    assert link.startswith(settings.SITE_URL)
    link = link.replace(settings.SITE_URL, live_site)

    feed = page.context.request.get(link)
    assert feed.status == 200, feed.status
    calendar = icalendar.Calendar.from_ical(feed.body())
    titles = {str(item.get("summary")) for item in calendar.walk() if item.name in ("VEVENT", "VTODO")}
    assert titles == {"Renew the passport"}

    page.goto(f"{live_site}/settings/")
    expect(page.locator("#new-calendar-url")).to_have_count(0)  # shown once
    page.locator("#calendar-list [data-action='revoke-calendar']").click()
    expect(page.locator("#calendar-list")).to_have_count(0)
    assert page.context.request.get(link).status == 404
    assert page_errors == [] and server_errors == []
