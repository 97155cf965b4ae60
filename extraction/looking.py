"""What the run line sums up: every run that finished since the person last opened their task list, whatever
started it (the schedule, a push, the button, the API), so that a run that found nothing because another took
the mail a second before never hides that other's tasks, nor an email it set aside.

"Since they last looked" is kept on the person (`User.runs_seen_at`), so it holds across devices and logins,
and the start of the window is kept in the session for the page that opened it: the run line that page polls
keeps summing from there until the person opens the list again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Q, QuerySet, Sum
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.muting import MUTED_PREFIX
from tasks.models import TaskEvent

SESSION_KEY = "runs_since"

# How a run's start reads in the line ("2 reads: scheduled and Extract now"); a continuation is the same read.
TRIGGER_WORDS = {
    ExtractionRun.Trigger.SCHEDULE: "scheduled",
    ExtractionRun.Trigger.WEBHOOK: "push",
    ExtractionRun.Trigger.MANUAL: "Extract now",
    ExtractionRun.Trigger.API: "the API",
    ExtractionRun.Trigger.ADMIN: "an admin",
}


@dataclass(frozen=True)
class RunsSince:
    """The runs finished since the person last looked, added up."""

    since: datetime | None  # None: they had never looked
    runs: int
    started_by: list[str]  # TRIGGER_WORDS, in a fixed order
    fetched: int
    read: int
    created: int
    set_aside: int
    skipped: int
    ungrounded: int
    muted: int = 0  # of the skipped, mail of senders the person muted


def runs_looked_at(*, request: HttpRequest, user: User) -> None:
    """The person opens their task list: its run line sums from where they last looked, and the next look
    starts from now."""
    request.session[SESSION_KEY] = user.runs_seen_at.isoformat() if user.runs_seen_at else ""
    User.objects.filter(pk=user.pk).update(runs_seen_at=timezone.now())


def runs_since(*, request: HttpRequest, user: User) -> RunsSince:
    """The sum of the person's runs finished since the start of this page's window (one query)."""
    since = parse_datetime(request.session.get(SESSION_KEY) or "")
    runs = ExtractionRun.objects.filter(user=user, finished_at__isnull=False)
    if since is not None:
        runs = runs.filter(finished_at__gt=since)
    totals = runs.aggregate(
        runs=Count("pk"),
        # A continuation carries on the read that started it and is not a read of its own.
        reads=Count("pk", filter=~Q(trigger=ExtractionRun.Trigger.CONTINUATION)),
        triggers=ArrayAgg("trigger", distinct=True, default=[]),
        fetched=Sum("emails_fetched", default=0),
        read=Sum("emails_sent_to_llm", default=0),
        created=Sum("tasks_created", default=0),
        set_aside=Sum("emails_quarantined", default=0),
        skipped=Sum("emails_skipped", default=0),
        ungrounded=Sum("tasks_ungrounded", default=0),
    )
    triggers = set(totals.pop("triggers"))
    words = [word for trigger, word in TRIGGER_WORDS.items() if trigger in triggers]
    finished, reads = totals.pop("runs"), totals.pop("reads")
    muted = 0
    if totals["skipped"]:  # a second query only when something was skipped
        muted = ProcessedEmail.objects.filter(run__in=runs, last_error__startswith=MUTED_PREFIX).count()
    return RunsSince(since=since, runs=max(reads, 1) if finished else 0, started_by=words, muted=muted, **totals)


# How many of the changes since the person last looked the run line names one by one (with Undo each); the
# others are counted, and each is in its task's history in the Done view.
CHANGES_NAMED = 3


@dataclass(frozen=True)
class RunChanges:
    """What runs did to existing items since the person last looked: no change is made in silence."""

    closed_by_replies: int  # closed by the person's own reply (their Sent mail)
    closed_by_others: int  # closed by someone else's email
    moved: int  # a due date changed
    named: list[TaskEvent]  # the newest CHANGES_NAMED of them, each with its task

    @property
    def total(self) -> int:
        return self.closed_by_replies + self.closed_by_others + self.moved


def run_changes_since(*, request: HttpRequest, user: User) -> RunChanges:
    """The items that runs finished since the start of this page's window closed or re-dated and that are not
    undone (two queries: the counts, and the few named)."""
    since = parse_datetime(request.session.get(SESSION_KEY) or "")
    events = _changes(task__user=user, run__finished_at__isnull=False)
    if since is not None:
        events = events.filter(run__finished_at__gt=since)
    return _changes_counted(events)


def run_changes_of(*, run: ExtractionRun) -> RunChanges:
    """What one run closed or re-dated and is not undone: the notice its end leaves above the list."""
    return _changes_counted(_changes(run=run))


def _changes(**where: object) -> QuerySet[TaskEvent]:
    return TaskEvent.objects.filter(
        by=TaskEvent.By.EMAIL,
        action__in=(TaskEvent.Action.CLOSED, TaskEvent.Action.UPDATED),
        undone_at__isnull=True,
        **where,
    )


def _changes_counted(events: QuerySet[TaskEvent]) -> RunChanges:
    closed = Q(action=TaskEvent.Action.CLOSED)
    counts = events.aggregate(
        replies=Count("pk", filter=closed & Q(email_folder="sent")),
        others=Count("pk", filter=closed & ~Q(email_folder="sent")),
        moved=Count("pk", filter=Q(action=TaskEvent.Action.UPDATED)),
    )
    named = list(events.select_related("task").order_by("-at", "-pk")[:CHANGES_NAMED]) if any(counts.values()) else []
    return RunChanges(
        closed_by_replies=counts["replies"], closed_by_others=counts["others"], moved=counts["moved"], named=named
    )
