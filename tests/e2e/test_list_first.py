"""The list first (issue 31): the page a person opens every morning, with the demo list, in Chromium at 1280x800
and 390x844. The tasks are on the first screen, the header fits a phone, each row shows one action and keeps
the others in its menu (the WAI-ARIA menu button pattern), and at 1280 the email is read beside its task.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.demo import load_demo_mailbox
from sandbox.server import SandboxServer
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.e2e.conftest import chromium, open_row_menu, watch_errors

pytestmark = pytest.mark.e2e

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
NAV_ITEMS = ("nav-tasks", "nav-mailboxes", "nav-consent", "nav-settings", "logout")
MENU_ACTIONS = ("dismiss", "snooze", "edit", "read", "mute-sender")

# The rows of the open list wholly inside the viewport, without scrolling (a row in a collapsed group is not shown).
WHOLE_ROWS_JS = """() => Array.from(document.querySelectorAll('#task-list li.task')).filter(row => {
  if (row.closest('details:not([open])')) return false;
  const box = row.getBoundingClientRect();
  return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
}).length"""

# Every control of a row a person sees (not those in its closed menu), and how big each is.
VISIBLE_CONTROLS_JS = """row => Array.from(row.querySelectorAll('.task-actions :is(button, a, summary)'))
  .filter(el => el.checkVisibility())
  .map(el => { const b = el.getBoundingClientRect();
               return {action: el.dataset.action || el.textContent.trim(), width: b.width, height: b.height}; })"""


@dataclass(frozen=True)
class Day:
    user: User
    tasks: int  # open tasks after the first read of the demo inbox


@pytest.fixture
def demo_day(gmail: GmailBox, sandbox_server: SandboxServer, transactional_db: None) -> Day:
    """A person whose Gmail holds the demo inbox, read once by the real extraction (the sandbox's Gemini)."""
    load_demo_mailbox(sandbox_server.state, gmail.address)
    user = gmail.integration.user
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    count = Task.objects.filter(user=user, status=Task.Status.OPEN).count()
    assert count >= 8, f"the demo inbox gave only {count} open tasks"
    return Day(user=user, tasks=count)


@pytest.fixture
def browser(live_site: str, _django_orm_beside_playwright: None) -> Iterator[Any]:
    with chromium() as browser:
        yield browser
        connections.close_all()  # before Playwright stops (see tests/e2e/conftest.py's _chromium_page)


def signed_in_page(browser: Any, live_site: str, user: User, viewport: dict[str, int]) -> Any:
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"{live_site}/login/")
    page.get_by_label("Email address").fill(user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator("#task-list li.task").first).to_be_attached()
    return page


@pytest.mark.parametrize(("viewport", "least"), [(DESKTOP, 8), (PHONE, 4)], ids=["1280x800", "390x844"])
def test_above_the_fold_the_demo_list_shows_whole_task_rows(
    demo_day: Day, live_site: str, browser: Any, viewport: dict[str, int], least: int
) -> None:
    page = signed_in_page(browser, live_site, demo_day.user, viewport)
    page_errors, server_errors = watch_errors(page)
    page.reload()
    expect(page.locator("#task-list > li.task").first).to_be_visible()
    whole = page.evaluate(WHOLE_ROWS_JS)
    page.screenshot(path=f"{_shots()}/list-first-{viewport['width']}.png")
    assert whole >= least, f"{whole} whole task rows on the first screen at {viewport}, not {least}"
    assert page.evaluate("window.scrollY") == 0
    assert page_errors == [] and server_errors == [], (page_errors, server_errors)


