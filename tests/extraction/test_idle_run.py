"""A run that finds no new mail costs a handful of statements (issue 12): the polling safety net reads every
mailbox every few minutes, so idle runs are most runs. Cheap, yet whole: the run is recorded, the mailbox
is marked read, the lease is free again, and a runner that lost its lease still commits nothing."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from extraction.models import ExtractionLease, ExtractionRun, FetchFailure
from extraction.pipeline import extraction_run_execute
from extraction.scheduling import gmail_ring_covered
from integrations.models import Integration, SyncCursor
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.mail import ask
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the run's own transactions, as a worker runs them

# What an idle run sends: take the lease; mark the run running; the consent and the bulk choice; the mailboxes
# with their cursors; then, in one transaction, give the lease back (the fence), mark each mailbox read (its
# cursor compared), record the outcome; read the run back. A cursor that moves (new history, a new delta
# link) costs one statement more. Transaction control is not counted (BEGIN and COMMIT: Django logs them,
# but they pass through no cursor; savepoints: none outside a test's own transaction).
IDLE_STATEMENTS = 8
TRANSACTION_CONTROL = re.compile(r"^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE SAVEPOINT)\b")


def idle_run(user: User) -> tuple[ExtractionRun, list[str]]:
    """Execute a queued run of `user` as a worker does, and the SQL it sent."""
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.SCHEDULE)
    with CaptureQueriesContext(connection) as captured:
        done = extraction_run_execute(run=run)
    return done, [q["sql"] for q in captured.captured_queries if not TRANSACTION_CONTROL.match(q["sql"])]


def assert_idle_run_whole(run: ExtractionRun, integration: Integration, cursor_before: str, cursor: str) -> None:
    """What an idle run leaves: a succeeded run that read nothing, its record, the mailbox marked read."""
    stored = ExtractionRun.objects.get(pk=run.pk)
    assert (run.status, run.error_code) == (ExtractionRun.Status.SUCCEEDED, "")
    for field in ("status", "deliveries", "emails_fetched", "finished_at", "mailboxes", "lease_token"):
        assert getattr(run, field) == getattr(stored, field), field  # the returned run is the stored one
    assert stored.deliveries == 1
    assert stored.emails_fetched == stored.llm_calls == 0
    report = stored.mailboxes[str(integration.pk)]
    assert (report["status"], report["before"], report["after"]) == ("ok", cursor_before, cursor)
    fresh = Integration.objects.get(pk=integration.pk)
    assert fresh.last_success_at is not None and stored.started_at is not None
    assert fresh.last_success_at >= stored.started_at  # read successfully: not due a poll
    assert ExtractionLease.objects.get(user_id=run.user_id).run_id is None  # the lease is free


def test_an_idle_gmail_run_costs_a_handful_of_statements(gmail: GmailBox, consenting_user: User) -> None:
    run_extraction(consenting_user)  # read once: the cursor is the mailbox's history id
    before = gmail.cursor

    run, statements = idle_run(consenting_user)

    assert len(statements) <= IDLE_STATEMENTS, "\n".join(statements)
    assert_idle_run_whole(run, gmail.integration, before, gmail.cursor)
    assert gmail.cursor == before  # no mail, no history: the cursor stays
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # the next run starts


def test_an_idle_outlook_run_costs_a_handful_of_statements(outlook: OutlookBox, consenting_user: User) -> None:
    before = outlook.cursor

    run, statements = idle_run(consenting_user)

    assert len(statements) <= IDLE_STATEMENTS, "\n".join(statements)
    assert_idle_run_whole(run, outlook.integration, before, outlook.cursor)
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED


def test_an_idle_run_that_lost_its_lease_commits_nothing(gmail: GmailBox, consenting_user: User) -> None:
    """The fence of the commit is the giving back of the lease: a runner whose token is no longer the row's
    neither marks the mailbox read nor frees the lease of the runner that holds it now."""
    run_extraction(consenting_user)
    read_at = Integration.objects.get(pk=gmail.integration.pk).last_success_at
    newer = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.MANUAL)

    def take_over() -> None:  # as another runner does once this runner's lock connection was dropped
        ExtractionLease.objects.filter(user_id=consenting_user.pk).update(token=999, run=newer)

    done = execute_with(consenting_user, before_commit=take_over)

    assert (done.status, done.error_code) == (ExtractionRun.Status.CANCELLED, "lease_lost")
    assert Integration.objects.get(pk=gmail.integration.pk).last_success_at == read_at  # nothing committed
    lease = ExtractionLease.objects.get(user_id=consenting_user.pk)
    assert (lease.token, lease.run_id) == (999, newer.pk)


def test_a_mailbox_disconnected_during_an_idle_run_is_not_marked_read(gmail: GmailBox, consenting_user: User) -> None:
    from integrations.services import integration_disconnect

    run_extraction(consenting_user)
    read_at = Integration.objects.get(pk=gmail.integration.pk).last_success_at

    done = execute_with(consenting_user, before_commit=lambda: integration_disconnect(integration=gmail.integration))

    assert done.status == ExtractionRun.Status.SUCCEEDED
    assert done.mailboxes[str(gmail.integration.pk)]["after"] is None  # no cursor to move any more
    integration = Integration.objects.get(pk=gmail.integration.pk)
    assert (integration.status, integration.last_success_at) == (Integration.Status.DISCONNECTED, read_at)


def test_an_idle_run_whose_cursor_was_moved_meanwhile_claims_no_read(gmail: GmailBox, consenting_user: User) -> None:
    """Even when it has no cursor to move, the run compares the cursor with the one it started from."""
    run_extraction(consenting_user)
    read_at = Integration.objects.get(pk=gmail.integration.pk).last_success_at

    done = execute_with(
        consenting_user,
        before_commit=lambda: SyncCursor.objects.filter(integration=gmail.integration).update(value="999999"),
    )

    assert (done.status, done.error_code) == (ExtractionRun.Status.FAILED, "cursor_conflict")
    assert Integration.objects.get(pk=gmail.integration.pk).last_success_at == read_at
    assert gmail.cursor == "999999"


def test_an_idle_run_forgets_the_failed_reads_of_mail_that_left_the_inbox(
    outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    """A message that failed to read holds its mailbox's cursor. Moved out of the Inbox before it could be
    read, it is listed no more: the next run reads nothing, and no failed read of it stays on show."""
    message_id = outlook.deliver(ask(1))
    sandbox.fault("graph", 500, route=f"messages/{message_id}", times=None)
    first = run_extraction(consenting_user)
    assert (first.status, first.error_code) == (ExtractionRun.Status.SUCCEEDED, "partial")
    assert FetchFailure.objects.filter(integration=outlook.integration).count() == 1

    sandbox.move_outlook(outlook.address, [message_id], "archive")
    sandbox.clear_faults()
    run = run_extraction(consenting_user)

    assert (run.status, run.error_code, run.emails_fetched) == (ExtractionRun.Status.SUCCEEDED, "", 0)
    assert not FetchFailure.objects.exists()


def test_a_run_with_mail_says_how_far_it_read_while_it_runs(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    """The doorbell reads how far a run in progress has listed (`fetched`), so a push for mail that run
    reads queues no second run: the report is written before the first batch, not only at the end."""
    run_extraction(consenting_user)
    gmail.deliver(ask(1))
    rung_for = int(gmail.history_id())
    sandbox.set_gemini_latency(1500)
    results: list[ExtractionRun] = []
    thread = threading.Thread(target=in_own_connection(lambda: results.append(run_extraction(consenting_user))))
    thread.start()
    try:
        wait_for(
            lambda: any(r["method"] == "POST" for r in sandbox.requests("gemini")), timeout=10, what="Gemini asked"
        )
        assert gmail_ring_covered(integration=gmail.integration, history_id=rung_for)
    finally:
        thread.join(timeout=30)
    assert results[0].status == ExtractionRun.Status.SUCCEEDED
    assert results[0].emails_fetched == results[0].emails_sent_to_llm == 1


def execute_with(user: User, *, before_commit: Callable[[], object]) -> ExtractionRun:
    """Execute a run of `user` in which `before_commit` happens elsewhere (another connection, committed)
    right before the commit: once the run has read its cursors, before its next statement on the lease."""
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.SCHEDULE)
    armed = done = False

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        nonlocal armed, done
        if "integrations_synccursor" in sql:
            armed = True
        elif armed and not done and "extraction_extractionlease" in sql:
            done = True
            elsewhere = threading.Thread(target=in_own_connection(before_commit))
            elsewhere.start()
            elsewhere.join()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        return extraction_run_execute(run=run)


def in_own_connection(body: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            body()
        finally:
            connection.close()

    return run
