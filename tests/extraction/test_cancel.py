"""Stopping a run (issue 31): the person presses Stop (or calls `POST /api/extraction/runs/{id}/cancel`) and the
run ends `cancelled` at its next batch boundary. What it wrote stays; no cursor moves (DESIGN §1: a cancelled
run never reaches its cursor commit, so every cursor stays where the run found it); the next run fetches the
same delta again, skips what the ledger holds and reads the rest. A queued run that has not started ends
cancelled at once.

The stop is asked while a batch's Gemini call is in flight (the sandbox answers slowly), so the batch it asks
after is known: after the first batch, with the second in flight, the run writes the second and sends no
third. Killed at each crash point around the stop (extraction/crashpoints.py, as in test_crash_matrix.py), no
cursor is ahead of handled mail, the reaper and a worker end the run `cancelled` without a person, and the
next run reads the rest: every email handled once, no task twice.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.db.models import Count
from django.test import Client

from accounts.models import User
from extraction.jobs import extraction_run_job
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.pipeline import extraction_run_execute
from extraction.services import extraction_run_request, extraction_runs_reap
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.extraction.test_crash_matrix import KILLED, Mail, assert_ledger_and_tasks_agree, gemini_emails
from tests.factories import UserFactory
from tests.processes import Forker
from tests.waiting import wait_for

# Gmail's 25 first (integrations are read in provider order), then Outlook's 15: four batches of ten, the third
# holding both mailboxes. Every third email asks nothing.
GMAIL_MAIL = [(700 + n, n % 3 != 2) for n in range(25)]
OUTLOOK_MAIL = [(800 + n, n % 3 != 1) for n in range(15)]
EMAILS = len(GMAIL_MAIL) + len(OUTLOOK_MAIL)
LATENCY_MS = 1500  # each Gemini answer: long enough for the stop to be asked while a call is in flight
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def _serial(settings: Any) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # one call in flight: the n-th Gemini call is the n-th batch


def gemini_calls(sandbox: SandboxClient) -> int:
    return len(gemini_emails(sandbox))


def stop_asked(run: ExtractionRun) -> Client:
    """The person presses Stop: through the API, as the browser's session does. Returns their client."""
    client = Client()
    client.force_login(run.user)
    response = client.post(f"/api/extraction/runs/{run.pk}/cancel")
    assert response.status_code == 202, response.content  # accepted: it stops at its next batch boundary
    body = response.json()
    assert body["status"] == "running" and body["cancel_requested_at"], body
    return client


def both_mailboxes_with_mail(
    gmail: GmailBox, outlook: OutlookBox, sandbox: SandboxClient
) -> tuple[Mail, tuple[str, str]]:
    """The crash matrix's mail in both mailboxes, Gemini slowed so that a stop falls between batches; the
    cursors before."""
    mail = Mail()
    mail.deliver(gmail, GMAIL_MAIL)
    mail.deliver(outlook, OUTLOOK_MAIL)
    sandbox.set_gemini_latency(LATENCY_MS)
    return mail, (gmail.cursor, outlook.cursor)


def run_in_thread(user: User) -> tuple[ExtractionRun, threading.Thread, list[Any]]:
    """A run pressed by the person, executing in a thread of this process."""
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.MANUAL)
    thread, results = in_thread(lambda: extraction_run_execute(run=run))
    return run, thread, results


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []

    def body() -> None:
        try:
            results.append(target())
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, results


def assert_each_email_once_and_no_task_twice(mail: Mail, gmail: GmailBox, outlook: OutlookBox) -> None:
    assert set(ProcessedEmail.objects.values_list("integration_id", "message_id")) == mail.ledger_keys(gmail, outlook)
    assert ProcessedEmail.objects.count() == EMAILS
    assert_ledger_and_tasks_agree(mail)
    assert Task.objects.count() == len(mail.asking)
    assert not Task.objects.values("user", "source", "source_id", "title_key").annotate(n=Count("id")).filter(n__gt=1)


