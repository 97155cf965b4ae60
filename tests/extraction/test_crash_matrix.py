"""The crash-point matrix (DESIGN §6: "worker, process or database killed anywhere").

A real run, in a process of its own, over mail that spans three batches of a Gmail and an Outlook mailbox,
is killed with SIGKILL at each named point of extraction/crashpoints.py, each at least twice (at its first
and its second pass, or, for the points a run passes once, killed again while it is taken up). Then, with
no person involved (the reaper and a worker, as beat and Celery would run them), every email is handled
once, no task is duplicated, no cursor is ever ahead of handled mail, no run is left `running`, and the
person can start a new run at once.

The same holds for a run that reads a mailbox's Inbox and Sent mail together (two cursors of one mailbox,
a batch holding emails of both): killed at each point, neither cursor is ahead of its handled mail, and after
the recovery (and a clean rerun) each email is in the ledger once under its purpose.
"""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db.models import Count

from accounts.models import User
from extraction.jobs import extraction_run_job
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.services import extraction_runs_reap
from sandbox.client import SandboxClient
from tasks.models import Task, TaskEvent
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.mail import ask, no_ask
from tests.processes import Forker

# slow: runs killed in processes of their own (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KILLED = -signal.SIGKILL
# Gmail's 15 emails come first (integrations are read in provider order), then Outlook's 12: batch 1 is
# Gmail's first ten, batch 2 mixes both mailboxes, batch 3 is Outlook's rest. Every third email asks nothing.
GMAIL_MAIL = [(100 + n, n % 3 != 2) for n in range(15)]
OUTLOOK_MAIL = [(200 + n, n % 3 != 1) for n in range(12)]
EMAIL_NUMBER = re.compile(r"\b(?:[Pp]roject|[Uu]pdate) (\d{3})\b")


@dataclass(frozen=True)
class Case:
    point: str
    nth: int = 1  # killed at the n-th pass of the point
    again: bool = False  # and once more at the same point while the run is taken up again
    handled_at_kill: int = 0  # emails in the ledger when the process dies (whole batches only)
    spent_twice: bool = False  # the batch in flight had its Gemini answer paid for, then lost


CASES = [
    pytest.param(Case("fetch", 1), id="fetch-gmail"),
    pytest.param(Case("fetch", 3), id="fetch-outlook"),  # the second fetch is Gmail's Sent mail (read below)
    pytest.param(Case("llm_call", 1, spent_twice=True), id="llm_call-batch1"),
    pytest.param(Case("llm_call", 2, handled_at_kill=10, spent_twice=True), id="llm_call-batch2"),
    pytest.param(Case("batch_tx", 1, spent_twice=True), id="batch_tx-batch1"),
    pytest.param(Case("batch_tx", 2, handled_at_kill=10, spent_twice=True), id="batch_tx-batch2"),
    pytest.param(Case("after_batch", 1, handled_at_kill=10), id="after_batch-batch1"),
    pytest.param(Case("after_batch", 2, handled_at_kill=20), id="after_batch-batch2"),
    pytest.param(Case("cursor_tx", handled_at_kill=27), id="cursor_tx"),
    pytest.param(Case("cursor_tx", handled_at_kill=27, again=True), id="cursor_tx-twice"),
    pytest.param(Case("after_commit", handled_at_kill=27), id="after_commit"),
    pytest.param(Case("after_commit", handled_at_kill=27, again=True), id="after_commit-twice"),
]


# The matrix kills at each point of a serial run (one Gemini call in flight), where the n-th pass of a point
# is one batch; a run with parallel calls is killed at the end of this module.
@pytest.fixture(scope="module")
def forker(django_db_setup: None, django_db_blocker) -> Iterator[Forker]:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        forks = Forker(EXTRACTION_LLM_CONCURRENCY="1")
    yield forks
    forks.close()


@pytest.fixture(autouse=True)
def _serial(settings: Any) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 1  # the runs and jobs this process does, as the forked ones


