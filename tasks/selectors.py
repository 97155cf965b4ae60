from __future__ import annotations

from collections.abc import Collection
from datetime import date

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet
from django.db.models.functions import TruncDate

from accounts.models import User
from config.errors import NotFoundError
from config.pagination import Keyset, KeysetPage, SortKey, keyset_page
from tasks.models import ADMIN_SEARCH_CONFIG, ADMIN_SEARCH_FIELDS, Task, TaskEvent, TaskLink, TaskListVersion
from tasks.services import db_text
from tasks.snooze import person_today

# The orders of the list (each served by an index of tasks/models.py, after user and status): open tasks
# by due date (soonest first), then those without one by their email's received time (newest first);
# done and dismissed ones by when they were closed.
OPEN_ORDER = Keyset(
    Task,
    (
        SortKey("due_date", nullable=True),
        SortKey("email_received_at", descending=True, nullable=True),
        SortKey("created_at", descending=True),
        SortKey("id", descending=True),
    ),
)
CLOSED_ORDER = Keyset(Task, (SortKey("updated_at", descending=True), SortKey("id", descending=True)))


def task_list_order(*, status: str | None) -> Keyset[Task]:
    return CLOSED_ORDER if status and status != Task.Status.OPEN else OPEN_ORDER


def task_list(
    *,
    user: User,
    status: str | None = Task.Status.OPEN,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
    kinds: Collection[str] = (),
) -> QuerySet[Task]:
    """The person's tasks in the order that matters (`task_list_order`). `query` searches the title, notes,
    sender and subject; `kinds` keeps those items (`Task.Kind`), none of them every kind."""
    tasks = _filtered(user=user, status=status, query=query, integration_id=integration_id, source=source, kinds=kinds)
    return tasks.order_by(*task_list_order(status=status).order_by())


def task_page(
    *,
    user: User,
    status: str = Task.Status.OPEN,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
    kinds: Collection[str] = (),
    size: int,
    after: str = "",
    up_to: str = "",
    up_to_limit: int = 0,
    earlier: bool | None = None,
) -> KeysetPage[Task]:
    """A page of `task_list`: `size` tasks after the cursor `after` (from the first without it); or, for a
    list that loaded several pages and shows them again, every task as far as the cursor `up_to` (at most
    `up_to_limit`). Raises InvalidCursor for a cursor that is not one. `earlier=False` leaves out the tasks
    `task_earlier` lists (the page shows them apart)."""
    tasks = _with_earlier(
        _filtered(user=user, status=status, query=query, integration_id=integration_id, source=source, kinds=kinds),
        earlier,
    )
    keyset = task_list_order(status=status)
    return keyset_page(tasks, keyset, size=size, after=after, up_to=up_to, up_to_limit=up_to_limit)


def task_due_counts(
    *,
    user: User,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
    kinds: Collection[str] = (),
    today: date,
    earlier: bool | None = None,
) -> dict[str, int]:
    """How many open tasks are overdue, due today, upcoming and without a date (one statement), for the
    headings of a list that shows only its first page (`earlier` as for `task_page`)."""
    tasks = _with_earlier(
        _filtered(
            user=user, status=Task.Status.OPEN, query=query, integration_id=integration_id, source=source, kinds=kinds
        ),
        earlier,
    )
    return tasks.aggregate(
        overdue=Count("pk", filter=Q(due_date__lt=today)),
        today=Count("pk", filter=Q(due_date=today)),
        upcoming=Count("pk", filter=Q(due_date__gt=today)),
        no_date=Count("pk", filter=Q(due_date__isnull=True)),
    )


def task_count(
    *,
    user: User,
    status: str,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
    kinds: Collection[str] = (),
) -> int:
    return _filtered(
        user=user, status=status, query=query, integration_id=integration_id, source=source, kinds=kinds
    ).count()


