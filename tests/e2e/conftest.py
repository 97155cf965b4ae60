"""Fixtures of the browser tests: Chromium, the live server, a real Celery worker, the demo account and mailbox.

The pieces, all in this one process:
- pytest-django's `live_server` serves Tasklift from the test database (the test is transactional, so what
  the server, the worker and the test write is committed and each of them sees it);
- the session's sandbox plays Google OAuth, Gmail and Gemini, and the browser really visits its consent page;
- an embedded Celery worker (a thread) consumes the test Redis queue and runs the extraction job against the
  same test database;
- Debian's Chromium, driven by Playwright's sync API.
"""

from __future__ import annotations

import atexit
import io
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer

from accounts.models import User
from config.run import ADMIN_PASSWORD, DEMO_PASSWORD
from config.supervise import die_with_parent
from sandbox.client import SandboxClient
from sandbox.demo import load_demo_mailbox
from sandbox.demo.messages import DEMO_ADDRESS
from sandbox.server import SandboxServer
from tests.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screens"  # what the browser tests saw
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def _django_orm_beside_playwright(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the test thread use the ORM while Playwright is running.

    Playwright's sync API runs an asyncio event loop on the test's own thread (in a greenlet it switches to
    and back), so while Playwright is started `asyncio.get_running_loop()` finds a loop on that thread and
    Django's `async_unsafe` guard raises SynchronousOnlyOperation on every ORM call the test makes. Nothing
    async runs Django code here: the loop only talks to the browser, and each ORM call is still a plain blocking
    call on one thread, so the guard's concern does not apply. Set through monkeypatch (undone after the test)
    rather than for the whole session, so that the rest of the suite keeps the guard.
    """
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# Every page of every context reports what the Content-Security-Policy blocked (the policy is on in the live
# server as in production); `chromium()` fails the test when anything was.
CSP_WATCH_JS = """document.addEventListener("securitypolicyviolation", (event) => {
  window.__taskliftCspViolation(
    `${event.effectiveDirective} blocked ${event.blockedURI || "inline"} on ${event.documentURI} ` +
    `(${event.sourceFile || "?"}:${event.lineNumber})`
  );
});"""


def watch_csp(browser: Any) -> list[str]:
    """The list every context of `browser` made from now on (`browser.new_context`, which `new_page` uses)
    fills with the Content-Security-Policy violations of its pages; also kept as `browser.csp_violations`."""
    violations: list[str] = []
    new_context = browser.new_context

    def seen(violation: str) -> None:
        violations.append(violation)

    def new_watched_context(*args: Any, **kwargs: Any) -> Any:
        context = new_context(*args, **kwargs)
        context.expose_function("__taskliftCspViolation", seen)
        context.add_init_script(CSP_WATCH_JS)
        return context

    browser.new_context = new_watched_context
    browser.csp_violations = violations
    return violations


_server: subprocess.Popen[str] | None = None
_server_endpoint = ""


def _browser_server() -> str:
    """The websocket of the one Chromium of this test process (`playwright launch-server`), started on first use
    and stopped when the process ends; the kernel stops it too should this process die outright.

    Each test still starts Playwright's driver of its own: Playwright's sync API runs an event loop on the
    test's thread for as long as it is started, which the tests that follow would find (see
    `_django_orm_beside_playwright`). The driver is run directly, not through the `playwright` script, so
    that the process told to die with this one is the server itself."""
    global _server, _server_endpoint
    if _server is not None and _server.poll() is None:
        return _server_endpoint
    from playwright._impl._driver import compute_driver_executable, get_driver_env

    config = Path(tempfile.mkdtemp(prefix="tasklift-chromium-")) / "launch.json"
    config.write_text(json.dumps({"executablePath": str(CHROMIUM), "args": CHROMIUM_ARGS, "headless": True}))
    node, cli = compute_driver_executable()
    _server = subprocess.Popen(
        [node, cli, "launch-server", "--browser", "chromium", "--config", str(config)],
        env=get_driver_env(),
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,
    )
    assert _server.stdout is not None
    _server_endpoint = _server.stdout.readline().strip()
    assert _server_endpoint.startswith("ws://"), f"playwright launch-server said {_server_endpoint!r}"
    atexit.register(_server.terminate)
    return _server_endpoint


@contextmanager
def chromium() -> Iterator[Any]:
    """The test process's Chromium, driven by Playwright; the contexts the test made are closed afterwards. The
    test is skipped when Debian's Chromium is missing.

    The test fails if any page it opened broke the Content-Security-Policy (`watch_csp`).
    """
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (`make browser`) to run the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.connect(_browser_server())
        violations = watch_csp(browser)
        try:
            yield browser
            for context in browser.contexts:  # a report on its way is delivered before a round trip through the page
                for page in context.pages:
                    if not page.is_closed():
                        page.evaluate("() => new Promise(done => setTimeout(done))")
            assert violations == [], f"Content-Security-Policy violations: {violations}"
        finally:
            browser.close()  # a connected browser: its contexts are closed, the server stays


def new_page(browser: Any) -> Any:
    """A page in a context of its own (no cookies), which trusts no certificate it cannot verify."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    return context.new_page()


