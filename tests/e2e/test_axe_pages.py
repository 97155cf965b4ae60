"""axe-core over every page a visitor and a signed-in person reach (issue 23), in Chromium at 1280 and 390 px:
no critical and no serious violation on any of them.

axe-core is vendored (tests/e2e/vendor/axe-core, see its README for the version) so that `make test` needs
neither Node nor the internet. The person is demo-like: a Gmail mailbox in the sandbox holding the demo inbox
and one more email, read by the real extraction (sandbox Gemini), then a task each done, dismissed and snoozed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.db import connections
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from playwright.sync_api import expect

from accounts.models import User
from extraction.models import ExtractionRun
from reminders.digest import unsubscribe_link_make
from sandbox.demo import load_demo_mailbox
from sandbox.server import SandboxServer
from tasks.models import Task
from tasks.services import task_set_status
from tasks.snooze import person_today, task_snooze
from tests.conftest import GmailBox, run_extraction
from tests.e2e.conftest import chromium, row_action, watch_errors
from tests.tasks.test_reading_pane import lease_mail

pytestmark = pytest.mark.e2e

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
AXE_VERSION = "4.14.1"
PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
VIEWPORTS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}
BLOCKING = ("critical", "serious")

# Only what the assertion needs, so that the failure message stays readable.
AXE_RUN_JS = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.length,
    targets: v.nodes.slice(0, 8).map(n => n.target.join(" ")),
    first: v.nodes[0]?.failureSummary,
  }));
}"""


@dataclass(frozen=True)
class Person:
    user: User
    task: Task  # a task from an email, open, for the edit row and the reading pane
    unsubscribe_path: str  # the digest's signed link, without SITE_URL


@pytest.fixture
def person(gmail: GmailBox, sandbox_server: SandboxServer, transactional_db: None) -> Person:
    load_demo_mailbox(sandbox_server.state, gmail.address)
    gmail.deliver(lease_mail())
    user = gmail.integration.user
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    lease = Task.objects.get(user=user, email_subject="The lease")
    tasks = list(Task.objects.filter(user=user, status=Task.Status.OPEN).exclude(pk=lease.pk).order_by("pk"))
    assert len(tasks) >= 5, f"the demo inbox gave only {len(tasks)} tasks"
    if not any(t.kind == Task.Kind.WAITING for t in tasks):  # the demo's inbox holds no sent mail
        Task.objects.filter(pk=tasks[4].pk).update(kind=Task.Kind.WAITING)
    task_set_status(task=tasks[1], status=Task.Status.DONE)
    task_set_status(task=tasks[2], status=Task.Status.DISMISSED)
    task_snooze(task=tasks[3], until=person_today(user=user) + timedelta(days=3))
    link = urlsplit(unsubscribe_link_make(user=user))
    unsubscribe_path = f"{link.path}?{link.query}"
    return Person(user=user, task=lease, unsubscribe_path=unsubscribe_path)


def axe_violations(page: Any) -> list[dict[str, Any]]:
    page.add_script_tag(path=str(AXE))
    assert page.evaluate("axe.version") == AXE_VERSION
    return list(page.evaluate(AXE_RUN_JS))