def _filtered(
    *, user: User, status: str | None, query: str, integration_id: int | None, source: str, kinds: Collection[str]
) -> QuerySet[Task]:
    # Each task shows its mailboxes (its links, with theirs) and its history: one query each for the whole page.
    links = Prefetch("links", queryset=TaskLink.objects.select_related("integration"))
    tasks = Task.objects.filter(user=user).select_related("integration", "reminder").prefetch_related(links, "events")
    if status:
        tasks = tasks.filter(status=status)
    if kinds:
        tasks = tasks.filter(kind=next(iter(kinds))) if len(kinds) == 1 else tasks.filter(kind__in=sorted(kinds))
    if status == Task.Status.OPEN:  # a snoozed task is back on the morning of its date (tasks/snooze.py)
        tasks = tasks.exclude(snoozed_until__gt=person_today(user=user))
    if query.strip():
        words = db_text(query.strip())[:200]  # PostgreSQL refuses NUL characters
        tasks = tasks.filter(
            Q(title__icontains=words)
            | Q(notes__icontains=words)
            | Q(email_sender__icontains=words)
            | Q(email_subject__icontains=words)
        )
    if integration_id is not None:
        # EXISTS, not a join: a task is listed once, and the list's index order still serves the page.
        tasks = tasks.filter(Exists(TaskLink.objects.filter(task=OuterRef("pk"), integration_id=integration_id)))
    if source:
        tasks = tasks.filter(source=source)
    return tasks


# From before the mailbox was connected ------------------------------------------------------------------


def _earlier_q() -> Q:
    """Tasks from mail its mailbox received before it was connected and that were past due by then (the
    connect-time read of recent mail finds last week's asks). On the day of the connection in the person's
    time zone (activated per request)."""
    return Q(
        integration__isnull=False,
        email_received_at__lt=F("integration__created_at"),
        due_date__lt=TruncDate("integration__created_at"),
    )


def _with_earlier(tasks: QuerySet[Task], earlier: bool | None) -> QuerySet[Task]:
    if earlier is None:
        return tasks
    if earlier:
        return tasks.filter(_earlier_q())
    # The negation written out, row by row (no subquery over everyone's tasks): a task without a mailbox, a
    # received time or a due date is not an earlier one (`exclude(Q)` would make those NULL and leave them out).
    return tasks.filter(
        Q(integration__isnull=True)
        | Q(email_received_at__isnull=True)
        | Q(due_date__isnull=True)
        | Q(email_received_at__gte=F("integration__created_at"))
        | Q(due_date__gte=TruncDate("integration__created_at"))
    )


def _earlier(
    *, user: User, query: str, integration_id: int | None, source: str, kinds: Collection[str]
) -> QuerySet[Task]:
    return _with_earlier(
        _filtered(
            user=user, status=Task.Status.OPEN, query=query, integration_id=integration_id, source=source, kinds=kinds
        ),
        True,
    )


def task_earlier(
    *,
    user: User,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
    kinds: Collection[str] = (),
    limit: int,
) -> tuple[list[Task], int]:
    """The person's open tasks from before their mailbox was connected that were past due then (`_earlier_q`),
    in the list's order, at most `limit`, and how many there are."""
    tasks = _earlier(user=user, query=query, integration_id=integration_id, source=source, kinds=kinds)
    rows = list(tasks.order_by(*OPEN_ORDER.order_by())[:limit])
    return rows, len(rows) if len(rows) < limit else tasks.count()


def task_earlier_count(
    *, user: User, query: str = "", integration_id: int | None = None, source: str = "", kinds: Collection[str] = ()
) -> int:
    """How many tasks `task_earlier` has, in one count (the collapsed group shows this, not its rows)."""
    return _earlier(user=user, query=query, integration_id=integration_id, source=source, kinds=kinds).count()


def task_get(*, user: User, task_id: int) -> Task:
    """One of the person's tasks; another person's task is simply not found."""
    task = Task.objects.filter(user=user, pk=task_id).first()
    if task is None:
        raise NotFoundError("There is no such task.", code="task_not_found")
    return task