@dataclass
class Mail:
    """What was delivered: provider message id -> the email's number, per mailbox, and which ones ask."""

    gmail: dict[str, int] = field(default_factory=dict)
    outlook: dict[str, int] = field(default_factory=dict)
    asking: set[str] = field(default_factory=set)

    def deliver(self, box: GmailBox | OutlookBox, numbers: list[tuple[int, bool]]) -> None:
        for number, asks in numbers:
            message_id = box.deliver(ask(number) if asks else no_ask(number))
            (self.gmail if isinstance(box, GmailBox) else self.outlook)[message_id] = number
            if asks:
                self.asking.add(message_id)

    def ledger_keys(self, gmail: GmailBox, outlook: OutlookBox) -> set[tuple[int, str]]:
        return {(gmail.integration.pk, i) for i in self.gmail} | {(outlook.integration.pk, i) for i in self.outlook}


def gemini_emails(sandbox: SandboxClient) -> list[set[int]]:
    """For each Gemini call so far, the numbers of the emails in its prompt."""
    return [
        {
            int(n)
            for line in json.loads(r["body"])["contents"][0]["parts"][0]["text"].splitlines()
            if not line.startswith("Item item_")  # an open item given with a later email is not that email
            for n in EMAIL_NUMBER.findall(line)
        }
        for r in sandbox.requests("gemini")
        if r["method"] == "POST"
    ]


def assert_ledger_and_tasks_agree(mail: Mail) -> None:
    """A batch's tasks and ledger rows are written together or not at all: an email is in the ledger
    exactly when its task (if it asks) exists, and once."""
    in_ledger = dict(ProcessedEmail.objects.values_list("message_id", "outcome"))
    tasks_by_email = Counter(Task.objects.values_list("source_id", flat=True))
    for message_id, outcome in in_ledger.items():
        wanted = ProcessedEmail.Outcome.TASKS if message_id in mail.asking else ProcessedEmail.Outcome.NO_TASKS
        assert outcome == wanted, message_id
    assert set(tasks_by_email) == {i for i in in_ledger if i in mail.asking}
    assert set(tasks_by_email.values()) <= {1}


@pytest.mark.parametrize("case", CASES)
def test_a_run_killed_anywhere_is_finished_without_a_person(
    case: Case,
    gmail: GmailBox,
    outlook: OutlookBox,
    sandbox: SandboxClient,
    consenting_user: User,
    forker: Forker,
    broker_queue: Callable[[], int],
) -> None:
    mail = Mail()
    mail.deliver(gmail, GMAIL_MAIL)
    mail.deliver(outlook, OUTLOOK_MAIL)
    before = (gmail.cursor, outlook.cursor)

    # The kill -------------------------------------------------------------------------------------------
    killed = forker.extract(consenting_user.email, crash_point=f"{case.point}:{case.nth}")
    assert killed.returncode == KILLED, killed.stdout
    dead = ExtractionRun.objects.latest("created_at")
    lost_batch = gemini_emails(sandbox)[-1] if case.spent_twice else set()
    assert ProcessedEmail.objects.count() == case.handled_at_kill
    assert_ledger_and_tasks_agree(mail)
    if case.point == "after_commit":
        assert dead.status == ExtractionRun.Status.SUCCEEDED  # the outcome was committed; only the lease is left
        assert gmail.cursor == gmail.history_id()
    else:
        assert dead.status == ExtractionRun.Status.RUNNING  # nothing could record its death
        assert (gmail.cursor, outlook.cursor) == before  # no cursor ahead of handled mail

    # Recovery: the reaper (beat, every 30 s) and a worker taking up the queued job -----------------------
    if case.point == "after_commit":
        assert extraction_runs_reap() == (0, 0)  # a finished run is never taken up again
        if case.again:  # new mail, and the person's next run dies holding the lease as well
            mail.deliver(gmail, [(120 + n, True) for n in range(3)])
            assert forker.extract(consenting_user.email, crash_point="after_commit").returncode == KILLED
            assert ExtractionRun.objects.latest("created_at").status == ExtractionRun.Status.SUCCEEDED
            assert extraction_runs_reap() == (0, 0)
    else:
        assert extraction_runs_reap() == (1, 0)
        assert broker_queue() == 1
        if case.again:  # the worker that takes the job up dies at the same point
            rekilled = forker.job(dead.pk, crash_point=case.point)
            assert rekilled.returncode == KILLED, rekilled.stdout
            assert (gmail.cursor, outlook.cursor) == before
            assert extraction_runs_reap() == (1, 0)
        extraction_run_job.apply(args=[dead.pk])
        dead.refresh_from_db()
        assert dead.status == ExtractionRun.Status.SUCCEEDED, dead.error_message
        assert extraction_runs_reap() == (0, 0)

    # Every email handled once, no duplicate, no cursor behind or ahead, nothing left running -------------
    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).exists()
    assert set(ProcessedEmail.objects.values_list("integration_id", "message_id")) == mail.ledger_keys(gmail, outlook)
    assert ProcessedEmail.objects.count() == len(mail.gmail) + len(mail.outlook)
    assert_ledger_and_tasks_agree(mail)
    assert Task.objects.count() == len(mail.asking)
    assert not Task.objects.values("user", "source", "source_id", "title_key").annotate(n=Count("id")).filter(n__gt=1)
    assert gmail.cursor == gmail.history_id()
    assert outlook.cursor != before[1]

    # Gemini was paid once per email; only the batch whose answer died with the process is asked again ------
    sent = Counter(n for call in gemini_emails(sandbox) for n in call)
    numbers = [*mail.gmail.values(), *mail.outlook.values()]
    assert set(sent) == set(numbers)
    assert {n for n, times in sent.items() if times > 1} <= lost_batch
    assert max(sent.values()) <= 2

    # The person can start a new run at once, and it finds nothing left to do ------------------------------
    calls = len(gemini_emails(sandbox))
    fresh = run_extraction(consenting_user)  # raises LeaseBusy if a dead runner still held the lease
    assert fresh.status == ExtractionRun.Status.SUCCEEDED, fresh.error_message
    assert (fresh.emails_fetched, fresh.llm_calls) == (0, 0)
    assert len(gemini_emails(sandbox)) == calls


