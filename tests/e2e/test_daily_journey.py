"""A person's whole day with Tasklift in Chromium, as the issue's must-show lists it.

Sign up (the time zone comes from the browser) → the email's confirmation link → AI consent → connect the demo Gmail and
Outlook mailboxes of that address (the same 46 emails in both, 3 of them Sent mail) → Extract now → 30 tasks on the open
list, not 60 (an ask done by the person's reply, a promise of theirs), each with both mailbox badges → edit a title and
a due date → Done + Undo → Dismiss → the Done view (with "Done by your reply") → search → a run started through the API
with a personal access token shows its new task in the open page without a reload → the session ends elsewhere and Done
lands on the login page → the token lists the tasks, and no token is a 401.

Each state is photographed at 1280 px and at 390 px under test-artifacts/journey/, and every page is checked
not to be wider than a 390 px phone.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from django.conf import settings
from django.db import connections
from django.utils import timezone
from playwright.sync_api import Page, ViewportSize, expect

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration
from reminders.jobs import reminder_send_job
from reminders.models import Reminder
from sandbox.client import SandboxClient
from sandbox.demo import load_demo_mailbox, load_demo_outlook
from sandbox.demo.messages import CLOSED_BY_REPLY, EXPECTED_OPEN, EXPECTED_TASKS, EXPECTED_WAITING
from sandbox.server import SandboxServer
from tasks.models import Task, TaskLink
from tasks.services import task_create, task_set_status
from tests.e2e.conftest import (
    FINISHED,
    ROWS_JS,
    RUN_TIMEOUT_MS,
    chromium,
    confirm_signup,
    earlier_open,
    open_navigation,
    press_extract_now,
    push_subscribe_page,
    row_action,
    service_worker_push,
    watch_errors,
)
from tests.factories import IntegrationFactory, UserFactory

ARTIFACTS = settings.BASE_DIR / "test-artifacts" / "journey"
WIDE: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIME_ZONE = "Pacific/Auckland"
ADDRESS = "journey@tasklift.test"
PASSWORD = "a-long-journey-passphrase-7"
PHONE_PAGES = [
    "/",
    "/?status=done",
    "/mailboxes/",
    "/settings/",
    "/consent/",
    "/login/",
    "/signup/",
    "/signup/check-your-inbox/",
    "/password-reset/",
    "/api/docs",
]
LIVE_WITHIN_MS = 15_000  # the open list polls every 4 s; the run itself takes a moment in the worker

# The tasks the journey acts on, by the subject of their email (each yields exactly one task).
EDITED = "Venue options for the team offsite"
DONE_AND_UNDONE = "Sprint planning moved to Thursday"
DISMISSED = "Laptop refresh: choose a delivery slot"
SEARCHED = "URGENT: purchase order PO-7781 waiting on your approval"
SEARCH_WORDS = "PO-7781"
NEW_SUBJECT = "Keys for the studio lease"


# Fixtures ------------------------------------------------------------------------------------------
@pytest.fixture
def journey_mailboxes(sandbox: SandboxClient, sandbox_server: SandboxServer) -> str:
    """The sandbox (reset by `sandbox`) with the demo Gmail and Outlook inboxes of the new account's address."""
    load_demo_mailbox(sandbox_server.state, ADDRESS)
    load_demo_outlook(sandbox_server.state, ADDRESS)
    return ADDRESS


@pytest.fixture
def journey_browser(_django_orm_beside_playwright: None) -> Iterator[Any]:
    """Chromium; the Django connections the test body opened meanwhile are closed before Playwright stops."""
    with chromium() as browser:
        try:
            yield browser
        finally:
            connections.close_all()  # see conftest._chromium_page


# Steps ---------------------------------------------------------------------------------------------
def phone_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def snap(page: Page, name: str) -> None:
    """`name`-1280.png and `name`-390.png of the page as it is now (the viewport is resized, not reloaded);
    at 390 px the page must not scroll sideways."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    journey = page.viewport_size or WIDE
    page.set_viewport_size(WIDE)
    page.screenshot(path=str(ARTIFACTS / f"{name}-1280.png"), full_page=True)
    page.set_viewport_size(PHONE)
    width = phone_width(page)
    page.screenshot(path=str(ARTIFACTS / f"{name}-390.png"), full_page=True)
    page.set_viewport_size(journey)
    assert width <= PHONE["width"], f"{name}: {page.url} is {width}px wide at 390px"


def nav_to(page: Page, item: str) -> None:
    """Follow a link of the header's navigation, behind "Menu" on a phone, as a person would."""
    open_navigation(page)
    page.locator(f"#{item}").click()