# One test per width and visitor or person, so that a parallel run shares them out between its workers.
@pytest.mark.parametrize("who", ["visitor", "signed in"])
@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_axe_every_page_1280_and_390(
    person: Person, live_site: str, _django_orm_beside_playwright: None, width: str, who: str
) -> None:
    user, task = person.user, person.task
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    found: list[str] = []
    checked: list[str] = []

    def open_home(page: Any) -> None:
        page.goto(f"{live_site}/")
        expect(page.locator(f"#task-{task.pk}")).to_be_visible()

    def edit_row(page: Any) -> None:
        open_home(page)
        row_action(page.locator(f"#task-{task.pk}"), "edit")
        expect(page.locator(f"#task-{task.pk} input[name='title']")).to_be_focused()

    def pane_dialog(page: Any) -> None:
        open_home(page)
        row_action(page.locator(f"#task-{task.pk}"), "read")
        expect(page.locator("#email-pane mark")).to_be_visible()

    def keys_help(page: Any) -> None:
        open_home(page)
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("?")
        expect(page.locator("#keys-help")).to_be_visible()

    def calendar_made(page: Any) -> None:
        page.goto(f"{live_site}/settings/")
        page.locator("#create-calendar").click()
        expect(page.get_by_label("New calendar link")).to_have_value(re.compile(r"/calendar/\S+\.ics$"))

    def api_docs(page: Any) -> None:
        page.goto(f"{live_site}/api/docs")
        # Swagger UI fetches and lays out the whole OpenAPI document first: beside four workers on two cores
        # that passed 5 s (CI: still "loading").
        expect(page.locator("#swagger-ui .opblock").first).to_be_visible(timeout=30_000)

    def reset_form(page: Any) -> None:
        # Made now: the token covers last_login, which each sign-in of this test changes.
        reset_token = default_token_generator.make_token(User.objects.get(pk=user.pk))
        page.goto(f"{live_site}/password-reset/{uid}/{reset_token}/")  # redirects to the set-password form
        expect(page.locator("input[type='password']").first).to_be_visible()

    def unsubscribed(page: Any) -> None:
        page.goto(f"{live_site}{person.unsubscribe_path}")
        page.locator("form button[type='submit']").click()
        page.wait_for_load_state()

    def visit(path: str) -> Callable[[Any], None]:
        return lambda page: page.goto(f"{live_site}{path}")

    signed_in: dict[str, Callable[[Any], None]] = {
        "tasks": open_home,
        "done": visit("/?status=done"),
        "dismissed": visit("/?status=dismissed"),
        "waiting": visit("/?kind=waiting"),
        "snoozed": visit("/tasks/snoozed"),
        "edit row": edit_row,
        "reading pane page": visit(f"/tasks/{task.pk}/email"),
        "task page": visit(f"/tasks/{task.pk}"),
        "reading pane dialog": pane_dialog,
        "keyboard help": keys_help,
        "mailboxes": visit("/mailboxes/"),
        "settings with a new calendar link": calendar_made,
        "consent": visit("/consent/"),
        "api docs": api_docs,
        "404 signed in": visit("/no-such-page/"),
    }
    visitor: dict[str, Callable[[Any], None]] = {
        "login": visit("/login/"),
        "signup": visit("/signup/"),
        "signup check your inbox": visit("/signup/check-your-inbox/"),
        "signup link invalid": visit("/signup/confirm/not-a-token/"),
        "password reset": visit("/password-reset/"),
        "password reset sent": visit("/password-reset/sent/"),
        "password reset new password": reset_form,
        "password reset link invalid": visit(f"/password-reset/{uid}/not-a-token/"),
        "password reset done": visit("/password-reset/done/"),
        "digest unsubscribe": visit(person.unsubscribe_path),
        "digest unsubscribed": unsubscribed,
        "digest unsubscribe link invalid": visit("/digest/unsubscribe?token=forged"),
        "404": visit("/no-such-page/"),
    }

    pages = signed_in if who == "signed in" else visitor
    with chromium() as browser:
        # bypass_csp, for this test only: Playwright's add_script_tag(path=) inlines axe's source, which
        # the Content-Security-Policy (script-src 'self') would block. The policy itself is checked by
        # every other browser test (tests/e2e/conftest.py's chromium()).
        context = browser.new_context(viewport=VIEWPORTS[width], bypass_csp=True)
        context.set_default_timeout(10_000)
        page = context.new_page()
        page_errors, server_errors = watch_errors(page)
        if who == "signed in":
            page.goto(f"{live_site}/login/")
            page.get_by_label("Email address").fill(user.email)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{live_site}/")
        for name, show in pages.items():
            show(page)
            page.wait_for_load_state("networkidle")
            label = f"{name} ({who}, {width} px, {page.url.removeprefix(live_site)})"
            checked.append(label)
            for violation in axe_violations(page):
                if violation["impact"] in BLOCKING:
                    found.append(f"{label}: {json.dumps(violation)}")
        assert page_errors == [] and server_errors == [], (page_errors, server_errors)
        context.close()
        connections.close_all()  # before Playwright stops (see conftest._chromium_page)

    assert len(checked) == len(pages)
    assert found == [], "critical or serious axe violations:\n" + "\n".join(found)