def _chromium_page() -> Iterator[Any]:
    """A fresh Chromium page (its own context: no cookies), closed with its browser afterwards."""
    with chromium() as browser:
        try:
            page = new_page(browser)
            yield page
            page.context.close()
        finally:
            # Django's connection handler is "thread critical": with an event loop running on the thread (as
            # Playwright's is) it keeps connections in a context-local store instead of the thread-local one.
            # The ORM calls of the test body therefore open a second connection, which would stay open after
            # Playwright stops (and then block dropping the test database). Close it while it is reachable,
            # that is, before `chromium()` stops Playwright.
            connections.close_all()


@pytest.fixture
def browser_page(_django_orm_beside_playwright: None) -> Iterator[Any]:
    """A fresh Chromium page, closed with its browser after the test.

    Request it last: while Playwright runs, Django keeps this thread's connections apart from the usual ones
    (see `_chromium_page`), so fixtures that write data should have done so before it starts.
    """
    yield from _chromium_page()


# Steps shared by the journeys -------------------------------------------------------------------------
RUN_TIMEOUT_MS = 40_000  # the whole demo inbox (twice, in one test) read by the sandbox Gemini
FINISHED = re.compile(r"^(succeeded|failed|cancelled|skipped|limited)$")

# What each task row shows, read in one call.
ROWS_JS = """rows => rows.map(row => {
  const link = row.querySelector('a.email-link');
  const meta = row.querySelector('.meta');
  return {
    title: row.querySelector('.task-title')?.textContent.trim() ?? '',
    meta: meta ? meta.textContent.replace(/\\s+/g, ' ').trim() : '',
    subject: link ? link.textContent.trim() : null,
    href: link ? link.getAttribute('href') : null,
    target: link ? link.getAttribute('target') : null,
    rel: link ? link.getAttribute('rel') : null,
  };
})"""


def watch_errors(page: Any) -> tuple[list[str], list[str]]:
    """Lists that fill with the page's JavaScript errors and the server's 5xx answers."""
    page_errors: list[str] = []
    server_errors: list[str] = []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    page.on("response", lambda r: server_errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    return page_errors, server_errors


def log_in_and_consent(page: Any, live_site: str) -> None:
    """Log in as the demo account (no mailbox yet) and give AI consent, checking what the pages say."""
    from playwright.sync_api import expect

    page.goto(f"{live_site}/login/")
    page.get_by_label("Email address").fill(DEMO_ADDRESS)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator(".topbar .who")).to_have_text(DEMO_ADDRESS)
    expect(page.locator("#consent-needed")).to_be_visible()
    expect(page.locator("#mailbox-needed")).to_be_visible()

    page.get_by_role("link", name="AI consent").click()
    expect(page.locator("#consent-status")).to_contain_text("No consent")
    page.get_by_role("button", name=re.compile(r"^I agree")).click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator(".messages")).to_contain_text("Tasklift may now send your new email to Gemini")
    expect(page.locator("#consent-needed")).to_have_count(0)


