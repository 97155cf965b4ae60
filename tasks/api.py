"""The tasks API: the signed-in person's tasks, listed with the page's filters, read, added, edited, and
closed one by one or many at once; what emails did to each (its history), undone, and what an email suggested
for a task changed by hand, taken or set aside."""

from __future__ import annotations

import unicodedata
from datetime import date, datetime, time
from typing import Annotated, Any, Literal

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Path, Query, Router, Schema, Status
from pydantic import BeforeValidator, ConfigDict, WithJsonSchema
from pydantic.config import JsonDict

from config.errors import ConflictError
from config.http import request_user
from config.pagination import PageParams, page_of
from reminders.ring import MAX_MINUTES_BEFORE
from tasks.models import Task, TaskEvent
from tasks.repeat import REPEAT_PATTERN, repeat_words
from tasks.selectors import task_get, task_history, task_list, task_pending_suggestion
from tasks.services import (
    DUE_DATE_YEARS_AHEAD,
    EARLIEST_DUE_DATE,
    MAX_NOTES_CHARS,
    MAX_TITLE_CHARS,
    db_text,
    task_bulk_set_status,
    task_create,
    task_event_undo,
    task_event_undo_refusal,
    task_suggestion_answer,
    task_update,
)

router = Router(tags=["tasks"])

MAX_ID = 2**63 - 1
MAX_BULK = 500

TaskId = Annotated[int, Path(ge=1, le=MAX_ID, description="The task's id.")]
EventId = Annotated[int, Path(ge=1, le=MAX_ID, description="The id of a row of the task's `history`.")]


def _visible() -> str:
    r"""A character a person sees, as the services judge it: they drop format characters (category Cf: U+200B,
    U+202E, ...) and NUL from a title or a token's name, split it on whitespace (Python's, which counts
    \x1c-\x1f and \x85 too) and refuse one left empty, which `\S` does not say. A class of what is none of
    those, in the syntax ECMA-262 (JSON Schema), Python's `re` (schemathesis) and pydantic all read alike, so the
    document and the API cannot disagree. The format characters above U+FFFF (tags, Egyptian and musical
    controls) cannot be written so in all three: a name made only of those passes the pattern and is refused."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) == "Cf":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    formats = "".join(rf"\u{a:04x}" if a == b else rf"\u{a:04x}-\u{b:04x}" for a, b in ranges)
    return rf"[^\s\x00\x1c-\x1f\x85{formats}]"


VISIBLE = _visible()


def _years_from_2000(last: int) -> str:
    r"""The regex of the years 2000 to `last` (of this century): `20(?:[0-2]\d|3[0-5])` up to 2035."""
    decades, year = divmod(last - 2000, 10)
    whole_decades = rf"[0-{decades - 1}]\d|" if decades else ""
    return rf"20(?:{whole_decades}{decades}[0-{year}])"


# A due date is accepted from 2000 to ten years from today (tasks.services.due_date_in_range), which no JSON Schema
# keyword says of a date. The pattern states the whole years within it as of the day this process started; the
# bound only moves later, so every date it admits stays accepted (and up to a year beyond it is accepted too).
DUE_DATE_PATTERN = (
    rf"^{_years_from_2000(timezone.now().year + DUE_DATE_YEARS_AHEAD - 1)}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])$"
)
DueDate = Annotated[date, WithJsonSchema({"type": "string", "format": "date", "pattern": DUE_DATE_PATTERN})]
DueTime = Annotated[str, Field(pattern=r"^(?:[01]\d|2[0-3]):[0-5]\d$")]
Repeat = Annotated[str, Field(pattern=REPEAT_PATTERN)]
REPEAT_RULE = (
    "How it repeats, an iCalendar RRULE: FREQ=DAILY, WEEKLY, MONTHLY or YEARLY, with INTERVAL, BYDAY or "
    "BYMONTHDAY (`FREQ=MONTHLY;BYMONTHDAY=1`, `FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR`). Done makes the next one. "
    "Without a due date, it is due on the rule's first day from today; a rule that never comes round is a 422 "
    "`invalid_repeat`."
)
DUE_TIME_RULE = (
    "The time of day it is due, `HH:MM` in your time zone; only with a due date (else 422 `invalid_due_time`)."
)
DUE_DATE_RULE = (
    f"From {EARLIEST_DUE_DATE:%Y-%m-%d} to {DUE_DATE_YEARS_AHEAD} years from today (`pattern` states the years "
    "always within); another date is a 422 `invalid_due_date`."
)


class TaskLinkOut(Schema):
    """One mailbox the task's email reached, with a link that opens the email there."""

    mailbox_id: int
    provider: str  # "gmail" or "outlook"
    provider_name: str  # "Gmail" or "Outlook", as the page's badge shows it
    address: str
    mailbox_status: str  # "active", "needs_reauth" or "disconnected"
    web_link: str


