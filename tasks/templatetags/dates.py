"""Dates as a person reads them: in their time zone (activated per request), with the year only when it is
not this year."""

from __future__ import annotations

from datetime import date, datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format

from tasks.repeat import repeat_words as words_of_repeat

register = template.Library()


@register.filter
def nice_date(value: date | None) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        value = timezone.localtime(value).date() if timezone.is_aware(value) else value.date()
    return date_format(value, "D j M" if value.year == timezone.localdate().year else "D j M Y")


@register.filter
def nice_datetime(value: datetime | None) -> str:
    if value is None:
        return ""
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return date_format(local, "j M, H:i" if local.year == timezone.localdate().year else "j M Y, H:i")


@register.filter
def due_state(value: date | None) -> str:
    """'overdue', 'today' or 'upcoming' against today in the person's time zone ('' without a due date)."""
    if value is None:
        return ""
    today = timezone.localdate()
    if value < today:
        return "overdue"
    return "today" if value == today else "upcoming"


@register.filter
def repeat_words(rule: str) -> str:
    """A repeat rule in words: "every month on the 1st" (tasks/repeat.py)."""
    return words_of_repeat(rule)