def confirm_signup(page: Any, live_site: str, address: str) -> None:
    """After "Sign up": the "check your inbox" page, then the confirmation link of the email, opened in the same
    browser, which confirms the address and logs in. The live server runs in this process, so the email is in
    Django's in-memory outbox."""
    from django.core import mail
    from playwright.sync_api import expect

    expect(page).to_have_url(f"{live_site}/signup/check-your-inbox/")
    expect(page.locator("#check-inbox")).to_contain_text(address)
    [message] = [m for m in mail.outbox if m.to == [address]]
    link = re.search(r"https?://\S+/signup/confirm/\S+/", str(message.body))
    assert link is not None, message.body
    assert link[0].startswith(f"{live_site}/"), link[0]  # SITE_URL
    page.goto(link[0])
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator(".messages")).to_contain_text(f"{address} is confirmed")


def expect_mailbox_active(page: Any, provider: str) -> None:
    from playwright.sync_api import expect

    mailbox = page.locator("#mailbox-list > li").filter(
        has=page.locator("strong", has_text=re.compile(f"^{provider}$"))
    )
    expect(mailbox).to_have_count(1)
    expect(mailbox).to_contain_text(f"{provider} {DEMO_ADDRESS}")
    expect(mailbox.locator(".badge")).to_have_text("Active")


def connect_gmail(page: Any, live_site: str, *, sandbox_url: str) -> None:
    """Mailboxes → Connect Gmail → the sandbox Google consent page → Allow → back on Mailboxes."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="Mailboxes", exact=True).click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    page.locator("#connect-gmail").click()
    expect(page).to_have_url(re.compile("^" + re.escape(f"{sandbox_url}/google/o/oauth2/auth?")))
    expect(page).to_have_title("Sign in - Google Accounts (sandbox)")
    page.get_by_label("Account email").fill(DEMO_ADDRESS)
    page.get_by_role("button", name="Allow").click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    expect(page.locator(".messages")).to_contain_text(f"Gmail {DEMO_ADDRESS} is connected.")
    expect_mailbox_active(page, "Gmail")


def connect_outlook(page: Any, live_site: str, *, sandbox_url: str, tenant: str = "common") -> None:
    """Mailboxes → Connect Outlook → the sandbox Microsoft consent page → Accept → back on Mailboxes.

    The page is the sandbox's plain-http listener (its discovery document names it as the authorization
    endpoint), so a browser that trusts no certificate of ours shows it; MSAL's own calls stay on TLS.
    """
    from playwright.sync_api import expect

    page.get_by_role("link", name="Mailboxes", exact=True).click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    page.locator("#connect-outlook").click()
    authorize = f"{sandbox_url}/{tenant}/oauth2/v2.0/authorize?"
    assert authorize.startswith("http://"), authorize
    expect(page).to_have_url(re.compile("^" + re.escape(authorize)))
    assert page.evaluate("location.protocol") == "http:"
    expect(page).to_have_title("Permissions requested - Microsoft account (sandbox)")
    expect(page.get_by_text("Sandbox consent page: no real Microsoft account is involved.")).to_be_visible()
    expect(page.get_by_role("listitem").filter(has_text=re.compile(r"Mail\.Read$"))).to_have_count(1)
    address = page.get_by_label("Account email")
    expect(address).to_have_value(DEMO_ADDRESS)  # the only sandbox Outlook mailbox is offered by default
    address.fill(DEMO_ADDRESS)
    page.get_by_role("button", name="Accept").click()

    # Back on Mailboxes (the callback went to SITE_URL, which exchanged the code over TLS).
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    expect(page.locator(".messages")).to_contain_text(f"Outlook {DEMO_ADDRESS} is connected.")
    expect_mailbox_active(page, "Outlook")


NARROW_PX = 760  # static/css/app.css: at this width and under, the navigation is behind "Menu"


def open_navigation(page: Any) -> None:
    """On a phone, open the header's Menu (the navigation is behind it); on a wide screen there is nothing to do.
    Told by the viewport, as the stylesheet's media query tells it, not by whether the button looks visible at one
    instant: a page whose stylesheet was still being applied showed it for a moment at 1280 px, and the click
    that followed waited for a button that was no longer there."""
    toggle = page.locator("#nav-toggle")
    if page.viewport_size["width"] <= NARROW_PX and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()


def press_extract_now(page: Any, live_site: str) -> str:
    """Home (no task yet) → Extract now → wait until the run has finished; returns how it ended."""
    from playwright.sync_api import expect

    open_navigation(page)
    page.get_by_role("link", name="Tasks", exact=True).click()
    expect(page).to_have_url(f"{live_site}/")
    expect(page.locator("#mailbox-needed")).to_have_count(0)
    expect(page.locator("#task-list > li.task")).to_have_count(0)
    page.get_by_role("button", name="Extract now").click()
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile(r"^(queued|running|succeeded)$"))
    expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    return str(status.get_attribute("data-status"))


def expect_tasks_listed(page: Any) -> None:
    """The finished run's HX-Trigger (tasksChanged) makes #task-list fetch itself again."""
    from playwright.sync_api import expect

    expect(page.locator("#task-list > li.empty")).to_have_count(0)
    expect(page.locator("#task-list > li.task").first).to_be_visible()
    earlier_open(page)