def task_history(*, task: Task) -> list[TaskEvent]:
    """The task's history, oldest first (prefetched by the list's selectors: no query of its own there)."""
    return list(task.events.all())


def task_closing_event(*, task: Task) -> TaskEvent | None:
    """The email that closed this task, when that is what closed it last: its newest history row is an
    email's `closed`, not undone. None for a task open, or closed by hand (a close by hand writes no row, and
    a reopen by hand does, so an older email's close is not the last word)."""
    if task.status == Task.Status.OPEN:
        return None
    history = task_history(task=task)
    last = history[-1] if history else None
    if last and last.action == TaskEvent.Action.CLOSED and last.by == TaskEvent.By.EMAIL and last.undone_at is None:
        return last
    return None


def task_pending_suggestion(*, task: Task) -> TaskEvent | None:
    """What an email would have done to this open task the person changed by hand, not answered yet: the
    newest `suggested` row not set aside, with no change of the person's after it."""
    if task.status != Task.Status.OPEN:
        return None
    for event in reversed(task_history(task=task)):
        if event.by == TaskEvent.By.PERSON:
            return None
        if event.action == TaskEvent.Action.SUGGESTED:
            return event if event.undone_at is None else None
    return None


def task_list_version(*, user: User) -> str:
    """A short token that changes with every change to the person's tasks, once it is committed, whoever
    made it (the count `TaskListVersion` keeps). One read by its primary key: none of the tasks is read."""
    version = TaskListVersion.objects.filter(user=user).values_list("version", flat=True).first()
    return str(version or 0)


# The admin's search ---------------------------------------------------------------------------------

MAX_SEARCH_TERMS = 10


def task_admin_search(*, tasks: QuerySet[Task], text: str) -> QuerySet[Task]:
    """The tasks an operator's search finds, each term through an index: a word of the title, subject or
    sender, or the beginning of one (the words index); a person's email address; a provider message id.
    Every term must match (as in Django's own admin search). The people are looked up first, so that
    each term is an OR of index scans and never a scan of the table."""
    terms = [db_text(term)[:200] for term in text.split()[:MAX_SEARCH_TERMS]]
    addresses = [term.lower() for term in terms if "@" in term]
    people = dict(User.objects.filter(email__in=addresses).values_list("email", "pk")) if addresses else {}
    # The very expression of the words index (tasks/models.py), so that PostgreSQL uses it.
    tasks = tasks.alias(admin_words=SearchVector(*ADMIN_SEARCH_FIELDS, config=ADMIN_SEARCH_CONFIG))
    for term in terms:
        words = SearchQuery(_prefix_query(term), search_type="raw", config=ADMIN_SEARCH_CONFIG)
        person = [people[term.lower()]] if term.lower() in people else []
        # The cheap tests first: PostgreSQL evaluates an OR in order and stops at the first true one, so a
        # person's tasks are counted without reading their words.
        tasks = tasks.filter(Q(user_id__in=person) | Q(source_id=term) | Q(admin_words=words))
    return tasks


def _prefix_query(term: str) -> str:
    """`term` as a tsquery of words beginning so: quoted, so no character of it is tsquery syntax."""
    quoted = term.replace("\\", "\\\\").replace("'", "''")
    return f"'{quoted}':*"


def task_open_in_conversations(*, user_id: int, keys: Collection[str]) -> QuerySet[Task]:
    """The person's open tasks of these conversations (`Task.conversation_key`), through the index on
    (user, conversation key, status): what a batch needs of the conversations its mail belongs to, at a cost
    that follows those conversations, not the person's list. The empty key (tasks added by hand) is never one."""
    wanted = sorted({key for key in keys if key})
    return Task.objects.filter(user_id=user_id, conversation_key__in=wanted, status=Task.Status.OPEN).exclude(
        conversation_key=""
    )