def test_a_run_with_parallel_calls_killed_with_answers_in_flight_loses_nothing_and_resends_only_those(
    django_db_blocker: Any,
    gmail: GmailBox,
    outlook: OutlookBox,
    sandbox: SandboxClient,
    consenting_user: User,
    settings: Any,
) -> None:
    settings.EXTRACTION_LLM_CONCURRENCY = 3
    mail = Mail()
    mail.deliver(gmail, [(300 + n, n % 3 != 2) for n in range(30)])
    mail.deliver(outlook, [(400 + n, n % 3 != 1) for n in range(20)])
    sandbox.set_gemini_latency(300)
    with django_db_blocker.unblock():
        parallel = Forker(EXTRACTION_LLM_CONCURRENCY="3")
    try:
        killed = parallel.extract(consenting_user.email, crash_point="llm_call:2")
    finally:
        parallel.close()
    assert killed.returncode == KILLED, killed.stdout
    numbers = {**mail.gmail, **mail.outlook}
    handled_at_kill = {numbers[i] for i in ProcessedEmail.objects.values_list("message_id", flat=True)}
    asked_before = {n for call in gemini_emails(sandbox) for n in call}
    in_flight = asked_before - handled_at_kill  # answers paid for (or on their way) that died with the process
    assert_ledger_and_tasks_agree(mail)

    assert extraction_runs_reap() == (1, 0)
    dead = ExtractionRun.objects.latest("created_at")
    sandbox.set_gemini_latency(0)
    extraction_run_job.apply(args=[dead.pk])
    dead.refresh_from_db()

    assert dead.status == ExtractionRun.Status.SUCCEEDED, dead.error_message
    assert ProcessedEmail.objects.count() == 50
    assert_ledger_and_tasks_agree(mail)
    assert Task.objects.count() == len(mail.asking)
    assert gmail.cursor == gmail.history_id()
    sent = Counter(n for call in gemini_emails(sandbox) for n in call)
    resent = {n for n, times in sent.items() if times > 1}
    assert resent <= in_flight  # only what was in flight at the kill is asked again...
    assert len(in_flight) <= 3 * 10  # ...at most the calls in flight: EXTRACTION_LLM_CONCURRENCY batches
    assert max(sent.values()) <= 2