def earlier_open(page: Any) -> None:
    """Open "From before you connected" if the list has it collapsed, and wait for its rows (fetched on opening),
    so that every task of the list is on the page. Once the list has stopped redrawing itself: a redraw asked
    before the group was open would bring it back collapsed (one asked after keeps it open)."""
    from playwright.sync_api import expect

    group = page.locator("#task-list details.earlier-group")
    deadline = time.monotonic() + 30
    while True:
        # Nothing of htmx on its way (a load state would not do: the page reached "networkidle" long ago).
        page.wait_for_function("() => !document.querySelector('.htmx-request')")
        if not group.count() or (
            group.get_attribute("open") is not None and group.locator(".earlier-rows > ul.tasks").count()
        ):
            return
        # Closed again by a redraw asked before it was opened: open it once more.
        assert time.monotonic() < deadline, "the earlier group never stayed open"
        if group.get_attribute("open") is None:
            group.locator("> summary").click()
        expect(group.locator(".earlier-rows > ul.tasks")).to_have_count(1)


@pytest.fixture
def live_site(live_server: LiveServer, settings: Settings) -> str:
    """The live server's base URL, which is also the SITE_URL the Google OAuth redirect goes back to."""
    settings.SITE_URL = live_server.url
    host = live_server.thread.host
    # pytest-django's live_server appends its host to ALLOWED_HOSTS for the test; fail clearly if not.
    assert host in settings.ALLOWED_HOSTS or "*" in settings.ALLOWED_HOSTS, (host, settings.ALLOWED_HOSTS)
    return str(live_server.url)


