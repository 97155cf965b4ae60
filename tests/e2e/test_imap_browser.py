"""Issue 36's browser must-show, in Chromium, against a real Dovecot and the real pipeline (a Celery worker):
connect an IMAP mailbox with the form (a wrong password is refused in plain words and nothing is saved, then the
right one is tested and connected), "Extract now" lists the tasks of its Inbox, and a reply the person sent from
that account (in its Sent folder, answering an ask) closes that task: "Done by your reply" on the Done view.

The mail is written to the sandbox Gemini's rules (sandbox/READER.md): "Please send the report for project N by
Friday" is one ask (tests/mail.py), and "Here is the report you asked for." delivers it."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration
from sandbox.client import SandboxClient
from sandbox.dovecot import Dovecot
from tasks.models import Task
from tests.e2e.conftest import FINISHED, RUN_TIMEOUT_MS, expect_tasks_listed, press_extract_now
from tests.mail import ask, rfc822

pytestmark = pytest.mark.e2e

ANSWERED, LEFT_OPEN = 1, 2  # the projects of the two asks; the person answers the first


def message_id(raw: str) -> str:
    found = re.search(r"^Message-ID:\s*<([^>]+)>", raw, re.IGNORECASE | re.MULTILINE)
    assert found, raw
    return found[1]


def row(page: Page, project: int) -> Any:
    """The list's row of the task asked in the email "Project N"."""
    return page.locator("#task-list li.task").filter(
        has=page.locator("a.email-link", has_text=re.compile(f"^Project {project}$"))
    )


def fill_imap_form(page: Page, dovecot: Dovecot, address: str, password: str) -> None:
    """The connect form for a server of one's own: the test Dovecot, IMAPS on 127.0.0.1."""
    page.get_by_label("Mail service").select_option("other")
    page.get_by_label("Email address").fill(address)
    page.get_by_label("App password").fill(password)
    page.get_by_label("IMAP server").fill("127.0.0.1")
    page.get_by_label("Port").fill(str(dovecot.tls_port))
    page.get_by_label("Security").select_option("tls")


def test_connect_a_dovecot_mailbox_with_the_form_extract_its_tasks_and_a_sent_reply_closes_one(
    live_site: str,
    dovecot: Dovecot,
    sandbox: SandboxClient,
    consenting_user: User,
    celery_worker: Any,
    signed_in: Page,
) -> None:
    page = signed_in
    address = f"kim-{uuid.uuid4().hex[:10]}@imap.example.org"
    password = f"app-password-{uuid.uuid4().hex[:8]}"
    dovecot.add_user(address, password)
    asks = {n: ask(n) for n in (ANSWERED, LEFT_OPEN)}
    for raw in asks.values():
        dovecot.deliver(address, raw)  # the person's Inbox before Tasklift is connected

    # 1. Mailboxes → "Another mailbox (IMAP)": a wrong password is named, and nothing is saved.
    page.get_by_role("link", name="Mailboxes", exact=True).click()
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    page.locator("#connect-imap").click()
    expect(page).to_have_url(f"{live_site}/integrations/imap/connect")
    expect(page.locator('#imap-form [data-field="host"]')).to_be_hidden()  # a preset names the server
    fill_imap_form(page, dovecot, address, "not-the-app-password")
    expect(page.locator('#imap-form [data-field="host"]')).to_be_visible()
    page.locator("#imap-save").click()
    refused = page.locator('#imap-form [data-field="password"]')
    expect(refused).to_have_class(re.compile(r"\bhas-error\b"))
    expect(refused.locator(".field-error")).to_contain_text("The server refused this user name and password.")
    expect(page.get_by_label("IMAP server")).to_have_value("127.0.0.1")  # the rest of the form is kept
    assert not Integration.objects.filter(user=consenting_user).exists()

    # 2. The right password: "Test the connection" says what it found, still saving nothing; "Connect" saves.
    page.get_by_label("App password").fill(password)
    page.locator("#imap-test").click()
    expect(page.locator("#imap-tested")).to_have_text(
        f"Connected to {address}: Tasklift can read its Inbox and its sent mail (“Sent”)."
    )
    expect(page.locator("#imap-form .field-error")).to_have_count(0)
    assert not Integration.objects.filter(user=consenting_user).exists()
    page.locator("#imap-save").click()
    mailbox = Integration.objects.get(user=consenting_user)
    assert (mailbox.provider, mailbox.account_address) == (Integration.Provider.IMAP, address)
    expect(page).to_have_url(f"{live_site}/mailboxes/#mailbox-{mailbox.pk}")
    expect(page.locator(".messages")).to_contain_text(f"Connected to {address}")
    expect(page.locator(".messages")).to_contain_text("Its mail is read from now on.")
    shown = page.locator(f"#mailbox-{mailbox.pk}")
    expect(shown.locator("strong")).to_have_text("IMAP")
    expect(shown.locator(".address")).to_have_text(address)
    expect(shown.locator(".badge")).to_have_text("Active")

    # 3. Extract now: a task for each ask of the Inbox.
    ended = press_extract_now(page, live_site)
    run = ExtractionRun.objects.get(user=consenting_user)
    assert ended == "succeeded", f"run ended {run.status}: {run.error_code} {run.error_message}"
    expect_tasks_listed(page)
    expect(page.locator("#task-list li.task")).to_have_count(2)
    for n in (ANSWERED, LEFT_OPEN):
        expect(row(page, n).locator(".task-title")).to_contain_text(f"report for project {n}")
        expect(row(page, n).locator("a.mailbox-link")).to_have_attribute("data-provider", "imap")
    answered = Task.objects.get(user=consenting_user, email_subject=f"Project {ANSWERED}")
    assert answered.status == Task.Status.OPEN

    # 4. The person answers the first ask from that account: the reply is in its Sent folder, in reply to it.
    subject = f"Re: Project {ANSWERED}"
    reply = rfc822(subject, "Hi Alex,\n\nHere is the report you asked for.\n\nKim\n", sender=address)
    reply = reply.replace(f"Subject: {subject}", f"Subject: {subject}\nIn-Reply-To: <{message_id(asks[ANSWERED])}>")
    assert "In-Reply-To:" in reply
    dovecot.deliver(address, reply, folder="Sent")
    status = page.locator("#run-status")
    first_run = str(status.get_attribute("data-run-id"))
    page.get_by_role("button", name="Extract now").click()
    expect(status).not_to_have_attribute("data-run-id", first_run)
    expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    second = ExtractionRun.objects.filter(user=consenting_user).latest("created_at")
    assert second.status == ExtractionRun.Status.SUCCEEDED, (second.error_code, second.error_message)

    # The answered ask leaves the open list; the other stays.
    expect(row(page, ANSWERED)).to_have_count(0, timeout=RUN_TIMEOUT_MS)
    expect(row(page, LEFT_OPEN)).to_have_count(1)
    answered.refresh_from_db()
    assert answered.status == Task.Status.DONE
    assert Task.objects.get(user=consenting_user, email_subject=f"Project {LEFT_OPEN}").status == Task.Status.OPEN

    # 5. The Done view says the person's reply did it, quoting the reply.
    page.locator("#tab-done").click()
    expect(page).to_have_url(f"{live_site}/?status=done")
    expect(page.locator("#task-list li.task")).to_have_count(1)
    closed_by = row(page, ANSWERED).locator(".task-closed-by")
    expect(closed_by).to_have_attribute("data-closed-by", "sent")
    expect(closed_by.locator(".closed-by-words")).to_contain_text(re.compile(r"^Done by your reply, "))
    expect(closed_by).to_contain_text("Here is the report you asked for.")