def test_header_fits_a_phone_with_every_navigation_item_visible_or_in_the_menu(
    demo_day: Day, live_site: str, browser: Any
) -> None:
    page = signed_in_page(browser, live_site, demo_day.user, PHONE)
    sizes = page.evaluate(
        """() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth,
                  header: document.querySelector('header.topbar').scrollWidth,
                  headerBox: document.querySelector('header.topbar').clientWidth,
                  brandLines: Math.round(document.querySelector('.brand').getBoundingClientRect().height /
                                         parseFloat(getComputedStyle(document.querySelector('.brand')).lineHeight))})"""
    )
    assert sizes["page"] <= sizes["viewport"], f"the page scrolls sideways at 390 px: {sizes}"
    assert sizes["header"] <= sizes["headerBox"], f"the header scrolls sideways at 390 px: {sizes}"
    assert sizes["brandLines"] == 1, f"the logo breaks: {sizes}"
    toggle = page.locator("#nav-toggle")
    expect(toggle).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    for item in NAV_ITEMS:
        expect(page.locator(f"#{item}")).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    for item in NAV_ITEMS:
        link = page.locator(f"#{item}")
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (item, box)
        assert box["height"] >= 44, (item, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    page.locator("#nav-mailboxes").evaluate("link => link.closest('nav')")  # still in the page
    page.screenshot(path=f"{_shots()}/header-390.png")

    wide = signed_in_page(browser, live_site, demo_day.user, DESKTOP)
    expect(wide.locator("#nav-toggle")).to_be_hidden()
    for item in NAV_ITEMS:
        expect(wide.locator(f"#{item}")).to_be_visible()
    header = wide.locator("header.topbar").bounding_box()
    assert header is not None and header["height"] <= 64, f"the header takes {header} at 1280"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_row_menu_one_visible_action_the_others_in_the_menu_by_pointer_and_keyboard(
    demo_day: Day, live_site: str, browser: Any, viewport: dict[str, int]
) -> None:
    page = signed_in_page(browser, live_site, demo_day.user, viewport)
    page_errors, server_errors = watch_errors(page)
    rows = page.locator("#task-list > li.task")
    for index in range(min(rows.count(), 6)):
        controls = rows.nth(index).evaluate(VISIBLE_CONTROLS_JS)
        actions = [control["action"] for control in controls]
        assert actions == ["done", "menu"], f"row {index} shows {actions}"
        if viewport is PHONE:
            for control in controls:
                assert control["width"] >= 44 and control["height"] >= 44, control
    row = rows.filter(has=page.locator("[data-action='read']")).first
    task_id = row.get_attribute("data-task-id")
    button = row.locator("[data-action='menu']")
    expect(button).to_have_attribute("aria-haspopup", "menu")
    expect(button).to_have_attribute("aria-expanded", "false")

    # Pointer: the menu opens below its button, holds every other action, and "Never make tasks from this sender"
    # is set apart from the others by a separator.
    menu = open_row_menu(row)
    expect(button).to_have_attribute("aria-expanded", "true")
    items = menu.get_by_role("menuitem")
    actions = items.evaluate_all("items => items.map(item => item.dataset.action)")
    assert actions == list(MENU_ACTIONS), actions
    separated = menu.evaluate(
        "menu => menu.querySelector('[role=separator]').nextElementSibling.contains("
        "menu.querySelector('[data-action=\"mute-sender\"]'))"
    )
    assert separated, "the mute is not set apart"
    for index in range(items.count()):
        box = items.nth(index).bounding_box()
        assert box is not None and box["height"] >= 44 and box["x"] >= 0, box
        assert box["x"] + box["width"] <= viewport["width"], box
    page.mouse.click(2, viewport["height"] - 2)  # a click elsewhere closes it
    expect(menu).to_be_hidden()
    expect(button).to_have_attribute("aria-expanded", "false")

    # Keyboard: Enter opens it on its first item, the arrows move, Escape closes it and gives focus back.
    button.focus()
    page.keyboard.press("Enter")
    expect(menu).to_be_visible()
    expect(items.nth(0)).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(items.nth(1)).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(items.nth(len(MENU_ACTIONS) - 1)).to_be_focused()  # it wraps round
    page.keyboard.press("Home")
    expect(items.nth(0)).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(button).to_be_focused()

    # Edit from the menu by keyboard: ArrowDown opens on the first item; End, then up to Edit, then Enter.
    page.keyboard.press("ArrowDown")
    expect(items.nth(0)).to_be_focused()
    for _ in range(MENU_ACTIONS.index("edit")):
        page.keyboard.press("ArrowDown")
    expect(items.nth(MENU_ACTIONS.index("edit"))).to_be_focused()
    page.keyboard.press("Enter")
    editing = page.locator(f"#task-{task_id}.editing")
    expect(editing).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(f"#task-{task_id}.editing")).to_have_count(0)

    # The shortcuts act on the row without opening its menu: s opens the snooze date, Escape closes it.
    row = page.locator(f"#task-{task_id}")
    focus_row(row)
    page.keyboard.press("s")
    snooze = row.locator("[data-snooze]")
    expect(snooze.locator("input[name='snoozed_until']")).to_be_focused()
    page.keyboard.press("Escape")
    expect(snooze.locator("input[name='snoozed_until']")).to_be_hidden()
    expect(row.locator("[data-action='menu']")).to_be_focused()

    # Snooze from the menu: its date field opens where the menu was.
    menu = open_row_menu(row)
    menu.locator("[data-action='snooze']").click()
    expect(menu).to_be_hidden()
    expect(snooze.locator("input[name='snoozed_until']")).to_be_focused()
    page.keyboard.press("Escape")
    expect(snooze.locator("input[name='snoozed_until']")).to_be_hidden()

    # Dismiss from the menu takes the row away with its Undo, as Done does.
    menu = open_row_menu(row)
    menu.locator("[data-action='dismiss']").click()
    expect(page.locator(f"#task-{task_id}")).to_have_count(0)
    expect(page.locator("#undo")).to_contain_text("dismissed")
    assert Task.objects.get(pk=task_id).status == Task.Status.DISMISSED
    page.screenshot(path=f"{_shots()}/row-menu-{viewport['width']}.png")
    assert page_errors == [] and server_errors == [], (page_errors, server_errors)