@pytest.fixture
def signed_in(live_site: str, consenting_user: User, _django_orm_beside_playwright: None) -> Iterator[Any]:
    """The consenting person's task list in Chromium; fails the test on a JavaScript error or a 5xx answer."""
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        page_errors, server_errors = watch_errors(page)
        page.goto(f"{live_site}/login/")
        page.get_by_label("Email address").fill(consenting_user.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{live_site}/")
        yield page
        assert page_errors == [] and server_errors == [], (page_errors, server_errors)
        page.context.close()
        connections.close_all()  # before Playwright stops (see _chromium_page)


@pytest.fixture
def demo_user(transactional_db: None) -> User:
    """The demo account, made the way `make run` makes it (seed_demo with the passwords of config/run.py)."""
    call_command("seed_demo", password=DEMO_PASSWORD, admin_password=ADMIN_PASSWORD, stdout=io.StringIO())
    return User.objects.get(email=DEMO_ADDRESS)


@pytest.fixture
def demo_mailbox(sandbox: SandboxClient, sandbox_server: SandboxServer) -> str:
    """The sandbox (reset by the `sandbox` fixture) with the demo Gmail inbox of demo@tasklift.test."""
    load_demo_mailbox(sandbox_server.state, DEMO_ADDRESS)
    return DEMO_ADDRESS


@pytest.fixture
def celery_worker(transactional_db: None, _clean_redis: None) -> Iterator[Any]:
    """A real Celery worker (solo pool, in a thread of this process) for the length of the test.

    - Broker: the test Redis database (REDIS_DB=1 from config/settings_test.py), which `_clean_redis` has just
      flushed, so the worker starts on an empty queue and declares it afresh.
    - Database: the worker thread opens its own Django connection from settings.DATABASES, which pytest-django
      has pointed at the test database; `transactional_db` means rows committed by the live server are visible
      to it and its writes are visible to the live server (and are flushed after the test, once the worker has
      stopped, since this fixture depends on `transactional_db`).
    - Connections: with the solo pool each job runs on the worker thread itself; a connection left open there
      would outlive the thread and block dropping the test database, so it is closed after every job (Celery's
      Django fixup does the same unless CELERY_DB_REUSE_MAX is set; this does not depend on it).
    """
    from celery.contrib.testing.worker import start_worker
    from celery.signals import task_postrun

    from config.celery import app

    def close_db_connections(**kwargs: Any) -> None:
        connections.close_all()

    task_postrun.connect(close_db_connections, weak=False, dispatch_uid="e2e-close-db-connections")
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=15
        ) as worker:
            yield worker
    finally:
        task_postrun.disconnect(dispatch_uid="e2e-close-db-connections")


def tab_to(page: Any, locator: Any, *, most: int = 60) -> None:
    """Press Tab until `locator`'s element has the focus, as a person without a mouse reaches it."""
    element = locator.element_handle()
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate("element => document.activeElement === element", element):
            return
    raise AssertionError(f"not reached within {most} Tab presses: {locator}")


def open_row_menu(row: Any) -> Any:
    """Open a task row's menu (the "More actions" button) as a person would, and return the menu."""
    from playwright.sync_api import expect

    row.locator("[data-action='menu']").click()
    menu = row.locator("[role='menu']")
    expect(menu).to_be_visible()
    return menu


def row_action(row: Any, action: str) -> None:
    """Click one of a task row's actions as a person would: Done or Reopen on the row, any other from its menu."""
    if action in ("done", "reopen"):
        row.locator(f".task-actions [data-action='{action}']").click()
    else:
        open_row_menu(row).locator(f"[data-action='{action}']").click()