class TaskEventEmailOut(Schema):
    """The email that made a change: where it is, and who sent it when."""

    mailbox_id: int | None = Field(description="The mailbox it was read from (null once that mailbox is deleted).")
    folder: Literal["inbox", "sent"] = Field(description="`sent`: your own reply; `inbox`: mail you received.")
    sender: str
    received_at: datetime | None
    web_link: str = Field(description="Opens the email in Gmail or Outlook.")


class TaskEventOut(Schema):
    """One row of a task's history: a change an email made (`by: email`: closed, due date updated, or only
    suggested, for a task you changed by hand), or one of yours (`reopened`, `undone`, or a suggestion taken)."""

    id: int
    action: TaskEvent.Action
    by: TaskEvent.By
    at: datetime
    email: TaskEventEmailOut | None = Field(description="The email that made the change; null for your own.")
    sentence: str = Field(description="The email's own words that made the change, verbatim.")
    status_before: Task.Status | None = Field(description="The status the change found (what Undo puts back).")
    due_date_before: date | None
    due_date_after: date | None = Field(description="The due date the change set (or suggests).")
    undone_at: datetime | None = Field(
        description="When it was undone (a change) or answered (a suggestion); null while it stands."
    )
    can_undo: bool = Field(
        description="An email's change the task still shows: `POST .../history/{id}/undo` puts back what it changed."
    )