def connect_mailbox(page: Page, live_site: str, provider: str) -> None:
    """Mailboxes → Connect Gmail/Outlook → the sandbox consent page, with the new account's address typed in
    → Allow/Accept → back on Mailboxes with the mailbox active."""
    nav_to(page, "nav-mailboxes")
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    if provider == "Gmail":
        page.locator("#connect-gmail").click()
        expect(page).to_have_url(re.compile("^" + re.escape(f"{settings.SANDBOX_URL}/google/o/oauth2/auth?")))
        decision = "Allow"
    else:
        page.locator("#connect-outlook").click()
        authorize = f"{settings.SANDBOX_URL}/{settings.MICROSOFT_TENANT}/oauth2/v2.0/authorize?"
        expect(page).to_have_url(re.compile("^" + re.escape(authorize)))
        decision = "Accept"
    page.get_by_label("Account email").fill(ADDRESS)
    page.get_by_role("button", name=decision).click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    expect(page.locator(".messages")).to_contain_text(f"{provider} {ADDRESS} is connected.")
    mailbox = page.locator("#mailbox-list > li").filter(
        has=page.locator("strong", has_text=re.compile(f"^{provider}$"))
    )
    expect(mailbox).to_have_count(1)
    expect(mailbox.locator(".address")).to_have_text(ADDRESS)
    expect(mailbox.locator(".badge")).to_have_text("Active")


def read_rows(page: Page) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.locator("#task-list li.task").evaluate_all(
        ROWS_JS.replace("return {", "return {id: row.dataset.taskId,")
    )
    return rows


def row_of(page: Page, subject: str) -> Any:
    """The open list's row of the task from the email with this subject."""
    return page.locator("#task-list li.task").filter(
        has=page.locator("a.email-link", has_text=re.compile(f"^{re.escape(subject)}$"))
    )


def group_of(page: Page, task_id: int) -> str | None:
    """The due-date group heading (overdue, today, upcoming, no_date) the row sits under."""
    group: str | None = page.evaluate(
        """id => {
            let el = document.getElementById('task-' + id);
            while (el && !el.classList.contains('group-heading')) el = el.previousElementSibling;
            return el ? el.dataset.group : null;
        }""",
        task_id,
    )
    return group


def ask_email(address: str) -> str:
    """One new email with one ask in it (sandbox/READER.md: one sentence with an ask phrase)."""
    now = datetime.now(ZoneInfo("UTC"))
    return (
        "From: Maya Okafor <maya@example.org>\r\n"
        f"To: {address}\r\n"
        f"Subject: {NEW_SUBJECT}\r\n"
        f"Date: {format_datetime(now)}\r\n"
        f"Message-ID: <journey-{uuid.uuid4().hex}@example.org>\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "\r\n"
        "Hi,\r\n\r\n"
        "Could you drop the spare keys at the studio reception.\r\n\r\n"
        "Maya\r\n"
    )


