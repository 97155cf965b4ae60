"""A task's history as a person reads it: who changed it and how ("Done by your reply, Tue 10:04"), in their
time zone; and which of its rows are shown as what closed it, as a suggestion, or with an Undo."""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parseaddr

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format

from tasks.models import Task, TaskEvent
from tasks.selectors import task_closing_event, task_history, task_pending_suggestion
from tasks.services import task_event_undo_refusal
from tasks.templatetags.dates import nice_date

register = template.Library()

RECENT_DAYS = 6  # within a week a weekday says which day it was ("Tue 10:04"); beyond it, the date


@register.filter
def event_time(value: datetime | None) -> str:
    if value is None:
        return ""
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    now = timezone.localtime()
    if timedelta(0) <= now - local < timedelta(days=RECENT_DAYS):
        return date_format(local, "D H:i")
    return date_format(local, "D j M, H:i" if local.year == now.year else "D j M Y, H:i")


@register.filter
def person_name(value: str) -> str:
    """ "Sam Lee <sam@example.org>" as "Sam Lee"; an address alone as itself."""
    name, address = parseaddr(value)
    return name or address or value


@register.filter
def history(task: Task) -> list[TaskEvent]:
    return task_history(task=task)


@register.filter
def closing_event(task: Task) -> TaskEvent | None:
    return task_closing_event(task=task)


@register.filter
def pending_suggestion(task: Task) -> TaskEvent | None:
    return task_pending_suggestion(task=task)


@register.filter
def undoable(event: TaskEvent, task: Task) -> bool:
    return not task_event_undo_refusal(task=task, event=event)


def _by_email(event: TaskEvent) -> str:
    if event.email_folder == "sent":
        return "your reply"
    return f"{person_name(event.email_sender)}\u2019s email" if event.email_sender else "an email"


@register.filter
def event_words(event: TaskEvent) -> str:
    """What the row says happened, and by whom."""
    by = _by_email(event) if event.by == TaskEvent.By.EMAIL else "you"
    moved = f" to {nice_date(event.due_date_after)}" if event.due_date_after else ""
    if event.action == TaskEvent.Action.CLOSED:
        return f"Closed by {by}"
    if event.action == TaskEvent.Action.UPDATED:
        return f"Due date moved{moved} by {by}" if event.due_date_after else f"Due date cleared by {by}"
    if event.action == TaskEvent.Action.SUGGESTED:
        return f"{by[0].upper()}{by[1:]} seemed to {'move it' + moved if moved else 'deliver it'}"
    if event.action == TaskEvent.Action.REOPENED:
        return f"Reopened by {by}"
    return f"Undone by {by}"
