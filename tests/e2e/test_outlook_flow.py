"""The Outlook journey in a real browser: log in, give AI consent, connect Outlook through the (sandbox)
Microsoft consent page (plain http: the browser meets no certificate it cannot verify), press "Extract now",
and see the tasks of the demo inbox appear, each linking to its message in Outlook on the web. Then both demo
mailboxes, Gmail and Outlook, in one run."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import quote

import pytest
import requests
from django.conf import settings
from playwright.sync_api import Page, Route, expect

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration
from sandbox.client import SandboxClient
from sandbox.demo import load_demo_outlook
from sandbox.demo.messages import DEMO_ADDRESS, EXPECTED_OPEN, EXPECTED_TASKS
from sandbox.server import SandboxServer
from tasks.models import Task, TaskLink
from tests.e2e.conftest import (
    ROWS_JS,
    connect_gmail,
    connect_outlook,
    earlier_open,
    expect_tasks_listed,
    log_in_and_consent,
    press_extract_now,
    watch_errors,
)

SCREENSHOT = settings.BASE_DIR / "test-artifacts" / "e2e-outlook-tasks.png"
OUTLOOK_WEB = "https://outlook.office365.com/"


@pytest.fixture
def demo_outlook(sandbox: SandboxClient, sandbox_server: SandboxServer) -> str:
    """The sandbox (reset by the `sandbox` fixture) with the demo Outlook inbox of demo@tasklift.test."""
    load_demo_outlook(sandbox_server.state, DEMO_ADDRESS)
    return DEMO_ADDRESS


# Steps ----------------------------------------------------------------------------------------------
def extract_now(page: Page, live_site: str, user: User) -> ExtractionRun:
    """Home → Extract now → wait for the run (the embedded Celery worker) to finish; it must succeed."""
    ended = press_extract_now(page, live_site)
    run = ExtractionRun.objects.get(user=user)
    assert ended == "succeeded", (
        f"run ended {run.status}: {run.error_code} {run.error_message}; "
        f"page says: {page.locator('#run-status').inner_text()}"
    )
    expect_tasks_listed(page)
    return run


def graph_messages(sandbox: SandboxClient, address: str) -> dict[str, dict[str, Any]]:
    """Subject → the sandbox's Outlook message: its control-API listing plus `webLink` as Graph gives it.

    The control list (GET /_sandbox/graph/messages) names the messages but carries no webLink, so each one
    is read from the sandbox Graph itself, with a token from the control API, over TLS verified against the
    sandbox certificate (settings.MICROSOFT_CA_BUNDLE), as the app reads it.
    """
    listed = sandbox.outlook_messages(address)
    subjects = Counter(m["subject"] for m in listed)
    assert all(n == 1 for n in subjects.values()), f"subjects repeat in the Outlook inbox: {subjects}"
    token = sandbox.issue_microsoft_token(address)["access_token"]
    session = requests.Session()
    session.trust_env = False
    session.verify = settings.MICROSOFT_CA_BUNDLE
    found: dict[str, dict[str, Any]] = {}
    with session:
        for message in listed:
            response = session.get(
                f"{settings.SANDBOX_TLS_URL}/v1.0/me/messages/{quote(message['id'], safe='')}",
                params={"$select": "subject,webLink"},
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            response.raise_for_status()
            resource = response.json()
            assert resource["subject"] == message["subject"], (resource, message)
            web_link = str(resource["webLink"])
            # Graph's webLink names the message by its REST id, the one the control list gives as rest_id.
            assert quote(message["rest_id"], safe="") in web_link, (web_link, message)
            found[message["subject"]] = {**message, "webLink": web_link}
    return found


def read_rows(page: Page) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.locator("#task-list li.task").evaluate_all(ROWS_JS)
    return rows


# Tests ----------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_connect_outlook_and_extract_now_lists_the_demo_tasks(
    live_site: str,
    demo_user: User,
    sandbox: SandboxClient,
    demo_outlook: str,
    celery_worker: Any,
    browser_page: Page,
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    expected_total = sum(EXPECTED_OPEN.values())  # the open list: asks and promises
    assert expected_total > 0

    log_in_and_consent(page, live_site)
    expect(page.locator("#mailbox-needed")).to_be_visible()
    connect_outlook(page, live_site, sandbox_url=settings.SANDBOX_URL, tenant=settings.MICROSOFT_TENANT)
    run = extract_now(page, live_site, demo_user)

    tasks = page.locator("#task-list > li.task")
    # The list may have drawn itself during the run (live updates): the last redraw is the one that counts.
    # Late in the day some demo mail is past due since its date: it waits under the collapsed "From before
    # you connected", whose rows come when it is opened.
    earlier_open(page)
    expect(page.locator("#task-list li.task")).to_have_count(sum(EXPECTED_OPEN.values()))
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    rows = read_rows(page)
    shown = Counter(row["subject"] for row in rows)
    wanted = Counter(EXPECTED_OPEN)
    assert len(rows) == expected_total, (
        f"{len(rows)} task rows, expected {expected_total} (the run read {run.emails_fetched} emails and created "
        f"{run.tasks_created} tasks); missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    )
    assert shown == wanted, f"missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    expect(page.locator("#run-status")).to_contain_text(f"{EXPECTED_TASKS} tasks created")
    outlook = Integration.objects.get(user=demo_user, provider=Integration.Provider.OUTLOOK)
    assert outlook.account_address == DEMO_ADDRESS
    assert outlook.status == Integration.Status.ACTIVE
    assert Task.objects.filter(user=demo_user, source=Task.Source.EMAIL_AI).count() == EXPECTED_TASKS
    assert Task.objects.filter(user=demo_user, integration=outlook).count() == EXPECTED_TASKS

    messages = graph_messages(sandbox, DEMO_ADDRESS)
    for row in rows:
        assert row["title"], row
        message = messages.get(row["subject"])
        assert message is not None, f"no Outlook message has the subject of {row}"
        assert re.match(r"^From \S.* · ", row["meta"]), f"no sender shown: {row}"
        assert message["from"] in row["meta"], f"sender is not {message['from']}: {row}"
        assert row["href"] == message["webLink"], f"link is not the message's webLink {message['webLink']}: {row}"
        assert row["target"] == "_blank", f"link does not open a new tab: {row}"
        assert row["rel"] == "noopener", row

    # Following a link opens Outlook on the web in a new tab and leaves Tasklift where it was. Nothing leaves
    # the machine: the context answers for outlook.office365.com itself.
    opened: list[str] = []

    def outlook_web(route: Route) -> None:
        opened.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<title>Outlook on the web (stub)</title>")

    page.context.route(f"{OUTLOOK_WEB}**", outlook_web)
    first = tasks.first.locator("a.email-link")
    href = first.get_attribute("href")
    with page.context.expect_page() as new_tab:
        first.click()
    tab = new_tab.value
    tab.wait_for_load_state()
    expect(tab).to_have_title("Outlook on the web (stub)")
    assert tab.url == href
    assert opened == [href]
    expect(page).to_have_url(f"{live_site}/")
    tab.close()

    assert page_errors == []
    assert server_errors == []


@pytest.mark.e2e
def test_gmail_and_outlook_demo_mailboxes_in_one_run(
    live_site: str,
    demo_user: User,
    demo_mailbox: str,
    demo_outlook: str,
    celery_worker: Any,
    browser_page: Page,
) -> None:
    """The same demo mail sits in both mailboxes (the same Message-IDs): one task per email, not one per
    mailbox, each with a Gmail and an Outlook badge opening it in that mailbox."""
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    expected_each = sum(EXPECTED_OPEN.values())  # the open list: asks and promises

    log_in_and_consent(page, live_site)
    connect_gmail(page, live_site, sandbox_url=settings.SANDBOX_URL)
    connect_outlook(page, live_site, sandbox_url=settings.SANDBOX_URL, tenant=settings.MICROSOFT_TENANT)
    expect(page.locator("#mailbox-list > li")).to_have_count(2)
    run = extract_now(page, live_site, demo_user)

    # The list may have drawn itself during the run (live updates): the last redraw is the one that counts.
    earlier_open(page)  # rows past due since their mail's date, late in the day, come when it is opened
    expect(page.locator("#task-list li.task")).to_have_count(expected_each)
    rows = read_rows(page)
    assert len(rows) == expected_each, (
        f"{len(rows)} task rows, expected {expected_each} (the run read {run.emails_fetched} emails and "
        f"created {run.tasks_created} tasks)"
    )
    badges = page.locator("#task-list li.task").evaluate_all(
        "rows => rows.map(row => Array.from(row.querySelectorAll('a.mailbox-link'))"
        ".map(link => [link.dataset.provider, link.getAttribute('href')]))"
    )
    for row_badges in badges:
        assert {provider for provider, _ in row_badges} == {"gmail", "outlook"}, row_badges
        for provider, href in row_badges:
            assert href.startswith("https://mail.google.com/" if provider == "gmail" else OUTLOOK_WEB), href
    wanted = Counter(EXPECTED_OPEN)
    shown = Counter(row["subject"] for row in rows)
    assert shown == wanted, f"missing {dict(wanted - shown)}, unexpected {dict(shown - wanted)}"
    assert Task.objects.filter(user=demo_user).count() == EXPECTED_TASKS
    for provider in (Integration.Provider.GMAIL, Integration.Provider.OUTLOOK):
        integration = Integration.objects.get(user=demo_user, provider=provider)
        assert TaskLink.objects.filter(task__user=demo_user, integration=integration).count() == EXPECTED_TASKS
    assert page_errors == []
    assert server_errors == []
