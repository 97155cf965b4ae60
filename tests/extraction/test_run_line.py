"""The run line above the task list says what happened since the person last looked, summed over every run in
between, whatever started it (the schedule, a push, the button), not only the latest run's counts (issue 23
point 2). Through the test client with the production settings' DEBUG off."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionRun
from extraction.pipeline import extraction_run_execute
from integrations.models import FIRST_READ, SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task, TaskEvent
from tests.conftest import GmailBox
from tests.extraction.test_conversation_items import ASK, email, read, sent
from tests.mail import ask, rfc822

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def run(user: User, trigger: str) -> ExtractionRun:
    return extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger=trigger))


def line(html: str) -> str:
    """The run line's text, in one line."""
    start = html.index('id="run-status"')
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start : html.index("</div>", start)])).strip()


def test_the_buttons_run_that_found_nothing_still_tells_of_the_scheduled_runs_tasks(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    client.force_login(consenting_user)
    client.get("/")  # the person looks: nothing read yet
    for n in range(3):
        gmail.deliver(ask(n))
    run(consenting_user, ExtractionRun.Trigger.SCHEDULE)  # took the mail a second before the button
    client.post("/extract")
    pressed = ExtractionRun.objects.get(status=ExtractionRun.Status.QUEUED)
    extraction_run_execute(run=pressed)
    assert pressed.tasks_created == 0

    said = line(client.get(f"/runs/{pressed.pk}", headers=HTMX).content.decode())

    assert "3 new emails, 3 read by Gemini, 3 tasks created" in said, said
    assert "2 reads" in said and "scheduled" in said and "Extract now" in said, said
    assert "0 tasks created" not in said


def test_an_email_a_push_run_set_aside_is_told_on_the_task_page(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    client.force_login(consenting_user)
    client.get("/")
    gmail.deliver(rfc822("Poison", "Please send the report for poison project by Friday.\n"))
    sandbox.fault("gemini", 200, body={"promptFeedback": {"blockReason": "SAFETY"}}, times=None, match="poison")
    pushed = run(consenting_user, ExtractionRun.Trigger.WEBHOOK)
    assert pushed.emails_quarantined == 1
    sandbox.clear_faults()
    gmail.deliver(ask(7))
    run(consenting_user, ExtractionRun.Trigger.MANUAL)  # a later run, which set nothing aside

    said = line(client.get("/").content.decode())

    assert "1 email could not be read reliably and was set aside" in said, said
    assert "push" in said, said


def test_what_the_line_sums_starts_again_where_the_person_last_looked(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    client.force_login(consenting_user)
    client.get("/")
    gmail.deliver(ask(1))
    gmail.deliver(ask(2))
    run(consenting_user, ExtractionRun.Trigger.SCHEDULE)
    assert "2 tasks created" in line(client.get("/").content.decode())  # the person looks: they have seen it

    quiet = line(client.get("/").content.decode())
    assert "Nothing new since you last looked" in quiet, quiet

    gmail.deliver(ask(3))
    latest = run(consenting_user, ExtractionRun.Trigger.WEBHOOK)
    said = line(client.get(f"/runs/{latest.pk}", headers=HTMX).content.decode())
    assert "1 new email, 1 read by Gemini, 1 task created" in said, said


def test_while_a_first_read_of_sent_mail_runs_the_line_names_the_mailbox_and_not_once_it_is_done(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    """Issue 31: one line per mailbox for what the person must know, naming the provider, gone once untrue."""
    sent, _ = SyncCursor.objects.update_or_create(
        integration=gmail.integration, purpose=SyncCursor.Purpose.SENT_MAIL, defaults={"value": FIRST_READ}
    )
    running = ExtractionRun.objects.create(
        user=consenting_user, trigger=ExtractionRun.Trigger.MANUAL, status=ExtractionRun.Status.RUNNING
    )
    client.force_login(consenting_user)
    words = f"Gmail {gmail.address}: reading your Sent mail for the first time"

    assert words in line(client.get(f"/runs/{running.pk}", headers=HTMX).content.decode())

    sent.value = "12345"  # read: the cursor has a position
    sent.save(update_fields=["value"])
    assert words not in line(client.get(f"/runs/{running.pk}", headers=HTMX).content.decode())
    SyncCursor.objects.filter(pk=sent.pk).update(value=FIRST_READ)
    running.status = ExtractionRun.Status.SUCCEEDED
    running.save(update_fields=["status"])
    assert words not in line(client.get(f"/runs/{running.pk}", headers=HTMX).content.decode())  # not running


def test_a_run_that_closed_a_task_leaves_a_notice_with_undo_when_its_line_ends(client: Client, gmail: GmailBox) -> None:
    """Issue 31, no change in silence: the poll that sees the run end draws the line and, out of band, the notice
    above the list (as Done by hand does); its Undo puts the task back."""
    read(gmail, email(1, ASK))
    task = Task.objects.get(user=gmail.integration.user)
    run = read(gmail, sent(2, "Hi Ada,\nHere is the deck.\nBest, Person"))
    ExtractionRun.objects.filter(pk=run.pk).update(status=ExtractionRun.Status.SUCCEEDED, finished_at=timezone.now())
    client.force_login(gmail.integration.user)

    ended = client.get(f"/runs/{run.pk}", headers={"HX-Request": "true"}).content.decode()

    notice = ended[ended.index('<div id="undo"') :]
    assert 'hx-swap-oob="true"' in notice.split(">")[0]
    assert f"“{task.title}” closed by your reply." in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", notice))
    event = task.events.get(action=TaskEvent.Action.CLOSED)
    undo = f"/tasks/{task.pk}/history/{event.pk}/undo"
    assert f'action="{undo}"' in notice
    client.post(undo, {"from": "run"}, headers={"HX-Request": "true"})
    task.refresh_from_db()
    assert task.status == Task.Status.OPEN
    assert "closed by your reply" not in client.get(f"/runs/{run.pk}", headers={"HX-Request": "true"}).content.decode()


def test_a_run_end_seen_first_by_the_lists_poll_leaves_the_same_notice_as_the_run_lines_poll(
    client: Client, gmail: GmailBox
) -> None:
    """The list's poll (every 4 s) may see a run end before the run line's own (every 1 s): it redraws the run
    line as ended, which stops that poll, so it must leave the notice itself; a page that saw the run ended
    already gets none again (CI: the notice never came, the browser test waited on an empty #undo)."""
    read(gmail, email(1, ASK))
    task = Task.objects.get(user=gmail.integration.user)
    run = read(gmail, sent(2, "Hi Ada,\nHere is the deck.\nBest, Person"))
    ExtractionRun.objects.filter(pk=run.pk).update(status=ExtractionRun.Status.RUNNING)
    client.force_login(gmail.integration.user)
    page = client.get("/").content.decode()
    seen_running = re.search(r'data-version="([^"]+)"', page)
    assert seen_running is not None and ".running." in seen_running.group(1)
    ExtractionRun.objects.filter(pk=run.pk).update(status=ExtractionRun.Status.SUCCEEDED, finished_at=timezone.now())

    live = client.get("/tasks/changes", {"v": seen_running.group(1)}, headers={"HX-Request": "true"}).content.decode()

    notice = live[live.index('<div id="undo"') :]
    assert 'hx-swap-oob="true"' in notice.split(">")[0]
    assert f"“{task.title}” closed by your reply." in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", notice))
    seen_ended = re.search(r'data-version="([^"]+)"', live)
    assert seen_ended is not None
    ExtractionRun.objects.filter(pk=run.pk).update(updated_at=timezone.now())  # the run's row touched again
    again = client.get("/tasks/changes", {"v": seen_ended.group(1)}, headers={"HX-Request": "true"}).content.decode()
    assert 'id="undo"' not in again


def test_a_run_end_the_run_line_has_shown_leaves_no_second_notice_from_the_lists_poll(
    client: Client, gmail: GmailBox
) -> None:
    """The run line's poll saw the end first and left its notice; the person then marked a task done (its own
    Undo in #undo). The list's poll, still on the version from before the end, must not draw the run's notice
    over it again: its Undo would undo the reply's closing, not the person's Done (CI: the journey's Undo
    reopened the task the reply had closed)."""
    read(gmail, email(1, ASK))
    run = read(gmail, sent(2, "Hi Ada,\nHere is the deck.\nBest, Person"))
    ExtractionRun.objects.filter(pk=run.pk).update(status=ExtractionRun.Status.RUNNING)
    client.force_login(gmail.integration.user)
    seen_running = re.search(r'data-version="([^"]+)"', client.get("/").content.decode())
    assert seen_running is not None and ".running." in seen_running.group(1)
    ExtractionRun.objects.filter(pk=run.pk).update(status=ExtractionRun.Status.SUCCEEDED, finished_at=timezone.now())
    line = client.get(f"/runs/{run.pk}", headers={"HX-Request": "true"}).content.decode()
    assert 'id="undo"' in line  # the run line's poll left the notice
    shown = re.search(r'<input type="hidden" name="run_shown" value="([^"]+)"', line)
    assert shown is not None  # what the list's poll sends along (hx-include)

    live = client.get(
        "/tasks/changes", {"v": seen_running.group(1), "run_shown": shown.group(1)}, headers={"HX-Request": "true"}
    )

    assert live.status_code == 200  # the run line and the list are drawn again
    assert 'id="undo"' not in live.content.decode()
