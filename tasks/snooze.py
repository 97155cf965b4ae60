"""Snoozing a task to a date: it leaves the open list (and the digest) until that date comes in its
person's time zone, and is back on the list that morning, unchanged otherwise."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

from accounts.models import User
from config.errors import ApplicationError
from tasks.models import Task
from tasks.services import DUE_DATE_YEARS_AHEAD, due_date_in_range


def person_zone(user: User) -> ZoneInfo:
    """The person's time zone; UTC for a name the system does not know (as pages do)."""
    try:
        return ZoneInfo(user.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def person_now(*, user: User, now: datetime | None = None) -> datetime:
    return (now or timezone.now()).astimezone(person_zone(user))


def person_today(*, user: User, now: datetime | None = None) -> date:
    return person_now(user=user, now=now).date()


def task_snooze(*, task: Task, until: date, now: datetime | None = None) -> Task:
    """Hide an open task until `until` (a day after the person's today). Refused for a closed task, or a
    date that is today or past (it would not leave the list) or not a date a person could mean."""
    if task.status != Task.Status.OPEN:
        raise ApplicationError("Only an open task can be snoozed.", code="task_not_open")
    today = person_today(user=task.user, now=now)
    if until <= today:
        raise ApplicationError(
            "Snooze until a day after today.", code="invalid_snooze_date", extra={"field": "snoozed_until"}
        )
    if not due_date_in_range(until):
        raise ApplicationError(
            f"Snooze until a date within {DUE_DATE_YEARS_AHEAD} years.",
            code="invalid_snooze_date",
            extra={"field": "snoozed_until"},
        )
    task.snoozed_until = until
    task.save(update_fields=["snoozed_until", "updated_at"])
    return task


def task_snoozed_list(*, user: User, now: datetime | None = None) -> list[Task]:
    """The person's open tasks off the list for now, soonest back first."""
    today = person_today(user=user, now=now)
    return list(
        Task.objects.filter(user=user, status=Task.Status.OPEN, snoozed_until__gt=today).order_by("snoozed_until", "pk")
    )


def task_unsnooze(*, task: Task) -> Task:
    task.snoozed_until = None
    task.save(update_fields=["snoozed_until", "updated_at"])
    return task