def test_split_pane_beside_the_list_at_1280_follows_j_and_k_and_is_a_full_screen_view_with_back_at_390(
    demo_day: Day, live_site: str, browser: Any
) -> None:
    page = signed_in_page(browser, live_site, demo_day.user, DESKTOP)
    page_errors, server_errors = watch_errors(page)
    with_email = page.locator("#task-list > li.task").filter(has=page.locator("[data-action='read']"))
    first, second = with_email.nth(0), with_email.nth(1)
    first_id, second_id = first.get_attribute("data-task-id"), second.get_attribute("data-task-id")
    focus_row(first)
    page.keyboard.press("o")
    pane = page.locator("#email-pane")
    expect(pane.locator(f"#email-pane-content[data-task-id='{first_id}']")).to_be_visible()
    expect(pane.locator("#pane-text")).not_to_be_empty()
    listed = page.locator("#task-list").bounding_box()
    beside = pane.bounding_box()
    assert listed is not None and beside is not None
    assert beside["x"] >= listed["x"] + listed["width"], f"the pane is not beside the list: {listed} {beside}"
    assert beside["y"] < 800 and beside["height"] > 300, beside
    assert page.evaluate("document.querySelector('dialog[open]')") is None, "the pane is a modal"
    expect(first).to_be_focused()  # the list keeps the focus

    # j moves on, and the pane follows with the next task's email; k comes back.
    page.keyboard.press("j")
    focused = page.evaluate("document.activeElement.closest('li.task')?.dataset.taskId")
    expect(pane.locator(f"#email-pane-content[data-task-id='{focused}']")).to_be_visible()
    if focused != second_id:  # a task added by hand between them: j again until the second email
        while focused != second_id:
            page.keyboard.press("j")
            focused = page.evaluate("document.activeElement.closest('li.task')?.dataset.taskId")
    expect(pane.locator(f"#email-pane-content[data-task-id='{second_id}']")).to_be_visible()
    page.keyboard.press("k")
    expect(pane.locator("#email-pane-content")).to_have_attribute(
        "data-task-id", page.evaluate("document.activeElement.closest('li.task').dataset.taskId")
    )
    # The list scrolls while the pane stays in view.
    page.mouse.wheel(0, 600)
    page.wait_for_function("() => window.scrollY > 0")
    after = pane.bounding_box()
    assert after is not None and 0 <= after["y"] < 800, f"the pane left the screen when the list scrolled: {after}"
    page.screenshot(path=f"{_shots()}/split-pane-1280.png")
    page.keyboard.press("Escape")
    expect(pane).to_be_hidden()
    assert page_errors == [] and server_errors == [], (page_errors, server_errors)

    phone = signed_in_page(browser, live_site, demo_day.user, PHONE)
    row = phone.locator(f"#task-{first_id}")
    open_row_menu(row).locator("[data-action='read']").click()
    pane = phone.locator("#email-pane")
    expect(pane.locator(f"#email-pane-content[data-task-id='{first_id}']")).to_be_visible()
    box = pane.bounding_box()
    assert box is not None and box["x"] == 0 and box["width"] == PHONE["width"], f"not full-screen: {box}"
    assert box["height"] >= PHONE["height"] - 1, f"not full-screen: {box}"
    back = pane.get_by_role("button", name="Back")
    expect(back).to_be_visible()
    phone.screenshot(path=f"{_shots()}/pane-390.png")
    back.click()
    expect(pane).to_be_hidden()
    expect(row.locator("[data-action='menu']")).to_be_focused()


def focus_row(row: Any) -> None:
    """Put the focus on a task row, as the keys j and k do (static/js/keys.js)."""
    row.evaluate("row => { row.tabIndex = -1; row.focus(); }")


def _shots() -> str:
    from tests.e2e.conftest import SHOTS

    SHOTS.mkdir(parents=True, exist_ok=True)
    return str(SHOTS)


def test_own_address_no_mute_in_the_menu_of_a_promise_or_a_waiting_item_of_the_demo(
    demo_day: Day, live_site: str, browser: Any
) -> None:
    """The demo's Sent mail gives a promise and a waiting item: neither offers to mute the person's own address,
    while an ask from someone else does (tests/extraction/test_own_address.py: the service and the API refuse it,
    and migration 0018 lifts such mutes made before)."""
    promise = Task.objects.get(user=demo_day.user, kind=Task.Kind.COMMITMENT)
    waiting = Task.objects.get(user=demo_day.user, kind=Task.Kind.WAITING)
    page = signed_in_page(browser, live_site, demo_day.user, DESKTOP)
    ask = page.locator("#task-list > li.task[data-kind='ask']").filter(has=page.locator("[data-action='read']"))
    expect(open_row_menu(ask.first).locator("[data-action='mute-sender']")).to_have_count(1)
    page.keyboard.press("Escape")
    menu = open_row_menu(page.locator(f"#task-{promise.pk}"))
    expect(menu.get_by_role("menuitem")).not_to_have_count(0)
    expect(menu.locator("[data-action='mute-sender'], [role='separator']")).to_have_count(0)
    page.keyboard.press("Escape")
    page.goto(f"{live_site}/?kind=waiting")
    menu = open_row_menu(page.locator(f"#task-{waiting.pk}"))
    expect(menu.locator("[data-action='mute-sender'], [role='separator']")).to_have_count(0)