class TaskOut(Schema):
    id: int
    title: str
    notes: str
    status: Task.Status
    priority: Task.Priority | None
    due_date: date | None
    due_time: str | None = Field(description="`HH:MM` in your time zone, or null (due some time that day).")
    repeat: str | None = Field(description="How it repeats (an iCalendar RRULE), or null.")
    repeat_words: str = Field(description="The repeat in words (`every month on the 1st`); empty when none.")
    reminder_minutes_before: int | None = Field(
        description="A reminder rings this many minutes before `due_time` (0: at it), by email and Web Push; "
        "null: none."
    )
    source: Task.Source
    email_link: str
    email_sender: str
    email_subject: str
    email_received_at: datetime | None
    sentence: str = Field(
        description="The sentence of the email the task came from, verbatim (whitespace on one line), as Tasklift "
        "found it in the email's cleaned text: the evidence for the task, never edited. Empty for tasks added by "
        "hand and for tasks made before sentences were kept."
    )
    links: list[TaskLinkOut]
    kind: Task.Kind = Field(
        description="`ask`: asked of you in mail you received; `commitment`: you promised it in mail you sent; "
        "`waiting`: you asked someone in mail you sent and wait for it."
    )
    waiting_on: str = Field(description="For a `waiting` item, whom you asked (as in a To header); empty otherwise.")
    conversation: str | None = Field(
        description="The email's conversation (its root Message-ID), the same through every mailbox; null for tasks "
        "added by hand."
    )
    hand_changed: bool = Field(
        description="You edited or reopened it: no email closes or changes it automatically any more; what one would "
        "do is a `suggestion` instead."
    )
    history: list[TaskEventOut] = Field(description="What emails, and you, changed of it, oldest first.")
    suggestion: int | None = Field(
        description="The id of the history row an email suggested and you have not answered yet "
        "(`POST .../history/{id}/suggestion`); null when there is none."
    )
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    @staticmethod
    def resolve_priority(task: Task) -> str | None:
        return task.priority or None

    @staticmethod
    def resolve_due_time(task: Task) -> str | None:
        return f"{task.due_time:%H:%M}" if task.due_time else None

    @staticmethod
    def resolve_repeat(task: Task) -> str | None:
        return task.repeat_rule or None

    @staticmethod
    def resolve_repeat_words(task: Task) -> str:
        return repeat_words(task.repeat_rule)

    @staticmethod
    def resolve_reminder_minutes_before(task: Task) -> int | None:
        reminder = getattr(task, "reminder", None)  # the list selects it with its tasks
        return reminder.minutes_before if reminder is not None else None

    @staticmethod
    def resolve_links(task: Task) -> list[dict[str, Any]]:
        return task_links(task)

    @staticmethod
    def resolve_conversation(task: Task) -> str | None:
        return task.conversation_key or None

    @staticmethod
    def resolve_history(task: Task) -> list[dict[str, Any]]:
        return [task_event_out(task, event) for event in task_history(task=task)]

    @staticmethod
    def resolve_suggestion(task: Task) -> int | None:
        suggestion = task_pending_suggestion(task=task)
        return suggestion.pk if suggestion else None


def task_event_out(task: Task, event: TaskEvent) -> dict[str, Any]:
    email = None
    if event.by == TaskEvent.By.EMAIL:
        email = {
            "mailbox_id": event.integration_id,
            "folder": "sent" if event.email_folder == "sent" else "inbox",
            "sender": event.email_sender,
            "received_at": event.email_received_at,
            "web_link": event.web_link,
        }
    return {
        "id": event.pk,
        "action": event.action,
        "by": event.by,
        "at": event.at,
        "email": email,
        "sentence": event.sentence,
        "status_before": event.status_before or None,
        "due_date_before": event.due_date_before,
        "due_date_after": event.due_date_after,
        "undone_at": event.undone_at,
        "can_undo": not task_event_undo_refusal(task=task, event=event),
    }


class TaskPage(Schema):
    items: list[TaskOut]
    next: str | None = Field(description="The URL of the next page, or null on the last one.")


# A time only with a date: no `due_time`, a null one, or a `due_date` beside it (so a generator of valid requests,
# schemathesis among them, never sends a time alone, which would be refused); a reminder only with a time.
_TIME_NEEDS_DATE: JsonDict = {
    "allOf": [
        {
            "anyOf": [
                {"properties": {"due_time": {"type": "null"}}},
                {"required": ["due_date"], "properties": {"due_date": {"type": "string"}}},
            ]
        },
        {
            "anyOf": [
                {"properties": {"reminder_minutes_before": {"type": "null"}}},
                {"required": ["due_time"], "properties": {"due_time": {"type": "string"}}},
            ]
        },
    ]
}


def _no_boolean(value: object) -> object:
    """`false` is not 0 minutes (pydantic's lax integers take it; JSON Schema's integer does not); 164.0 is 164."""
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer")
    return value


ReminderMinutes = Annotated[int, Field(ge=0, le=MAX_MINUTES_BEFORE), BeforeValidator(_no_boolean)]
REMINDER_RULE = (
    "Minutes before `due_time` a reminder rings (0: at it; at most a week), by email and Web Push; only for a "
    "task with a time (else 422 `invalid_reminder`)."
)