def service_worker_push(page: Any, live_site: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Hand `payload` (what the push service decrypted: sandbox.webpush_messages()) to the page's service worker
    as a push message, as the browser does when its push service delivers one (Chromium's DevTools protocol:
    ServiceWorker.deliverPushMessage; headless Chromium reaches no push service of its own), and return the
    notifications the service worker showed: [{title, body, url}]."""
    import json

    page.context.grant_permissions(["notifications"], origin=live_site)
    page.evaluate("() => navigator.serviceWorker.ready.then(() => true)")  # registered by the page's script
    registrations: list[str] = []  # the site's live registrations, newest last
    activated: set[str] = set()  # the registrations with an activated version
    seen: list[Any] = []  # every version and error reported, for the failure's message
    cdp = page.context.new_cdp_session(page)

    def registration_updated(event: dict[str, Any]) -> None:
        for r in event["registrations"]:
            if r["scopeURL"].startswith(live_site):
                if r.get("isDeleted"):
                    registrations[:] = [i for i in registrations if i != r["registrationId"]]
                elif r["registrationId"] not in registrations:
                    registrations.append(r["registrationId"])

    def version_updated(event: dict[str, Any]) -> None:
        seen.extend(event["versions"])
        activated.update(v["registrationId"] for v in event["versions"] if v["status"] == "activated")

    cdp.on("ServiceWorker.workerRegistrationUpdated", registration_updated)
    cdp.on("ServiceWorker.workerVersionUpdated", version_updated)
    cdp.on("ServiceWorker.workerErrorReported", lambda event: seen.append(event["errorMessage"]))
    cdp.send("ServiceWorker.enable")
    deadline = time.monotonic() + 20
    while not (live := [r for r in registrations if r in activated]) and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert live, f"no activated service worker registered for the site: {registrations} {seen}"
    # The browser's own list (getNotifications) is read the moment showNotification settles, in the service worker:
    # headless Chromium has no notification centre, and drops a notification when its pop-up would have closed
    # (25 s after it was shown), so a look that comes later on a loaded machine finds none.
    [worker] = [w for w in page.context.service_workers if w.url.startswith(live_site)] or [
        page.context.wait_for_event("serviceworker", lambda w: w.url.startswith(live_site), timeout=20_000)
    ]
    worker.evaluate(
        """() => {
            const registration = self.registration, show = registration.showNotification.bind(registration);
            self.__shown = [];
            registration.showNotification = (title, options) => {
                const shown = show(title, options);
                shown.then(() => registration.getNotifications())
                    .then(all => all.map(n => ({title: n.title, body: n.body, url: n.data && n.data.url})))
                    .then(all => self.__shown.push({shown: all}), error => self.__shown.push({error: String(error)}));
                return shown;
            };
        }"""
    )
    # A push to a registration with no activated version is dropped: the one pushed to has one.
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": live_site, "registrationId": live[-1], "data": json.dumps(payload)},
    )
    settled: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while not settled and time.monotonic() < deadline:
        settled = worker.evaluate("() => self.__shown")
        if not settled:
            page.wait_for_timeout(100)
    cdp.detach()
    permission = page.evaluate("() => Notification.permission")
    assert settled, f"the service worker showed nothing; permission {permission}; {registrations} {seen}"
    assert "error" not in settled[0], f"showNotification failed: {settled[0]['error']}; permission {permission}"
    shown: list[dict[str, Any]] = settled[0]["shown"]
    return shown


def push_subscribe_page(page: Any, live_site: str, sandbox: SandboxClient, label: str = "Chromium") -> dict[str, Any]:
    """Turn notifications on for the person signed in on `page` (on Settings): the browser's pushManager would ask
    its own push service (unreachable here), so the sandbox's push service makes the subscription, and the page
    sends it as its script does (static/js/push.js). Returns the sandbox's subscription."""
    from reminders.push import vapid_public_key

    page.goto(f"{live_site}/settings/")
    page.evaluate("() => navigator.serviceWorker.ready.then(() => true)")  # the page's script registered /sw.js
    browser = sandbox.webpush_subscribe(application_server_key=vapid_public_key())
    sent = page.evaluate(
        """([url, subscription]) => fetch(url, {method: 'POST', credentials: 'same-origin',
              headers: {'Content-Type': 'application/json',
                        'X-CSRFToken': document.querySelector('input[name=csrfmiddlewaretoken]').value},
              body: JSON.stringify(subscription)}).then(r => r.status)""",
        [
            f"{live_site}/settings/push/subscribe",
            {"endpoint": browser["endpoint"], "keys": browser["keys"], "label": label},
        ],
    )
    assert sent == 201, sent
    return browser
