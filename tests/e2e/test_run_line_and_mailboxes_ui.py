"""In Chromium and from the keyboard, what a person sees of runs they did not start (issue 23 points 2 and 3):
the run line after a scheduled run and a push-started one that set an email aside, once "Extract now" has
found nothing more; and the Mailboxes page, where a set-aside email names its sender and subject, the push
state shows, and "Try it again" reads it at once, its task coming without another "Extract now"."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from accounts.models import User
from extraction.models import ExtractionRun
from extraction.pipeline import extraction_run_execute
from sandbox.client import SandboxClient
from tests.conftest import GmailBox
from tests.e2e.conftest import FINISHED, RUN_TIMEOUT_MS, tab_to
from tests.integrations.test_mailboxes_page import POISON, set_aside_one
from tests.mail import ask

pytestmark = pytest.mark.e2e


def run(user: User, trigger: str) -> ExtractionRun:
    return extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger=trigger))


def test_keyboard_extract_now_run_line_tells_of_the_scheduled_and_the_push_runs_since_the_person_looked(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, celery_worker: Any, signed_in: Any
) -> None:
    page = signed_in  # the person has looked: nothing read yet
    for n in range(3):
        gmail.deliver(ask(n))
    assert run(consenting_user, ExtractionRun.Trigger.SCHEDULE).tasks_created == 3
    gmail.deliver(POISON)
    sandbox.fault("gemini", 200, body={"promptFeedback": {"blockReason": "SAFETY"}}, times=None, match="poison project")
    assert run(consenting_user, ExtractionRun.Trigger.WEBHOOK).emails_quarantined == 1
    sandbox.clear_faults()

    tab_to(page, page.get_by_role("button", name="Extract now"))
    page.keyboard.press("Enter")  # finds nothing: the other runs took the mail
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_TIMEOUT_MS)
    assert ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.MANUAL).get().tasks_created == 0
    # Never looked at a finished run before: "So far" (the runs since signing in), every run added up.
    since = " ".join(status.locator(".since").inner_text().split())
    assert since.startswith(
        "So far: 4 new emails, 3 read by Gemini, 3 tasks created (3 reads: scheduled, push, Extract now)"
    ), since
    expect(status).to_contain_text("1 email could not be read reliably and was set aside")
    expect(status).not_to_contain_text("0 tasks created")
    expect(page.locator("#task-list > li.task")).to_have_count(3)


def test_keyboard_mailboxes_try_it_again_reads_a_set_aside_email_at_once_naming_its_sender(
    live_site: str, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, celery_worker: Any, signed_in: Any
) -> None:
    set_aside_one(gmail, sandbox, consenting_user)
    page = signed_in
    tab_to(page, page.get_by_role("link", name="Mailboxes", exact=True))
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_site}/mailboxes/")
    box = page.locator(f"#mailbox-{gmail.integration.pk}")
    aside = box.locator(".set-aside li")
    expect(aside).to_have_count(1)
    expect(aside.locator(".sender")).to_have_text("Pat Poison <pat@example.com>")
    expect(aside.locator(".subject")).to_have_text("Poison project")
    expect(box.locator(".push")).to_have_attribute("data-push", "off")  # the test settings turn push off
    expect(box.locator(".push")).not_to_be_empty()
    expect(page.locator("#how-mail-is-read")).to_contain_text("within seconds")

    tab_to(page, page.locator(f"#replay-{gmail.integration.pk}"))
    page.keyboard.press("Enter")
    expect(page.locator(".messages")).to_contain_text("being read again now")
    tab_to(page, page.get_by_role("link", name="Tasks", exact=True))
    page.keyboard.press("Enter")
    # No "Extract now": the run "Try it again" started brings the task to the open list.
    expect(page.locator("#task-list > li.task", has_text="poison project")).to_have_count(1, timeout=RUN_TIMEOUT_MS)
    page.goto(f"{live_site}/mailboxes/")
    expect(page.locator(f"#mailbox-{gmail.integration.pk} .set-aside li")).to_have_count(0)
