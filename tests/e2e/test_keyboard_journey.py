"""A day's work on the task list with the keyboard alone (issue 23, "Must show"): sign in, Done, Undo, edit a
title and a date, dismiss, search, snooze, open the task's email and close it. The test never clicks: every
step is a key pressed or text typed in Chromium, and each is checked in the page and in the database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import User
from extraction.models import ExtractionRun
from tasks.models import Task
from tasks.services import task_create
from tests.conftest import GmailBox, run_extraction
from tests.e2e.conftest import chromium, watch_errors
from tests.tasks.test_reading_pane import ASK, lease_mail

pytestmark = pytest.mark.e2e

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
ACTIVE_JS = """() => {
  const el = document.activeElement;
  const row = el && el.closest('#task-list > li.task');
  return {row: row ? row.id : null, action: el ? el.getAttribute('data-action') : null, id: el ? el.id : null,
          name: el ? el.getAttribute('name') : null, text: el ? el.textContent.trim().slice(0, 40) : null};
}"""


def active(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(ACTIVE_JS))


def tab_until(page: Any, wanted: Any, *, most: int, back: bool = False) -> int:
    """Press Tab (Shift+Tab when back) until wanted(active element) holds; returns the presses it took."""
    for presses in range(1, most + 1):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if wanted(active(page)):
            return presses
    raise AssertionError(f"not reached within {most} presses: focus is on {active(page)}")


def type_date(page: Any, day: date) -> None:
    """Chromium's date field (en-US: month, day, year) takes the digits typed in, a segment after the other."""
    page.keyboard.type(day.strftime("%m%d%Y"))


@pytest.fixture
def day(gmail: GmailBox, consenting_user: User, transactional_db: None) -> User:
    """A person with one task from an email (the lease) and three added by hand, newest first on the list."""
    gmail.deliver(lease_mail())
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    for title in ("Book the dentist", "Pay the gas bill", "Water the plants"):
        task_create(user=consenting_user, title=title)
    return consenting_user