def api(live_site: str, method: str, path: str, token: str | None, json: Any = None) -> requests.Response:
    """A program's request to the API, like curl: no cookies, the token (if any) as a Bearer header."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with requests.Session() as session:
        session.trust_env = False  # no proxy between the test and its own live server
        return session.request(method, f"{live_site}{path}", headers=headers, json=json, timeout=10)


# The journey ---------------------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280", "390"])
def test_daily_journey(
    live_site: str,
    journey_mailboxes: str,
    sandbox: SandboxClient,
    celery_worker: Any,
    journey_browser: Any,
    viewport: ViewportSize,
) -> None:
    context = journey_browser.new_context(viewport=viewport, timezone_id=TIME_ZONE)
    context.set_default_timeout(10_000)
    page: Page = context.new_page()
    page_errors, server_errors = watch_errors(page)
    expected_tasks = sum(EXPECTED_OPEN.values())  # the open list: asks and promises
    assert expected_tasks == 30

    # 1. Sign up: the time zone is the browser's.
    page.goto(f"{live_site}/signup/")
    page.get_by_label("Email address").fill(ADDRESS)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password confirmation").fill(PASSWORD)
    expect(page.locator("input[name=timezone]")).to_have_value(TIME_ZONE)
    snap(page, "01-signup")
    page.get_by_role("button", name="Sign up").click()
    confirm_signup(page, live_site, ADDRESS)
    expect(page.locator(".topbar .who")).to_have_text(ADDRESS)
    user = User.objects.get(email=ADDRESS)
    assert user.timezone == TIME_ZONE
    expect(page.locator("#consent-needed")).to_be_visible()
    expect(page.locator("#mailbox-needed")).to_be_visible()

    # 2. AI consent.
    nav_to(page, "nav-consent")
    expect(page.locator("#consent-status")).to_contain_text("No consent")
    snap(page, "02-consent")
    page.get_by_role("button", name=re.compile(r"^I agree")).click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator(".messages")).to_contain_text("Tasklift may now send your new email to Gemini")
    expect(page.locator("#consent-needed")).to_have_count(0)

    # 3. Both demo mailboxes of the address: Gmail and Outlook.
    connect_mailbox(page, live_site, "Gmail")
    connect_mailbox(page, live_site, "Outlook")
    expect(page.locator("#mailbox-list > li")).to_have_count(2)
    expect(page.locator("#mailbox-list > li[data-healthy]")).to_have_count(2)
    snap(page, "03-mailboxes")

    # 4. Extract now: 30 tasks, not 60, each with a Gmail and an Outlook badge.
    ended = press_extract_now(page, live_site)
    run = ExtractionRun.objects.get(user=user)
    assert ended == "succeeded", f"run ended {run.status}: {run.error_code} {run.error_message}"
    tasks = page.locator("#task-list li.task")
    # Last week's mail already past due is under "From before you connected", collapsed (its count alone):
    # opened to act on it, its rows come (and it stays open through the redraws the run's end brings).
    earlier_open(page)
    expect(tasks).to_have_count(expected_tasks)
    expect(page.locator("#run-status")).to_contain_text(f"{EXPECTED_TASKS} tasks created")
    rows = read_rows(page)
    wanted = Counter(EXPECTED_OPEN)
    shown = Counter(row["subject"] for row in rows)
    assert shown == wanted, f"missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    badges = tasks.evaluate_all(
        "rows => rows.map(row => Array.from(row.querySelectorAll('a.mailbox-link'))"
        ".map(link => [link.dataset.provider, link.getAttribute('href')]))"
    )
    for row, row_badges in zip(rows, badges, strict=True):
        assert sorted(provider for provider, _ in row_badges) == ["gmail", "outlook"], (row, row_badges)
        for provider, href in row_badges:
            prefix = "https://mail.google.com/" if provider == "gmail" else "https://outlook.office365.com/"
            assert href.startswith(prefix), (row, provider, href)
    assert Task.objects.filter(user=user).count() == EXPECTED_TASKS  # with the waiting item and the closed ask
    assert TaskLink.objects.filter(task__user=user).count() == 2 * EXPECTED_TASKS
    snap(page, "04-tasks")

    # 5. Edit a title and a due date in place: the row moves to another group (in the person's time zone).
    # Its ask is "by Monday" of the email's date, so the group it starts in depends on the weekday of the run:
    # it is moved to "Upcoming", or to "Today" when it is upcoming already.
    edited = row_of(page, EDITED)
    expect(edited).to_have_count(1)
    edited_id = int(str(edited.get_attribute("data-task-id")))
    today = timezone.now().astimezone(ZoneInfo(TIME_ZONE)).date()
    before = group_of(page, edited_id)
    target, due = ("today", today) if before == "upcoming" else ("upcoming", today + timedelta(days=5))
    # As a person would, on a list that has finished redrawing after the run: an edit asked for while a refresh
    # is on its way is swapped into a row the refresh then replaces (seen about once in seven runs).
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    row_action(edited, "edit")
    form = page.locator(f"#task-{edited_id}.editing")
    expect(form).to_be_visible()
    form.locator(f"#task-{edited_id}-title").fill("Book the offsite venue by Friday")
    form.locator(f"#task-{edited_id}-due_date").fill(due.isoformat())
    form.locator('[data-action="save"]').click()
    edited = page.locator(f"#task-{edited_id}")
    expect(edited.locator(".task-title")).to_have_text("Book the offsite venue by Friday")
    expect(edited.locator(".badge.due")).to_have_attribute("data-due", due.isoformat())
    page.wait_for_function(
        """([id, group]) => {
            let el = document.getElementById('task-' + id);
            while (el && !el.classList.contains('group-heading')) el = el.previousElementSibling;
            return el && el.dataset.group === group;
        }""",
        arg=[edited_id, target],
    )  # the list fetched itself again after the save
    saved = Task.objects.get(pk=edited_id)
    assert (saved.title, saved.due_date) == ("Book the offsite venue by Friday", due)
    expect(tasks).to_have_count(expected_tasks)
    snap(page, "05-edited")

    # 6. Done, then Undo: the task is back.
    undone = row_of(page, DONE_AND_UNDONE)
    undone_id = int(str(undone.get_attribute("data-task-id")))
    undone.locator('[data-action="done"]').click()
    expect(page.locator("#undo")).to_contain_text("marked done")
    expect(page.locator(f"#task-{undone_id}")).to_have_count(0)
    expect(tasks).to_have_count(expected_tasks - 1)
    assert Task.objects.get(pk=undone_id).status == Task.Status.DONE
    snap(page, "06-done-with-undo")
    page.locator("#undo-button").click()
    expect(page.locator("#undo")).to_contain_text("Undone.")
    expect(page.locator(f"#task-{undone_id}")).to_have_count(1)
    expect(tasks).to_have_count(expected_tasks)
    assert Task.objects.get(pk=undone_id).status == Task.Status.OPEN

    # 7. Dismiss one; mark the edited one done (for the Done view).
    dismissed = row_of(page, DISMISSED)
    dismissed_id = int(str(dismissed.get_attribute("data-task-id")))
    row_action(dismissed, "dismiss")
    expect(page.locator("#undo")).to_contain_text("dismissed")
    expect(tasks).to_have_count(expected_tasks - 1)
    snap(page, "07-dismissed")
    page.locator(f'#task-{edited_id} [data-action="done"]').click()
    expect(page.locator("#undo")).to_contain_text("marked done")
    expect(tasks).to_have_count(expected_tasks - 2)
    assert Task.objects.get(pk=dismissed_id).status == Task.Status.DISMISSED
    assert Task.objects.get(pk=edited_id).status == Task.Status.DONE

    # 8. The Done view: the edited task, with its new title and due date, and the ask the person's reply closed.
    page.locator("#tab-done").click()
    expect(page).to_have_url(f"{live_site}/?status=done")
    expect(page.locator("#tab-done")).to_have_attribute("aria-current", "page")
    expect(tasks).to_have_count(1 + sum(CLOSED_BY_REPLY.values()))
    expect(page.locator("#task-list .closed-by-words")).to_have_text([re.compile("^Done by your reply")])
    expect(page.locator(f"#task-{edited_id} .task-title")).to_have_text("Book the offsite venue by Friday")
    expect(page.locator(f"#task-{edited_id} .badge.due")).to_have_attribute("data-due", due.isoformat())
    expect(page.locator(f'#task-{edited_id} [data-action="reopen"]')).to_be_visible()
    snap(page, "08-done-view")
    page.locator("#tab-dismissed").click()
    expect(page).to_have_url(f"{live_site}/?status=dismissed")
    expect(tasks).to_have_count(1)
    expect(page.locator(f"#task-{dismissed_id}")).to_be_visible()

    # 9. Search the open tasks: the list narrows as one types, and the search goes into the address.
    page.locator("#tab-open").click()
    expect(page).to_have_url(f"{live_site}/")
    earlier_open(page)  # a new page: the group collapsed again
    expect(tasks).to_have_count(expected_tasks - 2)
    page.locator("#search").fill(SEARCH_WORDS)
    expect(tasks).to_have_count(1)
    expect(row_of(page, SEARCHED)).to_have_count(1)
    expect(page).to_have_url(f"{live_site}/?q={SEARCH_WORDS}")
    snap(page, "09-search")
    page.locator("#search").fill("")
    expect(tasks).to_have_count(expected_tasks - 2)
    expect(page).to_have_url(f"{live_site}/")

    # 10. A personal access token, made on Settings in a second tab of the same browser.
    tab = context.new_page()
    tab_errors, tab_server_errors = watch_errors(tab)
    tab.goto(f"{live_site}/settings/")
    expect(tab.locator("#no-tokens")).to_be_visible()
    tab.get_by_label("Token name").fill("my journey script")
    tab.locator("#create-token").click()
    secret = tab.locator("#new-token-value").input_value()
    assert secret, "no token shown"
    expect(tab.locator("#token-list [data-token-id]")).to_have_count(1)
    expect(tab.locator("#token-list .token-name")).to_have_text("my journey script")
    snap(tab, "10-settings-token")

    # 11. New mail with an ask, a run started through the API with the token: the open page shows the run
    # and the new task by itself, without a reload.
    page.evaluate("window.__noReload = true")
    sandbox.deliver(ADDRESS, ask_email(ADDRESS))
    started = api(live_site, "POST", "/api/extraction/runs", secret)
    assert started.status_code == 202, (started.status_code, started.text)
    run_id = started.json()["id"]
    assert started.json()["trigger"] == ExtractionRun.Trigger.API
    expect(page.locator("#run-status")).to_have_attribute("data-run-id", str(run_id), timeout=LIVE_WITHIN_MS)
    expect(row_of(page, NEW_SUBJECT)).to_have_count(1, timeout=LIVE_WITHIN_MS)
    expect(page.locator("#run-status")).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#run-status")).to_contain_text("1 task created")
    expect(tasks).to_have_count(expected_tasks - 1)
    new_row = row_of(page, NEW_SUBJECT)
    expect(new_row.locator(".meta")).to_contain_text("Maya Okafor")
    expect(new_row.locator("a.mailbox-link")).to_have_count(1)
    expect(new_row.locator("a.mailbox-link")).to_have_attribute("data-provider", "gmail")
    assert page.evaluate("window.__noReload === true"), "the page was reloaded"
    snap(page, "11-live-run")

    # 11b. A reminder by Web Push: notifications turned on in this browser (Settings), a task at a time with a
    # reminder added through the API, rung by the worker (beat's scan, sent here at once): the push service
    # decrypts it, and the service worker shows it, opening the task when clicked. Then it is done (the open
    # list is as it was).
    push_subscribe_page(tab, live_site, sandbox)
    tomorrow = timezone.now().astimezone(ZoneInfo(TIME_ZONE)).date() + timedelta(days=1)
    reminded = api(
        live_site,
        "POST",
        "/api/tasks",
        secret,
        json={
            "title": "Call the landlord",
            "due_date": f"{tomorrow}",
            "due_time": "09:00",
            "reminder_minutes_before": 15,
        },
    )
    assert reminded.status_code == 201 and reminded.json()["reminder_minutes_before"] == 15, reminded.text
    reminded_id = reminded.json()["id"]
    Reminder.objects.filter(task_id=reminded_id).update(remind_at=timezone.now())  # its time has come
    reminder_send_job.delay()
    deadline = time.monotonic() + 20
    while not sandbox.webpush_messages() and time.monotonic() < deadline:
        time.sleep(0.2)
    [pushed] = sandbox.webpush_messages()
    notified = service_worker_push(tab, live_site, pushed["payload"])
    assert notified == [
        {"title": "Call the landlord", "body": "Due at 09:00", "url": f"{live_site}/tasks/{reminded_id}"}
    ]
    assert api(live_site, "PATCH", f"/api/tasks/{reminded_id}", secret, json={"status": "done"}).status_code == 200

    # 12. The session ends in the other tab; Done in this one lands on the login page, and nothing changed.
    # The list's poller answers "nothing new" for this step, so that it is Done, not the poller, that meets
    # the ended session (either sends the page to the login).
    poller = re.compile(r"/tasks/changes\?")
    page.route(poller, lambda route: route.fulfill(status=204))
    tab.goto(f"{live_site}/")
    nav_to(tab, "logout")
    expect(tab.locator("#logout")).to_have_count(0)
    pressed = row_of(page, SEARCHED)
    pressed_id = int(str(pressed.get_attribute("data-task-id")))
    pressed.locator('[data-action="done"]').click()
    expect(page).to_have_url(f"{live_site}/login/?next=/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.unroute(poller)
    assert Task.objects.get(pk=pressed_id).status == Task.Status.OPEN
    snap(page, "12-login-after-logout")

    # 13. The token still lists the tasks, like curl would; without it, 401.
    listed = api(live_site, "GET", "/api/tasks?limit=100", secret)
    assert listed.status_code == 200, (listed.status_code, listed.text)
    items = listed.json()["items"]
    open_ids = set(Task.objects.filter(user=user, status=Task.Status.OPEN).values_list("pk", flat=True))
    assert {item["id"] for item in items} == open_ids, (len(items), len(open_ids), listed.json().get("next"))
    assert len(items) == expected_tasks - 1 + sum(EXPECTED_WAITING.values())  # the API lists waiting items too
    assert NEW_SUBJECT in {item["email_subject"] for item in items}
    for item in items:
        if item["email_subject"] != NEW_SUBJECT:
            assert sorted(link["provider"] for link in item["links"]) == ["gmail", "outlook"], item
    anonymous = api(live_site, "GET", "/api/tasks", None)
    assert anonymous.status_code == 401, (anonymous.status_code, anonymous.text)

    assert page_errors == [] and tab_errors == []
    assert server_errors == [] and tab_server_errors == []
    context.close()


# Phone width ---------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_no_page_is_wider_than_a_phone(live_site: str, transactional_db: None, journey_browser: Any) -> None:
    """Every page at 390 px, logged out and logged in, with long content on it: nothing scrolls sideways."""
    user = UserFactory(email="narrow@example.com", password=PASSWORD)
    user.timezone = TIME_ZONE
    user.save(update_fields=["timezone"])
    IntegrationFactory(user=user, account_address="a.very.long.mailbox.address.for.phones@subdomain.example.com")
    long_title = "Reply to the landlord about the " + "very " * 20 + "long lease and https://example.com/" + "x" * 80
    task_create(
        user=user,
        title=long_title,
        due_date=timezone.localdate(timezone=ZoneInfo(TIME_ZONE)) + timedelta(days=2),
        priority="high",
    )
    done = task_create(user=user, title="Send the " + "signed " * 15 + "contract back")
    task_set_status(task=done, status=Task.Status.DONE)
    assert Integration.objects.filter(user=user).count() == 1

    context = journey_browser.new_context(viewport=PHONE, timezone_id=TIME_ZONE)
    context.set_default_timeout(10_000)
    page: Page = context.new_page()
    page_errors, server_errors = watch_errors(page)
    too_wide: dict[str, int] = {}

    def measure(path: str) -> None:
        page.goto(f"{live_site}{path}")
        page.wait_for_load_state("load")
        width = phone_width(page)
        if width > PHONE["width"]:
            too_wide[path] = width

    for path in ("/login/", "/signup/"):  # a signed-in person is sent away from these
        measure(path)
    page.goto(f"{live_site}/login/")
    page.get_by_label("Email address").fill("narrow@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")
    for path in PHONE_PAGES:
        if path in ("/login/", "/signup/"):
            continue
        measure(path)
        if path == "/api/docs":
            expect(page.locator(".swagger-ui").first).to_be_visible()
            width = phone_width(page)  # again, once Swagger UI has drawn itself
            if width > PHONE["width"]:
                too_wide[path] = width
        if path == "/":
            expect(page.locator("#task-list > li.task")).to_have_count(1)
        if path == "/?status=done":
            expect(page.locator("#task-list > li.task")).to_have_count(1)
    assert too_wide == {}, f"pages wider than {PHONE['width']}px: {too_wide}"
    assert page_errors == []
    assert server_errors == []
    context.close()
