from __future__ import annotations

import re
import unicodedata
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from config.errors import ApplicationError, NotFoundError
from integrations.mail.text import without_format_characters
from tasks.models import Task, TaskEvent, TaskLink
from tasks.repeat import repeat_check, repeat_first, repeat_next

MAX_TITLE_CHARS = 300
MAX_NOTES_CHARS = 5000
EARLIEST_DUE_DATE = date(2000, 1, 1)
DUE_DATE_YEARS_AHEAD = 10


def due_date_in_range(value: date) -> bool:
    """A due date a person could mean: from 2000 to ten years from now (an LLM's or a typo's 1900 is not)."""
    today = timezone.now().date()
    return EARLIEST_DUE_DATE <= value <= today.replace(year=today.year + DUE_DATE_YEARS_AHEAD, day=min(today.day, 28))


def db_text(value: str) -> str:
    """Text as PostgreSQL can store it: it refuses NUL characters, which mail and LLM answers may hold."""
    return value.replace("\x00", "")


def shown_text(value: str) -> str:
    """Text from mail or an LLM as a person will see it: storable, and without format characters (an
    invisible title, a sender reversed by U+202E)."""
    return without_format_characters(value)


def task_title_key(title: str) -> str:
    """The normalised title a task is unique on: case, spacing, and end punctuation do not count."""
    text = unicodedata.normalize("NFKC", title).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" .!?;:,-\u2013\u2014\"'`\u201c\u201d\u2018\u2019")[:MAX_TITLE_CHARS]


@dataclass(frozen=True)
class EmailTaskRow:
    """A task the LLM found in an email, already validated and mapped back to the real message id."""

    user_id: int
    integration_id: int
    message_id: str
    email_key: str  # the Message-ID ("" when the email has none)
    title: str
    due_date: date | None
    priority: str
    email_link: str
    email_sender: str
    email_subject: str
    email_received_at: datetime
    run_id: int | None
    sentence: str = ""  # the email's words the task comes from (extraction.grounding)
    conversation_key: str = ""  # the email's conversation (Email.conversation_key)
    kind: str = Task.Kind.ASK  # asked of the person, promised by them, or what they wait for
    waiting_on: str = ""  # a waiting item's recipient ("Name <address>")
    participants: str = ""  # the email's From, To and Cc addresses (Task.participants)
    due_time: time | None = None  # the time the email states, with its due date


def task_insert_from_emails(*, rows: list[EmailTaskRow], kinds: Counter[str] | None = None) -> int:
    """Insert tasks found in emails, ON CONFLICT DO NOTHING, and link each to the mailbox its email came
    through. Returns how many tasks are new.

    A task is unique on its email in its mailbox (user, source, source id, title key), and on its email
    whatever the mailbox (user, Message-ID, title key): the same message reaching Gmail and Outlook gives
    one task, with a link to each. Two statements whatever the number of rows, so a batch's query count
    is constant. `kinds`, when given, counts the new tasks by kind.
    """
    created = _task_insert(rows, kinds if kinds is not None else Counter())
    _task_link(rows)
    return created


_SENTENCE_MAX = Task._meta.get_field("sentence").max_length or 0


_PARTICIPANTS_MAX = 20_000  # addresses of an email's headers, bounded (conversation.MAX_RECIPIENTS each)


