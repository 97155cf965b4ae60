"""In Chromium, what a person sees of the conversations while their list is open, the pipeline's changes made as
it records them (a TaskEvent row with the task's change, tests/factories.py): a task an email closed leaves the
open list without a reload, the Done view says "Done by your reply" and Undo brings the task back; a waiting item
appears in the "Waiting for" view and leaves it when the answer closes it; a suggestion on a task changed by hand
is answered with Mark done. (tests/e2e/test_conversations.py drives the same through the sandbox's mail and the
real pipeline.)"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from accounts.models import User
from tasks.models import Task, TaskEvent
from tests.e2e.conftest import watch_errors
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_closes, email_task

PASSWORD = "correct-horse-battery"  # tests/factories.py
LIVE_WITHIN_MS = 15_000  # the open list polls every 4 s


def log_in(page: Page, live_site: str, user: User) -> None:
    page.goto(f"{live_site}/login/")
    page.get_by_label("Email address").fill(user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_site}/")


def row(page: Page, title: str) -> Any:
    return page.locator("#task-list > li.task").filter(has=page.locator(".task-title", has_text=title))


def test_a_close_by_reply_shows_without_a_reload_and_undo_brings_the_task_back(
    live_site: str, transactional_db: None, browser_page: Page
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    person = UserFactory(timezone="Europe/Paris")
    box = IntegrationFactory(user=person)
    task = email_task(person, box, "m1", "Send me the deck by Friday", sentence="Could you send me the deck by Friday?")
    log_in(page, live_site, person)
    expect(row(page, "Send me the deck by Friday")).to_have_count(1)
    page.evaluate("window.__notReloaded = true")

    email_closes(task, sentence="Here is the deck.")  # the person's reply, read by the pipeline

    expect(row(page, "Send me the deck by Friday")).to_have_count(0, timeout=LIVE_WITHIN_MS)
    assert page.evaluate("window.__notReloaded") is True
    page.locator("#tab-done").click()
    done = row(page, "Send me the deck by Friday")
    expect(done.locator(".task-closed-by")).to_contain_text("Done by your reply")
    expect(done.locator(".task-closed-by")).to_contain_text("Here is the deck.")
    done.locator(".task-closed-by [data-action='undo-email']").click()
    expect(page.locator("#undo")).to_contain_text("Undone")
    expect(row(page, "Send me the deck by Friday")).to_have_count(0)  # open again: no longer in Done

    page.locator("#tab-open").click()
    back = row(page, "Send me the deck by Friday")
    expect(back).to_have_count(1)
    back.locator(".task-history summary").click()
    expect(back.locator(".task-history")).to_contain_text("Undone by you")
    task.refresh_from_db()
    assert (task.status, task.hand_changed) == (Task.Status.OPEN, True)

    # An email that would close it now only suggests it; Mark done takes the suggestion.
    TaskEventFactory(task=task, action=TaskEvent.Action.SUGGESTED, sentence="Attached is the deck.")
    suggestion = back.locator(".task-suggestion")
    expect(suggestion).to_contain_text("seems to deliver this", timeout=LIVE_WITHIN_MS)
    suggestion.locator("[data-action='accept-suggestion']").click()
    expect(row(page, "Send me the deck by Friday")).to_have_count(0)
    task.refresh_from_db()
    assert task.status == Task.Status.DONE
    assert (page_errors, server_errors) == ([], [])


def test_a_waiting_item_appears_and_leaves_when_its_answer_closes_it(
    live_site: str, transactional_db: None, browser_page: Page
) -> None:
    page = browser_page
    page_errors, server_errors = watch_errors(page)
    person = UserFactory()
    box = IntegrationFactory(user=person)
    log_in(page, live_site, person)
    page.locator("#tab-waiting").click()
    expect(page.locator("#task-list > li.empty")).to_contain_text("You are not waiting for anything")

    item = email_task(
        person, box, "s1", "Send me the Q3 numbers", kind=Task.Kind.WAITING, waiting_on="Sam Lee <sam@example.org>"
    )
    waiting = row(page, "Send me the Q3 numbers")
    expect(waiting).to_contain_text("Waiting on Sam Lee", timeout=LIVE_WITHIN_MS)
    page.locator("#tab-open").click()
    expect(row(page, "Send me the Q3 numbers")).to_have_count(0)  # not one of the person's own tasks
    page.locator("#tab-waiting").click()
    expect(waiting).to_have_count(1)

    email_closes(item, email_folder="inbox", email_sender="Sam Lee <sam@example.org>", sentence="Here are the numbers.")

    expect(waiting).to_have_count(0, timeout=LIVE_WITHIN_MS)
    page.locator("#tab-done").click()
    expect(row(page, "Send me the Q3 numbers").locator(".task-closed-by")).to_contain_text("Closed by Sam Lee")
    assert (page_errors, server_errors) == ([], [])
