from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from accounts.models import User
from config.errors import ApplicationError
from tasks.models import Task

MAX_TITLE_CHARS = 300


def db_text(value: str) -> str:
    """Text as PostgreSQL can store it: it refuses NUL characters, which mail and LLM answers may hold."""
    return value.replace("\x00", "")


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
    title: str
    due_date: date | None
    priority: str
    email_link: str
    email_sender: str
    email_subject: str
    email_received_at: datetime
    run_id: int | None


def task_insert_from_emails(*, rows: list[EmailTaskRow]) -> int:
    """Insert tasks found in emails in one statement, ON CONFLICT DO NOTHING. Returns how many are new.

    One query whatever the number of rows (an empty list included), so a batch's query count is constant.
    """
    now = timezone.now()
    columns = {
        "user_id": ("bigint", [r.user_id for r in rows]),
        "source_id": ("text", [db_text(r.message_id) for r in rows]),
        "integration_id": ("bigint", [r.integration_id for r in rows]),
        "title": ("text", [db_text(r.title)[:MAX_TITLE_CHARS] for r in rows]),
        "title_key": ("text", [task_title_key(db_text(r.title)) for r in rows]),
        "due_date": ("date", [r.due_date for r in rows]),
        "priority": ("text", [r.priority for r in rows]),
        "email_link": ("text", [db_text(r.email_link)[:1000] for r in rows]),
        "email_sender": ("text", [db_text(r.email_sender)[:500] for r in rows]),
        "email_subject": ("text", [db_text(r.email_subject)[:1000] for r in rows]),
        "email_received_at": ("timestamptz", [r.email_received_at for r in rows]),
        "run_id": ("bigint", [r.run_id for r in rows]),
    }
    names = ", ".join(columns)
    unnest = ", ".join(f"%s::{kind}[]" for kind, _ in columns.values())
    sql = (
        f"INSERT INTO {Task._meta.db_table} ({names}, source, notes, status, created_at, updated_at) "  # noqa: S608
        f"SELECT {names}, %s, '', %s, %s, %s FROM unnest({unnest}) AS t({names}) "
        "ON CONFLICT (user_id, source, source_id, title_key) DO NOTHING"
    )
    params: list[Any] = [Task.Source.EMAIL_AI, Task.Status.OPEN, now, now] + [values for _, values in columns.values()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def task_create(*, user: User, title: str, notes: str = "", due_date: date | None = None, priority: str = "") -> Task:
    """A task added by hand."""
    title = " ".join(db_text(title).split())
    notes = db_text(notes)
    if not title:
        raise ApplicationError("A task needs a title.", code="invalid_title", extra={"field": "title"})
    if len(title) > MAX_TITLE_CHARS:
        raise ApplicationError(
            f"A title can have at most {MAX_TITLE_CHARS} characters.", code="invalid_title", extra={"field": "title"}
        )
    if priority and priority not in Task.Priority.values:
        raise ApplicationError("Priority must be low, medium or high.", code="invalid_priority")
    return Task.objects.create(
        user=user,
        source=Task.Source.MANUAL,
        source_id=uuid.uuid4().hex,
        title=title,
        title_key=task_title_key(title),
        notes=notes,
        due_date=due_date,
        priority=priority,
    )


def task_set_status(*, task: Task, status: str) -> Task:
    if status not in Task.Status.values:
        raise ApplicationError("Status must be open, done or dismissed.", code="invalid_status")
    task.status = status
    task.completed_at = timezone.now() if status == Task.Status.DONE else None
    task.save(update_fields=["status", "completed_at", "updated_at"])
    return task