def _task_insert(rows: list[EmailTaskRow], kinds: Counter[str]) -> int:
    now = timezone.now()
    columns = {
        "user_id": ("bigint", [r.user_id for r in rows]),
        "source_id": ("text", [db_text(r.message_id) for r in rows]),
        "email_key": ("text", [db_text(r.email_key) for r in rows]),
        "integration_id": ("bigint", [r.integration_id for r in rows]),
        "title": ("text", [shown_text(r.title)[:MAX_TITLE_CHARS] for r in rows]),
        "title_key": ("text", [task_title_key(shown_text(r.title)) for r in rows]),
        "due_date": ("date", [r.due_date for r in rows]),
        "due_time": ("time", [r.due_time for r in rows]),
        "priority": ("text", [r.priority for r in rows]),
        "email_link": ("text", [db_text(r.email_link)[:1000] for r in rows]),
        "email_sender": ("text", [shown_text(r.email_sender)[:500] for r in rows]),
        "email_subject": ("text", [shown_text(r.email_subject)[:1000] for r in rows]),
        "email_received_at": ("timestamptz", [r.email_received_at for r in rows]),
        "run_id": ("bigint", [r.run_id for r in rows]),
        "sentence": ("text", [db_text(shown_text(r.sentence))[:_SENTENCE_MAX] for r in rows]),
        "conversation_key": ("text", [db_text(r.conversation_key)[:512] for r in rows]),
        "kind": ("text", [r.kind for r in rows]),
        "waiting_on": ("text", [shown_text(r.waiting_on)[:500] for r in rows]),
        "participants": ("text", [db_text(r.participants)[:_PARTICIPANTS_MAX] for r in rows]),
    }
    names = ", ".join(columns)
    unnest = ", ".join(f"%s::{kind}[]" for kind, _ in columns.values())
    sql = (
        f"INSERT INTO {Task._meta.db_table} ({names}, source, notes, status, created_at, updated_at) "  # noqa: S608
        f"SELECT {names}, %s, '', %s, %s, %s FROM unnest({unnest}) AS t({names}) "
        "ON CONFLICT DO NOTHING "  # either uniqueness: this email in this mailbox, or this message anywhere
        "RETURNING kind"
    )
    params: list[Any] = [Task.Source.EMAIL_AI, Task.Status.OPEN, now, now] + [values for _, values in columns.values()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        created = [kind for (kind,) in cursor.fetchall()]
    kinds.update(created)
    return len(created)


def _task_link(rows: list[EmailTaskRow]) -> None:
    """Link every row's task (new, or the one the same message made through another mailbox) to the
    mailbox of the row.

    A task is the row's by either of its unique keys (its email in this mailbox; its message through any
    mailbox): one join for each, each finding its task by that key through an index, where one join on an
    OR of the two could use neither and read every task there is. The rows are given once (`r`), read by
    both. The second join says the partial index's condition in constants (the source, a Message-ID not
    empty), so the planner knows the index holds every task it may find."""
    sql = (
        f"WITH r AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], "  # noqa: S608
        "%s::text[]) AS r(user_id, integration_id, message_id, email_key, title_key, web_link)) "
        f"INSERT INTO {TaskLink._meta.db_table} (task_id, integration_id, message_id, web_link, created_at) "
        "SELECT DISTINCT ON (m.task_id, m.integration_id) m.task_id, m.integration_id, m.message_id, m.web_link, %s "
        f"FROM (SELECT t.id AS task_id, r.integration_id, r.message_id, r.web_link FROM r JOIN {Task._meta.db_table} t "
        f"ON t.user_id = r.user_id AND t.source = '{Task.Source.EMAIL_AI}' AND t.source_id = r.message_id "
        "AND t.title_key = r.title_key AND t.integration_id = r.integration_id "
        f"UNION ALL SELECT t.id, r.integration_id, r.message_id, r.web_link FROM r JOIN {Task._meta.db_table} t "
        f"ON t.user_id = r.user_id AND t.source = '{Task.Source.EMAIL_AI}' AND t.email_key = r.email_key "
        "AND t.email_key <> '' AND t.title_key = r.title_key) AS m "
        "ON CONFLICT (task_id, integration_id) DO NOTHING"
    )
    params: list[Any] = [
        [r.user_id for r in rows],
        [r.integration_id for r in rows],
        [db_text(r.message_id) for r in rows],
        [db_text(r.email_key) for r in rows],
        [task_title_key(shown_text(r.title)) for r in rows],
        [db_text(r.email_link)[:1000] for r in rows],
        timezone.now(),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@dataclass(frozen=True)
class EmailCopy:
    """An email whose Message-ID was already read through another mailbox of the person."""

    user_id: int
    integration_id: int
    message_id: str
    email_key: str
    email_link: str


def task_link_copies(*, copies: list[EmailCopy]) -> None:
    """Link the tasks of each copy's email (made through another mailbox) to the copy's mailbox too. One
    statement whatever the number of copies (none included), so a batch's query count stays constant.

    The tasks are looked up through the partial index on the Message-ID, not among all the person's: the
    join says the index's condition in constants (the source, a Message-ID not empty, which a copy's always
    is), so the planner knows the index holds every task it may find."""
    sql = (
        f"INSERT INTO {TaskLink._meta.db_table} (task_id, integration_id, message_id, web_link, created_at) "  # noqa: S608
        f"SELECT DISTINCT ON (t.id, c.integration_id) t.id, c.integration_id, c.message_id, c.web_link, %s "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[]) "
        "AS c(user_id, integration_id, message_id, email_key, web_link) "
        f"JOIN {Task._meta.db_table} t ON t.user_id = c.user_id AND t.source = '{Task.Source.EMAIL_AI}' "
        "AND t.email_key = c.email_key AND t.email_key <> '' "
        "ON CONFLICT (task_id, integration_id) DO NOTHING"
    )
    params: list[Any] = [
        timezone.now(),
        [c.user_id for c in copies],
        [c.integration_id for c in copies],
        [db_text(c.message_id) for c in copies],
        [db_text(c.email_key) for c in copies],
        [db_text(c.email_link)[:1000] for c in copies],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _clean_title(title: str) -> str:
    title = " ".join(shown_text(title).split())
    if not title:
        raise ApplicationError("A task needs a title.", code="invalid_title", extra={"field": "title"})
    if len(title) > MAX_TITLE_CHARS:
        raise ApplicationError(
            f"A title can have at most {MAX_TITLE_CHARS} characters.", code="invalid_title", extra={"field": "title"}
        )
    return title


def _check_due_date(due_date: date | None) -> None:
    if due_date is not None and not due_date_in_range(due_date):
        raise ApplicationError(
            f"A due date must be between {EARLIEST_DUE_DATE:%Y} and {DUE_DATE_YEARS_AHEAD} years from now.",
            code="invalid_due_date",
            extra={"field": "due_date"},
        )


def _check_priority(priority: str) -> None:
    if priority and priority not in Task.Priority.values:
        raise ApplicationError(
            "Priority must be low, medium or high.", code="invalid_priority", extra={"field": "priority"}
        )


def _check_notes(notes: str) -> str:
    notes = db_text(notes)
    if len(notes) > MAX_NOTES_CHARS:
        raise ApplicationError(
            f"Notes can have at most {MAX_NOTES_CHARS} characters.", code="invalid_notes", extra={"field": "notes"}
        )
    return notes


def _check_due_time(due_date: date | None, due_time: time | None) -> None:
    if due_time is not None and due_date is None:
        raise ApplicationError(
            "A time needs a due date: choose the day too.", code="invalid_due_time", extra={"field": "due_time"}
        )


def task_create(
    *,
    user: User,
    title: str,
    notes: str = "",
    due_date: date | None = None,
    due_time: time | None = None,
    priority: str = "",
    repeat: str = "",
    reminder: int | None = None,
) -> Task:
    """A task added by hand; a repeating one without a due date is due on the rule's first day from today;
    `reminder`: minutes before its time (reminders/ring.py)."""
    title = _clean_title(title)
    notes = _check_notes(notes)
    _check_due_date(due_date)
    repeat, due_date = _check_repeat(user, repeat, due_date)
    _check_due_time(due_date, due_time)
    _check_priority(priority)
    with transaction.atomic():
        task = _task_create(user, title, notes, due_date, due_time, priority, repeat)
        if reminder is not None:
            _reminder_set(task, reminder)
    return task


def _reminder_set(task: Task, minutes_before: int | None) -> None:
    from reminders.ring import reminder_set  # it imports this module

    reminder_set(task=task, minutes_before=minutes_before)


def _task_create(
    user: User, title: str, notes: str, due_date: date | None, due_time: time | None, priority: str, repeat: str
) -> Task:
    return Task.objects.create(
        user=user,
        source=Task.Source.MANUAL,
        source_id=uuid.uuid4().hex,
        title=title,
        title_key=task_title_key(title),
        notes=notes,
        due_date=due_date,
        due_time=due_time,
        priority=priority,
        repeat_rule=repeat,
    )


def _check_repeat(user: User, repeat: str, due_date: date | None) -> tuple[str, date | None]:
    """The rule as kept, and the due date: the one given, or the rule's first day from the person's today."""
    from tasks.snooze import person_today  # it imports this module

    today = person_today(user=user)
    repeat = repeat_check(repeat, start=due_date or today)
    if repeat and due_date is None:
        due_date = repeat_first(repeat, today=today)
    return repeat, due_date


def repeat_next_make(tasks: list[Task], *, today: date) -> None:
    """The next of each repeating task just done (Done by the person, or closed by an email): a task by hand due
    on the rule's next day, with the same title, notes, time, priority and rule. Made once per task whatever
    comes twice (a Done sent again, a run replayed): its source id names the task it follows, under that task's
    title key, so the unique constraint refuses a second (ON CONFLICT DO NOTHING)."""
    rows = []
    for task in tasks:
        if not task.repeat_rule or task.due_date is None:
            continue
        day = repeat_next(task.repeat_rule, due=task.due_date, today=today)
        if day is None or not due_date_in_range(day):
            continue  # the rule gives no more
        rows.append(
            Task(
                user_id=task.user_id,
                source=Task.Source.MANUAL,
                source_id=_next_source_id(task.pk),
                title=task.title,
                title_key=task.title_key,
                notes=task.notes,
                due_date=day,
                due_time=task.due_time,
                priority=task.priority,
                repeat_rule=task.repeat_rule,
                kind=task.kind,
                waiting_on=task.waiting_on,
                email_link=task.email_link,
                email_sender=task.email_sender,
                email_subject=task.email_subject,
            )
        )
    Task.objects.bulk_create(rows, ignore_conflicts=True)
    _reminders_carry_on(tasks)


def _reminders_carry_on(tasks: list[Task]) -> None:
    """The next of a repeating task reminds as the one done did (the same time before)."""
    from reminders.models import Reminder
    from reminders.ring import reminder_set

    before = dict(Reminder.objects.filter(task__in=tasks).values_list("task_id", "minutes_before"))
    if not before:
        return
    ids = {_next_source_id(pk): pk for pk in before}
    for following in Task.objects.filter(user_id=tasks[0].user_id, source=Task.Source.MANUAL, source_id__in=ids):
        if not Reminder.objects.filter(task=following).exists():
            reminder_set(task=following, minutes_before=before[ids[following.source_id]])


def _next_source_id(task_id: int) -> str:
    return f"repeat:{task_id}"


def repeat_next_take_back(*, user_id: int, task_ids: list[int]) -> None:
    """The Undo of a Done (or of an email's close) takes back the next one it made, while the person has not
    touched it (still open, never edited); one they have is theirs and stays."""
    Task.objects.filter(
        user_id=user_id,
        source=Task.Source.MANUAL,
        source_id__in=[_next_source_id(pk) for pk in task_ids],
        status=Task.Status.OPEN,
        hand_changed=False,
    ).delete()


_UNSET: Any = object()


def task_update(
    *,
    task: Task,
    title: str = _UNSET,
    notes: str = _UNSET,
    due_date: date | None = _UNSET,
    due_time: time | None = _UNSET,
    priority: str = _UNSET,
    status: str = _UNSET,
    repeat: str = _UNSET,
    reminder: int | None = _UNSET,
) -> Task:
    """Change what the person changed (a field left out is kept). The title key stays the one the task
    was made with, so an AI task the person renamed is still the same task for the next run."""
    fields: list[str] = []
    if title is not _UNSET:
        task.title = _clean_title(title)
        fields.append("title")
    if notes is not _UNSET:
        task.notes = _check_notes(notes)
        fields.append("notes")
    if due_date is not _UNSET:
        _check_due_date(due_date)
        task.due_date = due_date
        fields.append("due_date")
        if due_date is None and due_time is _UNSET:
            due_time = None  # no day, no time of day
    if repeat is not _UNSET:
        task.repeat_rule, task.due_date = _check_repeat(task.user, repeat or "", task.due_date)
        fields.extend(["repeat_rule", "due_date"])
    if due_time is not _UNSET:
        _check_due_time(task.due_date, due_time)
        task.due_time = due_time
        fields.append("due_time")
    if priority is not _UNSET:
        _check_priority(priority or "")
        task.priority = priority or ""
        fields.append("priority")
    if fields:
        # The person's own words and dates: no email changes this task automatically any more.
        task.hand_changed = True
        fields.append("hand_changed")
    with transaction.atomic():
        if status is not _UNSET:
            task = _task_set_status(task=task, status=status, also=fields)
        elif fields:
            task.save(update_fields=[*fields, "updated_at"])
        if reminder is not _UNSET:
            _reminder_set(task, reminder)  # refused for a task without a time: nothing of this edit is kept
        elif {"due_date", "due_time"} & set(fields):
            _reminders_refresh([task.pk])
    return task


def _reminders_refresh(task_ids: list[int]) -> None:
    """When the reminders of these tasks ring, worked out again after their date or time changed."""
    from reminders.ring import reminder_refresh  # it imports this module

    reminder_refresh(task_ids=task_ids)


def task_set_status(*, task: Task, status: str) -> Task:
    return _task_set_status(task=task, status=status, also=[])


def _check_status(status: str, *, field: bool) -> None:
    if status not in Task.Status.values:
        extra = {"field": "status"} if field else None
        raise ApplicationError("Status must be open, done or dismissed.", code="invalid_status", extra=extra)


def _task_set_status(*, task: Task, status: str, also: list[str]) -> Task:
    _check_status(status, field=True)
    reopened = status == Task.Status.OPEN and task.status != Task.Status.OPEN
    before = task.status
    task.status = status
    task.completed_at = timezone.now() if status == Task.Status.DONE else None
    fields = [*also, "status", "completed_at", "updated_at"]
    if reopened and not task.hand_changed:
        task.hand_changed = True
        fields.append("hand_changed")
    with transaction.atomic():
        task.save(update_fields=list(dict.fromkeys(fields)))
        if reopened:
            _record_reopened([task.pk], status_before={task.pk: before})
        if status == Task.Status.DONE and before != Task.Status.DONE:
            from tasks.snooze import person_today  # it imports this module

            repeat_next_make([task], today=person_today(user=task.user))
    return task


def _record_reopened(task_ids: list[int], *, status_before: dict[int, str]) -> None:
    """A `reopened` row in the history of each task the person opened again (by hand: Reopen, or the API)."""
    now = timezone.now()
    TaskEvent.objects.bulk_create(
        TaskEvent(
            task_id=pk,
            action=TaskEvent.Action.REOPENED,
            by=TaskEvent.By.PERSON,
            at=now,
            status_before=status_before.get(pk, ""),
        )
        for pk in task_ids
    )


def task_bulk_set_status(*, user: User, task_ids: list[int], status: str, by_hand: bool = True) -> int:
    """Done, dismiss or reopen many of the person's tasks at once (another person's ids are ignored).

    Reopening is a change by hand (`hand_changed`, a `reopened` row in each task's history), except when it
    is the Undo of the person's own Done or Dismiss a moment ago (`by_hand=False`): that puts back what they
    had, and their task stays one an email may still close."""
    _check_status(status, field=False)
    completed = timezone.now() if status == Task.Status.DONE else None
    tasks = Task.objects.filter(user=user, pk__in=task_ids)
    with transaction.atomic():
        reopening: dict[int, str] = {}
        if status == Task.Status.OPEN and by_hand:
            reopening = dict(tasks.exclude(status=Task.Status.OPEN).select_for_update().values_list("pk", "status"))
        finishing: list[Task] = []
        if status == Task.Status.DONE:  # the repeating ones not done yet make their next (below)
            finishing = list(tasks.exclude(status=Task.Status.DONE).exclude(repeat_rule="").select_for_update())
        undoing_done: list[int] = []
        if status == Task.Status.OPEN and not by_hand:  # the Undo of a Done: the next it made goes again
            undoing_done = list(
                tasks.filter(status=Task.Status.DONE).exclude(repeat_rule="").values_list("pk", flat=True)
            )
        updated = tasks.update(status=status, completed_at=completed, updated_at=timezone.now())
        if reopening:
            Task.objects.filter(pk__in=reopening).update(hand_changed=True)
            _record_reopened(sorted(reopening), status_before=reopening)
        if finishing:
            from tasks.snooze import person_today  # it imports this module

            repeat_next_make(finishing, today=person_today(user=user))
        if undoing_done:
            repeat_next_take_back(user_id=user.pk, task_ids=undoing_done)
    return updated


# Automatic changes, undone; suggestions, taken or set aside ----------------------------------------------

UNDOABLE_ACTIONS = (TaskEvent.Action.CLOSED, TaskEvent.Action.UPDATED)


def task_event_undo_refusal(*, task: Task, event: TaskEvent) -> str:
    """Why this history row cannot be undone now ("" when it can): only what an email did, once, and only
    while the task still shows it (a task reopened since, or a date edited since, has nothing of it left)."""
    if event.by != TaskEvent.By.EMAIL or event.action not in UNDOABLE_ACTIONS:
        return "Only a change an email made can be undone."
    if event.undone_at is not None:
        return "This change is already undone."
    if event.action == TaskEvent.Action.CLOSED and task.status == (event.status_before or Task.Status.OPEN):
        return "This task is open again already."
    if event.action == TaskEvent.Action.UPDATED and task.due_date != event.due_date_after:
        return "The due date was changed since; edit it instead."
    return ""


def _task_and_event(*, user: User, task_id: int, event_id: int) -> tuple[Task, TaskEvent]:
    """The person's task, locked, and one row of its history; another person's is simply not found."""
    task = Task.objects.select_for_update().filter(user=user, pk=task_id).first()
    event = TaskEvent.objects.select_for_update().filter(task_id=task_id, pk=event_id).first() if task else None
    if task is None or event is None:
        raise NotFoundError("There is no such change in this task's history.", code="event_not_found")
    return task, event


def task_event_undo(*, user: User, task_id: int, event_id: int) -> Task:
    """Undo what an email did to a task: the status and due date it had before come back, the row is stamped
    undone, and an `undone` row says the person did it. The task is then one the person changed by hand: no
    email closes or moves it again (what one would do is shown on it as a suggestion)."""
    with transaction.atomic():
        task, event = _task_and_event(user=user, task_id=task_id, event_id=event_id)
        refusal = task_event_undo_refusal(task=task, event=event)
        if refusal:
            raise ApplicationError(refusal, code="not_undoable")
        now = timezone.now()
        undone = TaskEvent(
            task=task,
            action=TaskEvent.Action.UNDONE,
            by=TaskEvent.By.PERSON,
            at=now,
            status_before=task.status,
            due_date_before=task.due_date,
            sentence=event.sentence,
        )
        if event.action == TaskEvent.Action.CLOSED:
            task.status = event.status_before or Task.Status.OPEN
            task.completed_at = task.completed_at if task.status == Task.Status.DONE else None
            if task.repeat_rule and task.status != Task.Status.DONE:  # the next the close made goes again
                repeat_next_take_back(user_id=user.pk, task_ids=[task.pk])
        else:
            task.due_date = event.due_date_before
        undone.due_date_after = task.due_date
        task.hand_changed = True
        task.save(update_fields=["status", "completed_at", "due_date", "hand_changed", "updated_at"])
        event.undone_at = now
        event.save(update_fields=["undone_at"])
        undone.save()
        _reminders_refresh([task.pk])
    return task


def task_suggestion_answer(*, user: User, task_id: int, event_id: int, accept: bool) -> Task:
    """The person's answer to what an email suggested for a task they changed by hand: take it (the task is
    done, or gets the new due date, as a change of theirs in its history) or set it aside (stamped, no longer
    shown). A suggestion answered already, or of a task closed since, is refused."""
    with transaction.atomic():
        task, event = _task_and_event(user=user, task_id=task_id, event_id=event_id)
        if event.action != TaskEvent.Action.SUGGESTED:
            raise ApplicationError("This change is not a suggestion.", code="not_a_suggestion")
        if event.undone_at is not None or task.status != Task.Status.OPEN:
            raise ApplicationError("This suggestion was answered already.", code="suggestion_answered")
        now = timezone.now()
        event.undone_at = now  # answered: no longer shown as waiting for an answer
        event.save(update_fields=["undone_at"])
        if not accept:
            return task
        taken = TaskEvent(task=task, by=TaskEvent.By.PERSON, at=now, sentence=event.sentence, status_before=task.status)
        if event.due_date_after is not None:
            taken.action, taken.due_date_before, taken.due_date_after = (
                TaskEvent.Action.UPDATED,
                task.due_date,
                event.due_date_after,
            )
            task.due_date = event.due_date_after
        else:
            taken.action = TaskEvent.Action.CLOSED
            task.status, task.completed_at = Task.Status.DONE, now
        task.save(update_fields=["status", "completed_at", "due_date", "updated_at"])
        taken.save()
        _reminders_refresh([task.pk])
    return task