def run_line(html: str) -> str:
    start = html.index('id="run-status"')
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start : html.index("</div>", start)])).strip()


# Stopped mid-way ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_after_its_first_batch_ends_cancelled_keeps_what_it_wrote_and_the_next_run_reads_the_rest(
    gmail: GmailBox, outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    mail, before = both_mailboxes_with_mail(gmail, outlook, sandbox)
    run, thread, results = run_in_thread(consenting_user)
    # The second call is sent only once the first batch is written: the stop comes after the first batch.
    wait_for(lambda: gemini_calls(sandbox) == 2, timeout=30, what="the second batch sent", interval=0.02)
    client = stop_asked(run)
    thread.join(timeout=60)
    stopped = results[0]

    assert (stopped.status, stopped.error_code) == (ExtractionRun.Status.CANCELLED, "stopped")
    assert gemini_calls(sandbox) == 2  # the batch in flight is written; no third one is sent
    assert ProcessedEmail.objects.filter(run=stopped).count() == 20  # what it wrote stays
    assert_ledger_and_tasks_agree(mail)
    assert (gmail.cursor, outlook.cursor) == before  # no cursor past what it handled
    said = run_line(client.get(f"/runs/{stopped.pk}", headers=HTMX).content.decode())
    assert "Stopped: 20 emails read before you stopped; the rest will be read next time." in said, said
    assert 'id="stop-run"' not in client.get(f"/runs/{stopped.pk}", headers=HTMX).content.decode()

    sandbox.set_gemini_latency(0)
    following = run_extraction(consenting_user)

    assert following.status == ExtractionRun.Status.SUCCEEDED, following.error_message
    assert following.emails_sent_to_llm == EMAILS - 20  # the rest, and only the rest
    assert_each_email_once_and_no_task_twice(mail, gmail, outlook)
    assert gmail.cursor == gmail.history_id() and outlook.cursor != before[1]
    asked = Counter(n for call in gemini_emails(sandbox) for n in call)
    assert set(asked) == {n for n, _ in [*GMAIL_MAIL, *OUTLOOK_MAIL]} and set(asked.values()) == {1}