class TaskIn(Schema):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_TIME_NEEDS_DATE)

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, pattern=VISIBLE)
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)
    due_date: DueDate | None = Field(default=None, description=DUE_DATE_RULE)
    due_time: DueTime | None = Field(default=None, description=DUE_TIME_RULE)
    priority: Task.Priority | None = None
    repeat: Repeat | None = Field(default=None, description=REPEAT_RULE)
    reminder_minutes_before: ReminderMinutes | None = Field(default=None, description=REMINDER_RULE)


class TaskPatch(Schema):
    """Only the fields sent change. `due_date: null` clears the due date, `priority: null` the priority.
    Setting `status` is how a task is done (`done`), dismissed (`dismissed`) or opened again (`open`)."""

    model_config = ConfigDict(extra="forbid")

    # A default of None on a non-nullable type: a field left out is None here and then not passed on,
    # while an explicit null is refused by validation.
    title: str = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS, pattern=VISIBLE)  # type: ignore[assignment]
    notes: str = Field(default=None, max_length=MAX_NOTES_CHARS)  # type: ignore[assignment]
    due_date: DueDate | None = Field(default=None, description=DUE_DATE_RULE)
    due_time: DueTime | None = Field(default=None, description=DUE_TIME_RULE + " `null` clears it.")
    priority: Task.Priority | None = None
    repeat: Repeat | None = Field(default=None, description=REPEAT_RULE + " `null` stops it repeating.")
    reminder_minutes_before: ReminderMinutes | None = Field(
        default=None, description=REMINDER_RULE + " `null` removes it."
    )
    status: Task.Status = Field(default=None)  # type: ignore[assignment]


class TaskBulkStatusIn(Schema):
    model_config = ConfigDict(extra="forbid")

    ids: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(min_length=1, max_length=MAX_BULK)
    status: Task.Status


class TaskBulkStatusOut(Schema):
    updated: int = Field(description="How many of the given tasks are yours and were set (others are ignored).")


class TaskFilters(Schema):
    status: Literal["open", "done", "dismissed", "all"] = Field("open", description="Which tasks; `all` for every one.")
    q: str = Field("", max_length=200, description="Words to find in the title, notes, sender or subject.")
    # Defaults of None on non-nullable types: a query parameter is left out, never null.
    mailbox: int = Field(None, ge=1, le=MAX_ID, description="Only tasks whose email reached this mailbox.")  # type: ignore[assignment]
    source: Task.Source = Field(None, description="Only tasks from email (`email_ai`) or added by hand.")  # type: ignore[assignment]
    kind: Task.Kind = Field(
        None, description="Only items of this kind (`ask`, `commitment`, `waiting`); every kind without it."
    )  # type: ignore[assignment]


class SuggestionAnswerIn(Schema):
    model_config = ConfigDict(extra="forbid")

    answer: Literal["accept", "dismiss"] = Field(
        description="`accept`: do what the email suggested (the task is done, or gets the new due date); "
        "`dismiss`: set the suggestion aside."
    )


def task_links(task: Task) -> list[dict[str, Any]]:
    links = [
        {
            "mailbox_id": link.integration_id,
            "provider": link.integration.provider,
            "provider_name": link.integration.get_provider_display(),
            "address": link.integration.account_address,
            "mailbox_status": link.integration.status,
            "web_link": link.web_link,
        }
        for link in task.links.all()
    ]
    if not links and task.integration is not None:  # a task made before links were recorded
        integration = task.integration
        links.append(
            {
                "mailbox_id": integration.pk,
                "provider": integration.provider,
                "provider_name": integration.get_provider_display(),
                "address": integration.account_address,
                "mailbox_status": integration.status,
                "web_link": task.email_link,
            }
        )
    return links


@router.get("/tasks", response=TaskPage, summary="List your tasks (a page)")
def list_tasks(request: HttpRequest, filters: Query[TaskFilters], page: Query[PageParams]) -> dict[str, Any]:
    """Open tasks by due date (soonest first), then by the email's received time (newest first); done and
    dismissed ones by when they were closed."""
    tasks = task_list(
        user=request_user(request),
        status=None if filters.status == "all" else filters.status,
        query=db_text(filters.q),
        integration_id=filters.mailbox,
        source=filters.source or "",
        kinds=(filters.kind,) if filters.kind else (),
    )
    return page_of(request, tasks, page)


