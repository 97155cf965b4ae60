"""Teaching Tasklift in Chromium (issue 23 point 9): "Never make tasks from this sender" on a task, honoured by
the next run (no task, the email in the ledger with its reason, counted in Settings), then undone in Settings;
and "Not a task" on a dismissed task, which Settings lists too."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from accounts.models import User
from extraction.models import ExtractionRun, MutedSender, ProcessedEmail
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.e2e.conftest import open_row_menu, row_action
from tests.extraction.test_muted_sender import colleague_ask, vendor_ask

pytestmark = pytest.mark.e2e


def test_muted_sender_is_skipped_by_the_next_run_shown_in_settings_and_undone(
    live_site: str, gmail: GmailBox, consenting_user: User, signed_in: Any
) -> None:
    gmail.deliver(vendor_ask(1))
    gmail.deliver(colleague_ask(1))
    assert run_extraction(consenting_user).tasks_created == 2
    page = signed_in
    page.reload()
    vendor = page.locator("#task-list > li.task", has_text="vendor plan 1")
    open_row_menu(vendor).get_by_role("menuitem", name="Never make tasks from this sender").click()
    expect(page.locator(".messages")).to_contain_text("Tasklift will make no more tasks from sales@vendor.example")
    expect(page.locator("#task-list > li.task", has_text="vendor plan 1")).to_have_count(1)  # the task stays

    skipped = gmail.deliver(vendor_ask(2))
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED and run.tasks_created == 0
    assert ProcessedEmail.objects.get(message_id=skipped).last_error.startswith("muted:")
    assert not Task.objects.filter(title__icontains="vendor plan 2").exists()

    page.get_by_role("link", name="Settings", exact=True).click()
    muted = page.locator("#muted-list li")
    expect(muted).to_have_count(1)
    expect(muted.locator(".address")).to_have_text("sales@vendor.example")
    expect(muted).to_contain_text("1 email skipped since")
    muted.get_by_role("button", name="Undo").click()
    expect(page.locator(".messages")).to_contain_text("Mail from sales@vendor.example is read again")
    expect(page.locator("#no-muted")).to_be_visible()
    assert not MutedSender.objects.filter(user=consenting_user).exists()

    # "Not a task" on a dismissed one.
    page.goto(f"{live_site}/")
    colleague = page.locator("#task-list > li.task", has_text="quarterly report 1")
    row_action(colleague, "dismiss")
    expect(page.locator("#undo")).to_contain_text("dismissed")
    page.goto(f"{live_site}/?status=dismissed")
    dismissed = page.locator("#task-list > li.task", has_text="quarterly report 1")
    open_row_menu(dismissed).get_by_role("menuitem", name="Not a task").click()
    expect(page.locator(".messages")).to_contain_text("Tasklift will make no more tasks from alex@example.com")
    page.goto(f"{live_site}/settings/")
    expect(page.locator("#muted-list .address")).to_have_text("alex@example.com")
    assert MutedSender.objects.get(user=consenting_user).reason == MutedSender.Reason.NOT_A_TASK