@pytest.fixture(params=[1280, 390], ids=["1280", "390"])
def width(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def keyboard_page(live_site: str, width: int, _django_orm_beside_playwright: None) -> Iterator[Any]:
    with chromium() as browser:
        height = 900 if width > 600 else 844
        context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
        context.set_default_timeout(10_000)
        page = context.new_page()
        page_errors, server_errors = watch_errors(page)
        # A click anywhere would fail the test: the journey is the keyboard's alone.
        page.add_init_script(
            "document.addEventListener('mousedown', () => { throw new Error('the mouse was used'); }, true);"
        )
        # Two cores shared by the live server, the sandbox and Chromium: the list's answers may take over
        # the 5 s an expect() waits by default.
        expect.set_options(timeout=15_000)
        try:
            yield page
        finally:
            expect.set_options(timeout=5_000)
        assert page_errors == [] and server_errors == [], (page_errors, server_errors)
        context.close()
        connections.close_all()  # before Playwright stops (see conftest._chromium_page)


def row_of(page: Any, title: str) -> str:
    return str(page.locator("#task-list > li.task", has_text=title).get_attribute("id"))


def task_of(row: str) -> Task:
    return Task.objects.get(pk=int(row.removeprefix("task-")))


def test_keyboard_only_day(day: User, live_site: str, keyboard_page: Any, width: int) -> None:
    page = keyboard_page
    keys = page.keyboard
    wide = width >= 1100  # the reading pane beside the list (static/js/pane.js)

    # Sign in: the address has the focus (or Tab reaches it); type it, Tab to the password, Enter.
    page.goto(f"{live_site}/login/")
    if active(page)["name"] != "username":
        tab_until(page, lambda el: el["name"] == "username", most=10)
    keys.type(day.email)
    keys.press("Tab")
    assert active(page)["name"] == "password"
    keys.type(PASSWORD)
    keys.press("Enter")
    expect(page).to_have_url(f"{live_site}/")
    page.wait_for_load_state("networkidle")
    water, gas, dentist, lease = (row_of(page, t) for t in ("Water the plants", "Pay the gas bill", "Book", "lease"))

    # The lease (due Friday) comes first, then the tasks added by hand, newest first.
    order = page.locator("#task-list > li.task").evaluate_all("rows => rows.map(row => row.id)")
    assert order == [lease, water, gas, dentist]

    # The skip link, j to the next task, then Done: focus stays on the next task's Done.
    keys.press("Tab")
    assert active(page)["text"] == "Skip to your tasks"
    keys.press("Enter")
    assert active(page)["row"] == lease
    keys.press("j")
    assert active(page)["row"] == water
    keys.press("d")
    expect(page.locator(f"#{water}")).to_have_count(0)
    expect(page.locator("#undo")).to_contain_text("marked done")
    assert task_of(water).status == Task.Status.DONE
    assert active(page)["row"] == gas and active(page)["action"] == "done"

    # Undo: the task comes back, and focus with it.
    keys.press("z")
    expect(page.locator(f"#{water}")).to_have_count(1)
    expect(page.locator("#undo")).to_contain_text("Undone")
    expect(page.locator(f"#{water}:focus, #{water} :focus")).to_have_count(1)
    assert task_of(water).status == Task.Status.OPEN

    # Edit the title and the due date: e focuses the title; Tab to the date; Tab to Save and Enter.
    keys.press("j")
    assert active(page)["row"] == gas
    keys.press("e")
    title = page.locator(f"#{gas}.editing [data-field='title'] input")
    expect(title).to_be_focused()
    keys.press("Control+a")
    keys.type("Pay the gas and water bills")
    # The day after the lease's (its email says Friday: the date depends on today's weekday), so that the
    # task lands just below it whatever day the test runs on.
    lease_due = task_of(lease).due_date
    due = (lease_due or timezone.localdate()) + timedelta(days=1)
    tab_until(page, lambda el: el["name"] == "due_date", most=3)
    type_date(page, due)
    # Past the time (its fields, its picker), the priority, how it repeats and its reminder.
    tab_until(page, lambda el: el["action"] == "save", most=10)
    keys.press("Enter")
    expect(page.locator(f"#{gas} .task-title")).to_have_text("Pay the gas and water bills")
    expect(page.locator(f"#{gas} .badge.due")).to_have_attribute("data-due", due.isoformat())
    expect(page.locator(f"#{gas}:focus, #{gas} :focus")).to_have_count(1)
    edited = task_of(gas)
    assert (edited.title, edited.due_date) == ("Pay the gas and water bills", due)

    # A new due date redraws the list (the task may change group); a key pressed before it is back acts on a
    # row the redraw replaces, and the answer's Undo notice is lost (htmx drops the answer of a removed row).
    # Here it joins the lease among the tasks due soon, above the two without a date.
    expect(page.locator("#task-list > li.task")).to_have_count(4)
    page.wait_for_function(
        "ids => JSON.stringify([...document.querySelectorAll('#task-list > li.task')].map(r => r.id)) === ids",
        arg=json.dumps([lease, gas, water, dentist]).replace(" ", ""),
    )
    page.wait_for_load_state("networkidle")
    expect(page.locator(f"#{gas}:focus, #{gas} :focus")).to_have_count(1)

    # Dismiss the dentist: # on the task focused.
    keys.press("j")
    assert active(page)["row"] == water
    keys.press("j")
    assert active(page)["row"] == dentist
    keys.press("#")
    expect(page.locator(f"#{dentist}")).to_have_count(0)
    expect(page.locator("#undo")).to_contain_text("dismissed")
    assert task_of(dentist).status == Task.Status.DISMISSED

    # Search: / goes to the field; the list shows what matches; Tab leads back into the list.
    keys.press("/")
    expect(page.locator("#search")).to_be_focused()
    keys.type("lease")
    expect(page.locator("#task-list > li.task")).to_have_count(1)
    expect(page.locator(f"#{lease}")).to_have_count(1)
    tab_until(page, lambda el: el["row"] == lease, most=15)

    # The reading pane: o opens the email, the asking sentence marked; Escape closes it, focus back on the task.
    keys.press("o")
    pane = page.locator("#email-pane")
    expect(pane).to_be_visible()
    expect(pane.locator("mark")).to_have_text(ASK)
    if wide:  # beside the list, which keeps the focus
        assert active(page)["row"] == lease
    else:  # the whole screen, which takes it
        expect(page.locator("#email-pane-title")).to_be_focused()
    keys.press("Escape")
    expect(pane).to_be_hidden()
    assert active(page)["row"] == lease

    # Snooze: s opens the task's date field; a date and Enter take the task off the list until then.
    keys.press("s")
    field = page.locator(f"#{lease} input[name='snoozed_until']")
    expect(field).to_be_focused()
    until = timezone.localdate() + timedelta(days=7)
    type_date(page, until)
    keys.press("Enter")
    expect(page.locator("#undo")).to_contain_text("snoozed until")
    expect(page.locator(f"#{lease}")).to_have_count(0)
    assert task_of(lease).snoozed_until == until

    # The search cleared from the keyboard, the rest of the day's list is there.
    keys.press("/")
    keys.press("Control+a")
    keys.press("Backspace")
    expect(page.locator("#task-list > li.task")).to_have_count(2)
    assert set(
        Task.objects.filter(user=day, status=Task.Status.OPEN, snoozed_until=None).values_list("title", flat=True)
    ) == {
        "Water the plants",
        "Pay the gas and water bills",
    }

    # ? lists the keys, snooze's among them; Escape closes the list.
    tab_until(page, lambda el: el["row"] is not None, most=15)
    keys.press("?")
    expect(page.locator("#keys-help")).to_contain_text("Snooze the task to a date")
    keys.press("Escape")
    expect(page.locator("#keys-help")).to_be_hidden()