# Inbox and Sent together --------------------------------------------------------------------------------
# One Gmail mailbox read under both purposes in one run: its inbox's 12 emails first, then 8 it sent, then the
# person's replies delivering the asks of emails 500 and 501 (read in time order). Batch 1 is ten inbox emails,
# batch 2 the inbox's last two with the 8 sent (both purposes in one transaction), batch 3 the two replies,
# which close the two tasks batch 1 made: each close with its history row, in the batch's transaction.
INBOX_MAIL = [(500 + n, n % 3 != 2) for n in range(12)]
SENT_MAIL = [600 + n for n in range(8)]
BOTH_CASES = [
    pytest.param(Case("fetch", 1), id="fetch-inbox"),
    pytest.param(Case("fetch", 2), id="fetch-sent"),
    pytest.param(Case("llm_call", 1, spent_twice=True), id="llm_call-inbox"),
    pytest.param(Case("llm_call", 2, handled_at_kill=10, spent_twice=True), id="llm_call-both"),
    pytest.param(Case("batch_tx", 1, spent_twice=True), id="batch_tx-inbox"),
    pytest.param(Case("batch_tx", 2, handled_at_kill=10, spent_twice=True), id="batch_tx-both"),
    pytest.param(Case("after_batch", 1, handled_at_kill=10), id="after_batch-inbox"),
    pytest.param(Case("after_batch", 2, handled_at_kill=20), id="after_batch-both"),
    pytest.param(Case("batch_tx", 3, handled_at_kill=20, spent_twice=True), id="batch_tx-replies"),
    pytest.param(Case("after_batch", 3, handled_at_kill=22), id="after_batch-replies"),
    pytest.param(Case("cursor_tx", handled_at_kill=22), id="cursor_tx"),
    pytest.param(Case("cursor_tx", handled_at_kill=22, again=True), id="cursor_tx-twice"),
    pytest.param(Case("after_commit", handled_at_kill=22), id="after_commit"),
]


DELIVERED = [500, 501]


def assert_every_close_once_with_its_history() -> None:
    """No task is closed without its history row, none twice: the close and its row are one write."""
    closes = Counter(TaskEvent.objects.filter(action=TaskEvent.Action.CLOSED).values_list("task_id", flat=True))
    assert set(closes) == set(Task.objects.filter(status=Task.Status.DONE).values_list("pk", flat=True))
    assert all(times == 1 for times in closes.values())


def assert_every_row_once_with_its_tasks() -> None:
    """Each (mailbox, purpose, email) is in the ledger once, and an email's tasks exist exactly when its row
    says it has some: a batch's rows and tasks, of either purpose, were written together or not at all."""
    rows = list(ProcessedEmail.objects.values_list("integration_id", "purpose", "message_id", "tasks_created"))
    assert len(rows) == len({row[:3] for row in rows})
    tasks = Counter(Task.objects.values_list("source_id", flat=True))
    created = Counter[str]()
    for _, _, message_id, count in rows:
        created[message_id] += count
    assert {i: n for i, n in created.items() if n} == dict(tasks)


def killed_then_taken_up(
    case: Case,
    *,
    user: User,
    forker: Forker,
    sandbox: SandboxClient,
    broker_queue: Callable[[], int],
    cursors: Callable[[], tuple[str | None, ...]],
) -> set[int]:
    """A run of a mailbox's Inbox and Sent mail killed at `case`'s point, then taken up with no person involved
    (the reaper, a worker; killed once more first when `case.again`): the batches written whole when it dies,
    each close with its history row, and its `cursors` never ahead of handled mail. Returns the numbers of the
    batch whose Gemini answer died with the process (asked again: `case.spent_twice`)."""
    before = cursors()
    killed = forker.extract(user.email, crash_point=f"{case.point}:{case.nth}")
    assert killed.returncode == KILLED, killed.stdout
    dead = ExtractionRun.objects.latest("created_at")
    lost_batch = gemini_emails(sandbox)[-1] if case.spent_twice else set()
    assert ProcessedEmail.objects.count() == case.handled_at_kill
    assert_every_row_once_with_its_tasks()
    assert_every_close_once_with_its_history()
    if case.point == "after_commit":
        assert dead.status == ExtractionRun.Status.SUCCEEDED
        assert extraction_runs_reap() == (0, 0)
    else:
        assert dead.status == ExtractionRun.Status.RUNNING
        assert cursors() == before  # neither cursor ahead of handled mail
        assert extraction_runs_reap() == (1, 0)
        assert broker_queue() == 1
        if case.again:
            assert forker.job(dead.pk, crash_point=case.point).returncode == KILLED
            assert cursors() == before
            assert extraction_runs_reap() == (1, 0)
        extraction_run_job.apply(args=[dead.pk])
        dead.refresh_from_db()
        assert dead.status == ExtractionRun.Status.SUCCEEDED, dead.error_message
    return lost_batch