@router.post("/tasks", response={201: TaskOut}, summary="Add a task by hand")
def create_task(request: HttpRequest, payload: TaskIn) -> Status[Any]:
    task = task_create(
        user=request_user(request),
        title=payload.title,
        notes=payload.notes,
        due_date=payload.due_date,
        due_time=_time(payload.due_time),
        priority=payload.priority or "",
        repeat=payload.repeat or "",
        reminder=payload.reminder_minutes_before,
    )
    return Status(201, task)


@router.post("/tasks/bulk-status", response=TaskBulkStatusOut, summary="Set the status of many tasks")
def bulk_set_status(request: HttpRequest, payload: TaskBulkStatusIn) -> dict[str, int]:
    updated = task_bulk_set_status(user=request_user(request), task_ids=payload.ids, status=payload.status)
    return {"updated": updated}


@router.get("/tasks/{int:task_id}", response=TaskOut, summary="Read one task")
def get_task(request: HttpRequest, task_id: TaskId) -> Task:
    return task_get(user=request_user(request), task_id=task_id)


@router.patch("/tasks/{int:task_id}", response=TaskOut, summary="Change a task (its status too)")
def update_task(request: HttpRequest, task_id: TaskId, payload: TaskPatch) -> Task:
    task = task_get(user=request_user(request), task_id=task_id)
    changes = payload.model_dump(exclude_unset=True)
    if "priority" in changes:
        changes["priority"] = changes["priority"] or ""
    if "repeat" in changes:
        changes["repeat"] = changes["repeat"] or ""
    if "reminder_minutes_before" in changes:
        changes["reminder"] = changes.pop("reminder_minutes_before")
        due_time = changes.get("due_time", task.due_time)
        if changes["reminder"] is not None and due_time is None:
            raise ConflictError("This task has no time: send `due_time` with the reminder.", code="no_due_time")
    if "due_time" in changes:
        changes["due_time"] = _time(changes["due_time"])
        if changes["due_time"] is not None and changes.get("due_date", task.due_date) is None:
            raise ConflictError("This task has no due date: send `due_date` with the time.", code="no_due_date")
    return task_update(task=task, **changes)


def _time(value: str | None) -> time | None:
    return time.fromisoformat(value) if value else None


@router.post(
    "/tasks/{int:task_id}/history/{int:event_id}/undo", response=TaskOut, summary="Undo what an email did to a task"
)
def undo_task_event(request: HttpRequest, task_id: TaskId, event_id: EventId) -> Task:
    """Puts back the status or due date the email's change found (`can_undo` says whether it can); the task is
    then changed by hand: no email closes or changes it again. 400 `not_undoable` when the row is not an email's
    change the task still shows; 404 `event_not_found` for a row that is not this task's."""
    task = task_event_undo(user=request_user(request), task_id=task_id, event_id=event_id)
    return task_get(user=task.user, task_id=task.pk)


@router.post(
    "/tasks/{int:task_id}/history/{int:event_id}/suggestion",
    response=TaskOut,
    summary="Take or set aside what an email suggested",
)
def answer_task_suggestion(
    request: HttpRequest, task_id: TaskId, event_id: EventId, payload: SuggestionAnswerIn
) -> Task:
    """For a task you changed by hand, an email's close or new date is only suggested (the task's `suggestion`).
    400 `not_a_suggestion` or `suggestion_answered`; 404 `event_not_found`."""
    task = task_suggestion_answer(
        user=request_user(request), task_id=task_id, event_id=event_id, accept=payload.answer == "accept"
    )
    return task_get(user=task.user, task_id=task.pk)
