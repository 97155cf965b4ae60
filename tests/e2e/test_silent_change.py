"""No change in silence (issue 31), in Chromium through the sandbox's mail and the real pipeline (a Celery worker):
the person's reply, sent in Gmail, closes its task; the run line names the task it closed, with Undo, and Undo
reopens it on the list without a reload. The mail follows the sandbox Gemini's rules (sandbox/READER.md), as in
tests/e2e/test_conversations.py."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from accounts.models import User
from sandbox.client import SandboxClient
from sandbox.demo.messages import DEMO_ADDRESS
from sandbox.server import SandboxServer
from tasks.models import Task, TaskEvent
from tests.e2e.conftest import watch_errors
from tests.e2e.test_conversations import ANN, ASK_TITLE, LIVE_WITHIN_MS, extract_now, first_read_of_anns_ask, row


def test_silent_change_a_reply_that_closes_a_task_is_named_on_the_run_line_with_undo(
    live_site: str,
    demo_user: User,
    sandbox: SandboxClient,
    sandbox_server: SandboxServer,
    celery_worker: Any,
    browser_page: Page,
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    asked = first_read_of_anns_ask(page, live_site, sandbox, sandbox_server.url, demo_user)
    changes = page.locator("#run-status .run-changes")
    expect(changes).to_have_count(0)  # the first read made tasks and changed none
    page.evaluate("window.__notReloaded = true")

    sandbox.send_gmail(DEMO_ADDRESS, to=[ANN], body="Hi Ann,\nHere is the deck.\n", in_reply_to=asked["id"])
    extract_now(page, demo_user)

    # The row leaves the list, and the run line says which task went and why, with its Undo.
    expect(row(page, ASK_TITLE)).to_have_count(0, timeout=LIVE_WITHIN_MS)
    expect(page.locator("#undo")).to_contain_text(f"“{ASK_TITLE}” closed by your reply.")  # as Done by hand
    expect(page.locator("#undo-button")).to_be_visible()
    expect(changes).to_be_visible()
    expect(changes.locator(".run-changes-count")).to_have_text("1 closed by your reply:")
    named = changes.locator("li", has_text=ASK_TITLE)
    expect(named).to_contain_text(f"“{ASK_TITLE}” closed by your reply")
    event = TaskEvent.objects.get(task__user=demo_user, action=TaskEvent.Action.CLOSED)
    assert named.get_attribute("data-event-id") == str(event.pk)
    assert Task.objects.get(user=demo_user, title=ASK_TITLE).status == Task.Status.DONE

    named.get_by_role("button", name="Undo").click()
    expect(page.locator("#undo")).to_contain_text(f"Undone: “{ASK_TITLE}”")
    expect(row(page, ASK_TITLE)).to_have_count(1, timeout=LIVE_WITHIN_MS)  # back on the open list
    expect(changes).to_have_count(0)  # the run line no longer names it
    task = Task.objects.get(user=demo_user, title=ASK_TITLE)
    assert (task.status, task.hand_changed) == (Task.Status.OPEN, True)
    assert page.evaluate("window.__notReloaded") is True
    assert page_errors == [] and server_errors == [], (page_errors, server_errors)
