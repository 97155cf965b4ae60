"""Issue 22's browser must-show, in Chromium, through the sandbox's mail and the real pipeline (a Celery worker):
a reply the person sends closes its task on the open page without a reload, and Undo brings it back; a question
the person sends becomes a waiting item, which closes when the answer arrives.

The mail is written to the sandbox Gemini's rules (sandbox/READER.md, /work/notes/reader-marks.md): "Could you send
me the deck by Friday?" is an ask (task "Send me the deck by Friday"); the person's reply "Here is the deck." in
Sent delivers it (a delivery phrase sharing "deck" with the title); the same ask in mail the person sends is a
waiting item on its first To recipient, delivered by a delivery phrase in the answer they receive.

It needs the pipeline to read Sent mail (conv-sent) and to close, update and wait on items (conv-items)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.client import SandboxClient
from sandbox.demo.messages import DEMO_ADDRESS
from sandbox.server import SandboxServer
from tasks.models import Task
from tests.e2e.conftest import RUN_TIMEOUT_MS, connect_gmail, log_in_and_consent, watch_errors

ANN = "Ann Client <ann@example.org>"
SAM = "Sam Lee <sam@example.org>"
ASK_TITLE = "Send me the deck by Friday"
WAITING_TITLE = "Send me the Q3 numbers by Friday"
LIVE_WITHIN_MS = 15_000  # a finished run refreshes the list; the list also polls every 4 s


def incoming(subject: str, body: str, *, sender: str) -> str:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"Demo <{DEMO_ADDRESS}>"
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now(UTC) - timedelta(minutes=30))
    message["Message-ID"] = make_msgid(domain="example.org")
    message.set_content(body)
    return message.as_string()


def row(page: Page, title: str) -> Any:
    return page.locator("#task-list > li.task").filter(has=page.locator(".task-title", has_text=title))


def extract_now(page: Page, user: User) -> ExtractionRun:
    """Press "Extract now" (an htmx request: the page is not reloaded) and wait until that run has finished."""
    before = ExtractionRun.objects.filter(user=user).order_by("-pk").values_list("pk", flat=True).first() or 0
    page.get_by_role("button", name="Extract now").click()
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        run = ExtractionRun.objects.filter(user=user, pk__gt=before).order_by("-pk").first()
        if run is not None and run.status in ExtractionRun.FINISHED:
            assert run.status == ExtractionRun.Status.SUCCEEDED, (run.status, run.error_code, run.error_message)
            return run
        page.wait_for_timeout(250)
    raise AssertionError("the run did not finish")


def first_read_of_anns_ask(
    page: Page, live_site: str, sandbox: SandboxClient, sandbox_url: str, user: User
) -> dict[str, Any]:
    """Ann's ask in the demo address's Gmail, connected in the browser and read by "Extract now": its task is
    listed. Returns the sandbox's message (its id, for a reply in its thread)."""
    sandbox.create_mailbox(DEMO_ADDRESS)
    asked: dict[str, Any] = sandbox.deliver(
        DEMO_ADDRESS, incoming("The deck", "Hi,\nCould you send me the deck by Friday?\nAnn\n", sender=ANN)
    )
    log_in_and_consent(page, live_site)
    connect_gmail(page, live_site, sandbox_url=sandbox_url)
    page.get_by_role("link", name="Tasks", exact=True).click()
    extract_now(page, user)
    expect(row(page, ASK_TITLE)).to_have_count(1, timeout=LIVE_WITHIN_MS)
    return asked


def test_a_reply_closes_its_task_on_the_open_page_undo_brings_it_back_and_an_answer_closes_a_waiting_item(
    live_site: str,
    live_server: LiveServer,
    demo_user: User,
    sandbox: SandboxClient,
    sandbox_server: SandboxServer,
    celery_worker: Any,
    browser_page: Page,
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    asked = first_read_of_anns_ask(page, live_site, sandbox, sandbox_server.url, demo_user)
    task = row(page, ASK_TITLE)
    page.evaluate("window.__notReloaded = true")

    # The person answers in Gmail: the reply is in Sent, in the thread of Ann's email.
    sandbox.send_gmail(DEMO_ADDRESS, to=[ANN], body="Hi Ann,\nHere is the deck.\n", in_reply_to=asked["id"])
    extract_now(page, demo_user)

    expect(task).to_have_count(0, timeout=LIVE_WITHIN_MS)  # closed, on the open page
    assert page.evaluate("window.__notReloaded") is True
    closed = Task.objects.get(user=demo_user, title=ASK_TITLE)
    assert closed.status == Task.Status.DONE
    page.locator("#tab-done").click()
    done = row(page, ASK_TITLE)
    expect(done.locator(".task-closed-by")).to_contain_text(re.compile(r"Done by your reply, \w{3} \d\d:\d\d"))
    expect(done.locator(".task-closed-by")).to_contain_text("Here is the deck.")
    done.locator(".task-closed-by [data-action='undo-email']").click()
    expect(page.locator("#undo")).to_contain_text("Undone")
    page.locator("#tab-open").click()
    expect(row(page, ASK_TITLE)).to_have_count(1)  # back
    closed.refresh_from_db()
    assert (closed.status, closed.hand_changed) == (Task.Status.OPEN, True)

    # The person asks Sam something: a waiting item, until Sam's answer arrives.
    page.locator("#tab-waiting").click()
    question = sandbox.send_gmail(
        DEMO_ADDRESS, to=[SAM], subject="Q3 numbers", body="Could you send me the Q3 numbers by Friday?\n"
    )
    extract_now(page, demo_user)
    waiting = row(page, WAITING_TITLE)
    expect(waiting).to_contain_text("Waiting on Sam Lee", timeout=LIVE_WITHIN_MS)
    page.evaluate("window.__notReloaded = true")

    sandbox.deliver_gmail_reply(DEMO_ADDRESS, question["id"], sender=SAM, body="Here are the Q3 numbers.\nSam\n")
    extract_now(page, demo_user)

    expect(waiting).to_have_count(0, timeout=LIVE_WITHIN_MS)
    assert page.evaluate("window.__notReloaded") is True
    assert Task.objects.get(user=demo_user, title=WAITING_TITLE).status == Task.Status.DONE
    page.locator("#tab-done").click()
    expect(row(page, WAITING_TITLE).locator(".task-closed-by")).to_contain_text("Closed by Sam Lee")
    assert (page_errors, server_errors) == ([], [])