@pytest.mark.parametrize("case", BOTH_CASES)
def test_a_run_reading_inbox_and_sent_killed_anywhere_moves_neither_cursor_ahead_and_loses_nothing(
    case: Case,
    gmail: GmailBox,
    sandbox: SandboxClient,
    consenting_user: User,
    forker: Forker,
    broker_queue: Callable[[], int],
) -> None:
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # both cursors at a position
    mail = Mail()
    mail.deliver(gmail, INBOX_MAIL)
    sent = {
        str(
            sandbox.send_gmail(
                gmail.address, to=["sam@example.org"], subject=f"Project {n}", body=f"I'll send project {n} soon."
            )["id"]
        ): n
        for n in SENT_MAIL
    }
    by_number = {n: message_id for message_id, n in mail.gmail.items()}
    replies = {
        str(
            sandbox.send_gmail(
                gmail.address,
                to=["alex@example.com"],
                subject="The report",  # no number: the reply is told apart from the emails counted by number
                in_reply_to=by_number[n],
                body="Here is the report you asked for.",
            )["id"]
        ): by_number[n]
        for n in DELIVERED
    }
    before = (gmail.cursor, gmail.sent_cursor)
    assert before[1] and before[1].startswith("sent:")
    sandbox.clear_requests()

    lost_batch = killed_then_taken_up(
        case, user=consenting_user, forker=forker, sandbox=sandbox, broker_queue=broker_queue,
        cursors=lambda: (gmail.cursor, gmail.sent_cursor),
    )  # fmt: skip

    # Every email handled once under its purpose, no duplicate, both cursors where the mail is --------------
    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.RUNNING).exists()
    inbox_rows = set(ProcessedEmail.objects.filter(purpose="task_extraction").values_list("message_id", flat=True))
    sent_rows = set(ProcessedEmail.objects.filter(purpose="sent_mail").values_list("message_id", flat=True))
    assert (inbox_rows, sent_rows) == (set(mail.gmail), {*sent, *replies})
    assert_every_row_once_with_its_tasks()
    assert_every_close_once_with_its_history()
    closed = Task.objects.filter(status=Task.Status.DONE)
    assert set(closed.values_list("source_id", flat=True)) == set(replies.values())  # each delivered ask, once
    assert set(TaskEvent.objects.values_list("message_id", flat=True)) == set(replies)
    assert set(mail.asking) <= set(Task.objects.values_list("source_id", flat=True))
    assert not Task.objects.values("user", "source", "source_id", "title_key").annotate(n=Count("id")).filter(n__gt=1)
    assert gmail.cursor == gmail.history_id() and gmail.sent_cursor == f"sent:{gmail.history_id()}"
    sent_counts = Counter(n for call in gemini_emails(sandbox) for n in call)
    assert set(sent_counts) == {*mail.gmail.values(), *sent.values()}
    assert {n for n, times in sent_counts.items() if times > 1} <= lost_batch
    assert max(sent_counts.values()) <= 2

    # A clean rerun finds nothing to do and moves nothing ---------------------------------------------------
    fresh = run_extraction(consenting_user)
    assert fresh.status == ExtractionRun.Status.SUCCEEDED, fresh.error_message
    assert (fresh.emails_fetched, fresh.llm_calls) == (0, 0)
    assert gmail.cursor == gmail.history_id() and gmail.sent_cursor == f"sent:{gmail.history_id()}"