@pytest.mark.django_db(transaction=True)
def test_a_run_with_parallel_calls_cancelled_writes_the_answers_in_flight_and_sends_no_more(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings: Any
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 3
    mail = Mail()
    mail.deliver(gmail, [(900 + n, n % 3 != 2) for n in range(60)])
    before = gmail.cursor
    # Longer than one answer: the three calls go out one after another, and on a loaded machine (CI) the first
    # answer came back, and a fourth call went out, before the stop was asked.
    sandbox.set_gemini_latency(4 * LATENCY_MS)
    run, thread, results = run_in_thread(consenting_user)
    wait_for(lambda: gemini_calls(sandbox) == 3, timeout=30, what="three batches in flight", interval=0.02)
    stop_asked(run)
    thread.join(timeout=60)

    assert results[0].status == ExtractionRun.Status.CANCELLED
    assert gemini_calls(sandbox) == 3  # the answers asked for are written, nothing more is sent
    assert ProcessedEmail.objects.count() == 30
    assert_ledger_and_tasks_agree(mail)
    assert gmail.cursor == before


@pytest.mark.django_db(transaction=True)
def test_a_cancel_asked_during_the_last_batch_moves_no_cursor_and_the_next_run_moves_it_without_reading_again(
    gmail: GmailBox, outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    mail, before = both_mailboxes_with_mail(gmail, outlook, sandbox)
    run, thread, results = run_in_thread(consenting_user)
    wait_for(lambda: gemini_calls(sandbox) == 4, timeout=30, what="the last batch sent", interval=0.02)
    stop_asked(run)
    thread.join(timeout=60)

    # Every email is written, but the stop was asked before the commit: the run ends stopped, its cursors stay.
    assert results[0].status == ExtractionRun.Status.CANCELLED
    assert ProcessedEmail.objects.count() == EMAILS
    assert (gmail.cursor, outlook.cursor) == before
    sandbox.set_gemini_latency(0)

    following = run_extraction(consenting_user)

    assert following.status == ExtractionRun.Status.SUCCEEDED
    assert (following.emails_sent_to_llm, following.llm_calls) == (0, 0)  # all in the ledger already
    assert_each_email_once_and_no_task_twice(mail, gmail, outlook)
    assert gmail.cursor == gmail.history_id() and outlook.cursor != before[1]


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_queued_run_ends_it_at_once_and_its_job_reads_nothing(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    mail = Mail()
    mail.deliver(gmail, GMAIL_MAIL[:5])
    before = gmail.cursor
    run, _ = extraction_run_request(user=consenting_user, trigger=ExtractionRun.Trigger.MANUAL)
    client = Client()
    client.force_login(consenting_user)

    response = client.post(f"/api/extraction/runs/{run.pk}/cancel")

    assert response.status_code == 200, response.content  # done now, not at a batch boundary
    assert (response.json()["status"], response.json()["error_code"]) == ("cancelled", "stopped")
    sandbox.clear_requests()
    extraction_run_job.apply(args=[run.pk])  # its message, delivered after the stop
    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.CANCELLED and run.finished_at is not None
    assert run.started_at is None and not sandbox.requests()  # never started: nothing fetched, nothing sent
    assert gmail.cursor == before
    assert extraction_run_request(user=consenting_user, trigger="manual")[1]  # a new press queues a new run

    following = run_extraction(consenting_user)
    assert following.status == ExtractionRun.Status.SUCCEEDED
    assert ProcessedEmail.objects.count() == 5 and gmail.cursor == gmail.history_id()


# Killed around the stop --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    point: str  # killed at the n-th pass of this point (extraction/crashpoints.py)
    nth: int = 1
    stop_after_calls: int = 2  # the stop is asked once this many Gemini calls are sent
    handled_at_kill: int = 20  # emails in the ledger when the process dies
    lost_batch: bool = False  # the batch in flight had its answer paid for, then lost
    again: bool = False  # and the worker taking the run up dies at the point too


KILLS = [
    pytest.param(Kill("llm_call", 2, handled_at_kill=10, lost_batch=True), id="llm_call-in-flight"),
    pytest.param(Kill("batch_tx", 2, handled_at_kill=10, lost_batch=True), id="batch_tx-in-flight"),
    pytest.param(Kill("after_batch", 2), id="after_batch-in-flight"),
    pytest.param(Kill("stop"), id="stop-seen"),
    pytest.param(Kill("stop", again=True), id="stop-seen-twice"),
    pytest.param(Kill("stop", stop_after_calls=4, handled_at_kill=EMAILS), id="stop-seen-in-the-commit"),
]


@pytest.fixture(scope="module")
def forker(django_db_setup: None, django_db_blocker: Any) -> Iterator[Forker]:
    with django_db_blocker.unblock():
        forks = Forker(EXTRACTION_LLM_CONCURRENCY="1")
    yield forks
    forks.close()


@pytest.mark.slow  # runs killed in processes of their own (tests/slow.py)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kill", KILLS)
def test_a_run_killed_around_its_cancel_moves_no_cursor_ahead_loses_nothing_and_ends_cancelled(
    kill: Kill,
    gmail: GmailBox,
    outlook: OutlookBox,
    sandbox: SandboxClient,
    consenting_user: User,
    forker: Forker,
    broker_queue: Callable[[], int],
) -> None:
    mail, before = both_mailboxes_with_mail(gmail, outlook, sandbox)

    # The stop, then the kill --------------------------------------------------------------------------
    thread, results = in_thread(
        lambda: forker.extract(consenting_user.email, crash_point=f"{kill.point}:{kill.nth}", timeout=120)
    )
    wait_for(lambda: gemini_calls(sandbox) == kill.stop_after_calls, timeout=60, what="the batch sent", interval=0.02)
    run = wait_for(lambda: ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).first(), timeout=10)
    assert run is not None
    stop_asked(run)
    thread.join(timeout=120)
    killed = results[0]
    assert killed.returncode == KILLED, killed.stdout
    lost = gemini_emails(sandbox)[-1] if kill.lost_batch else set()
    calls = gemini_calls(sandbox)
    sandbox.set_gemini_latency(0)

    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.RUNNING  # nothing could record its death
    assert ProcessedEmail.objects.count() == kill.handled_at_kill
    assert_ledger_and_tasks_agree(mail)
    assert (gmail.cursor, outlook.cursor) == before  # no cursor ahead of handled mail

    # Recovery without a person: the reaper queues it again, a worker takes it up and ends it stopped --------
    assert extraction_runs_reap() == (1, 0)
    assert broker_queue() == 1
    if kill.again:
        assert forker.job(run.pk, crash_point=kill.point).returncode == KILLED
        assert (gmail.cursor, outlook.cursor) == before
        assert extraction_runs_reap() == (1, 0)
    extraction_run_job.apply(args=[run.pk])
    run.refresh_from_db()
    assert (run.status, run.error_code) == (ExtractionRun.Status.CANCELLED, "stopped"), run.error_message
    assert gemini_calls(sandbox) == calls  # taken up, it sends nothing more: it was asked to stop
    assert ProcessedEmail.objects.count() == kill.handled_at_kill
    assert (gmail.cursor, outlook.cursor) == before
    assert extraction_runs_reap() == (0, 0)
    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).exists()

    # The next run reads the rest: every email once, no task twice, the cursors where the mail is ------------
    following = run_extraction(consenting_user)  # raises LeaseBusy if a dead runner still held the lease
    assert following.status == ExtractionRun.Status.SUCCEEDED, following.error_message
    assert_each_email_once_and_no_task_twice(mail, gmail, outlook)
    assert gmail.cursor == gmail.history_id() and outlook.cursor != before[1]
    asked = Counter(n for call in gemini_emails(sandbox) for n in call)
    assert set(asked) == {n for n, _ in [*GMAIL_MAIL, *OUTLOOK_MAIL]}
    assert {n for n, times in asked.items() if times > 1} <= lost  # only the answer lost with the process
    assert max(asked.values()) <= 2


# The API -----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_of_a_running_run_is_accepted_and_asked_again_changes_nothing(consenting_user: User) -> None:
    run = ExtractionRun.objects.create(user=consenting_user, trigger="api", status=ExtractionRun.Status.RUNNING)
    client = Client()
    client.force_login(consenting_user)

    first = client.post(f"/api/extraction/runs/{run.pk}/cancel")
    second = client.post(f"/api/extraction/runs/{run.pk}/cancel")

    assert first.status_code == 202 and second.status_code == 202, first.content
    assert first.json()["status"] == "running"  # a running run ends at its next batch boundary
    assert first.json()["cancel_requested_at"] == second.json()["cancel_requested_at"] is not None
    assert client.get(f"/api/extraction/runs/{run.pk}").json()["cancel_requested_at"] is not None


@pytest.mark.django_db
def test_cancel_of_someone_elses_or_an_unknown_run_is_not_found(consenting_user: User) -> None:
    theirs = ExtractionRun.objects.create(user=UserFactory(), trigger="api")
    client = Client()
    client.force_login(consenting_user)

    for run_id in (theirs.pk, theirs.pk + 1000):
        response = client.post(f"/api/extraction/runs/{run_id}/cancel")
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "run_not_found"
        assert client.post(f"/runs/{run_id}/cancel", headers=HTMX).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == ExtractionRun.Status.QUEUED and theirs.cancel_requested_at is None


@pytest.mark.django_db
def test_cancel_of_a_finished_run_is_a_conflict_and_changes_nothing(gmail: GmailBox, consenting_user: User) -> None:
    done = run_extraction(consenting_user)
    client = Client()
    client.force_login(consenting_user)

    response = client.post(f"/api/extraction/runs/{done.pk}/cancel")

    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "run_finished" and body["extra"] == {"status": "succeeded"}
    assert "already finished" in body["message"]
    done.refresh_from_db()
    assert (done.status, done.cancel_requested_at) == (ExtractionRun.Status.SUCCEEDED, None)


@pytest.mark.django_db
def test_cancel_needs_authentication_and_a_csrf_token_from_a_browser(consenting_user: User) -> None:
    run = ExtractionRun.objects.create(user=consenting_user, trigger="api")
    assert Client().post(f"/api/extraction/runs/{run.pk}/cancel").status_code == 401
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(consenting_user)
    assert browser.post(f"/api/extraction/runs/{run.pk}/cancel").status_code == 403
    assert browser.post(f"/runs/{run.pk}/cancel", headers=HTMX).status_code == 403
    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.QUEUED


# The page ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_stop_button_shows_while_a_run_waits_or_runs_and_cancel_answers_with_the_run_line(
    consenting_user: User,
) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(consenting_user)
    running = ExtractionRun.objects.create(user=consenting_user, trigger="manual", status=ExtractionRun.Status.RUNNING)

    line = browser.get(f"/runs/{running.pk}", headers=HTMX).content.decode()
    assert 'id="stop-run"' in line and 'data-action="stop-run"' in line
    assert f'hx-post="/runs/{running.pk}/cancel"' in line and 'hx-target="#run-status"' in line
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', line)
    assert token is not None  # the form carries its CSRF token

    answer = browser.post(f"/runs/{running.pk}/cancel", {"csrfmiddlewaretoken": token[1]}, headers=HTMX)

    assert answer.status_code == 200
    stopping = answer.content.decode()
    assert 'id="run-status"' in stopping  # the run line partial, swapped in for the one polled
    assert 'data-status="running"' in stopping and "Stopping" in stopping  # until its next batch boundary
    running.refresh_from_db()
    assert running.cancel_requested_at is not None

    queued = ExtractionRun.objects.create(user=UserFactory(), trigger="manual")
    browser.force_login(queued.user)
    line = browser.get(f"/runs/{queued.pk}", headers=HTMX).content.decode()
    assert 'id="stop-run"' in line
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', line)
    assert token is not None
    answer = browser.post(f"/runs/{queued.pk}/cancel", {"csrfmiddlewaretoken": token[1]}, headers=HTMX)
    cancelled = answer.content.decode()
    assert answer.status_code == 200 and 'data-status="cancelled"' in cancelled
    assert 'id="stop-run"' not in cancelled  # finished: no Stop any more
    assert "Stopped before it started" in run_line(cancelled), run_line(cancelled)
    assert 'id="stop-run"' not in browser.get(f"/runs/{queued.pk}", headers=HTMX).content.decode()


@pytest.mark.django_db
def test_cancel_of_a_finished_run_from_the_page_shows_how_it_ended(gmail: GmailBox, consenting_user: User) -> None:
    done = run_extraction(consenting_user)
    client = Client()
    client.force_login(consenting_user)

    line = client.get(f"/runs/{done.pk}", headers=HTMX).content.decode()
    assert 'id="stop-run"' not in line
    answer = client.post(f"/runs/{done.pk}/cancel", headers=HTMX)

    assert answer.status_code == 200  # the line as it stands: it had finished before the press
    assert 'data-status="succeeded"' in answer.content.decode() and 'id="stop-run"' not in answer.content.decode()
    done.refresh_from_db()
    assert done.status == ExtractionRun.Status.SUCCEEDED


@pytest.mark.django_db
def test_cancel_without_javascript_goes_back_home_saying_so(consenting_user: User) -> None:
    run = ExtractionRun.objects.create(user=consenting_user, trigger="manual", status=ExtractionRun.Status.RUNNING)
    client = Client()
    client.force_login(consenting_user)

    response = client.post(f"/runs/{run.pk}/cancel", follow=True)

    assert response.redirect_chain[-1][0] == "/"
    assert "stops after the batch it is reading" in response.content.decode()
