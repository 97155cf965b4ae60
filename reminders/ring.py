"""Reminders that ring: a task due at a time reminds its person at that time or a chosen time before it, by
email (through the digest's mail path) and by Web Push to each browser they subscribed (reminders/push.py).

Beat's scan sends jobs; each claims a chunk of due reminders (`FOR UPDATE SKIP LOCKED`, a lease), rings them,
and records each as rung for its time (`sent_for`). Once per task and time, whatever the workers and kills:

- two jobs never hold one reminder (the claim skips what another holds; the lease ends a dead one's hold);
- the moment a mail server took a reminder (or a push service), it is written down in Redis (a journal, as
  the digest's), and a job that finds it there records it without ringing again;
- a kill exactly between ringing and writing it down falls on the side of a second ring, after the lease: a
  reminder rung twice is a nuisance, one never rung is a missed appointment. Only that window (a few
  milliseconds) can ring twice.

A task done, dismissed or snoozed past the reminder's day does not ring (its reminder is recorded as passed);
nor does a reminder more than REMINDER_LATE_MINUTES late (a worker down for hours does not ring for a meeting
long over)."""

from __future__ import annotations

import logging
import smtplib
import time as clock
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from config.errors import ApplicationError
from extraction.crashpoints import crash_point
from reminders.models import Reminder, not_rung
from reminders.push import push_send, push_stamp, push_subscriptions_of
from tasks.models import Task
from tasks.snooze import person_zone

logger = logging.getLogger(__name__)

MAX_MINUTES_BEFORE = 7 * 24 * 60  # a week before, at most
JOURNAL_SECONDS = 3 * 86400


def _remind_at(task: Task, minutes_before: int) -> datetime | None:
    if task.due_date is None or task.due_time is None:
        return None
    due = datetime.combine(task.due_date, task.due_time, tzinfo=person_zone(task.user))
    return due - timedelta(minutes=minutes_before)


def reminder_set(*, task: Task, minutes_before: int | None) -> Reminder | None:
    """Remind `minutes_before` the task's time (None: no reminder). Refused for a task without a time."""
    if minutes_before is None:
        if Reminder.objects.filter(task=task).delete()[0]:
            Task.objects.filter(pk=task.pk).update(updated_at=timezone.now())
        return None
    if task.due_time is None or task.due_date is None:
        raise ApplicationError(
            "A reminder needs a time: give the task a due time first.",
            code="invalid_reminder",
            extra={"field": "reminder"},
        )
    if not 0 <= minutes_before <= MAX_MINUTES_BEFORE:
        raise ApplicationError(
            "A reminder is from 0 minutes to a week before the time.",
            code="invalid_reminder",
            extra={"field": "reminder"},
        )
    reminder, _ = Reminder.objects.update_or_create(
        task=task, defaults={"minutes_before": minutes_before, "remind_at": _remind_at(task, minutes_before)}
    )
    Task.objects.filter(pk=task.pk).update(updated_at=timezone.now())  # the list and calendar feed see it
    return reminder


def reminder_refresh(*, task_ids: list[int]) -> None:
    """Work out again when these tasks' reminders ring, after their date, time or person's zone changed."""
    reminders = list(Reminder.objects.filter(task_id__in=task_ids).select_related("task__user"))
    for reminder in reminders:
        reminder.remind_at = _remind_at(reminder.task, reminder.minutes_before)
    Reminder.objects.bulk_update(reminders, ["remind_at"])


@dataclass
class Rung:
    claimed: int = 0
    emailed: int = 0
    pushed: int = 0
    passed: int = 0  # done, dismissed, snoozed or too late: recorded without ringing
    journalled: int = 0  # rung before a kill: recorded without ringing again
    late_s: list[float] = field(default_factory=list)


def _claim(now: datetime, limit: int) -> list[Reminder]:
    """Due reminders no job holds, held now for REMINDER_LEASE_SECONDS (committed: a job that dies leaves them
    to another once the lease ends)."""
    with transaction.atomic():
        held = list(
            Reminder.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(remind_at__lte=now)
            .filter(not_rung())
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .order_by("remind_at")[:limit]
        )
        Reminder.objects.filter(pk__in=[r.pk for r in held]).update(
            lease_until=now + timedelta(seconds=settings.REMINDER_LEASE_SECONDS)
        )
    return held


def _journal_key(reminder: Reminder) -> str:
    assert reminder.remind_at is not None
    return f"reminder-rung:{reminder.pk}:{int(reminder.remind_at.timestamp())}"


def _passes(task: Task, reminder: Reminder, now: datetime) -> bool:
    """Whether this reminder is not to ring: its task closed, snoozed past the day, or the time long gone."""
    assert reminder.remind_at is not None
    if task.status != Task.Status.OPEN:
        return True
    day = reminder.remind_at.astimezone(person_zone(task.user)).date()
    if task.snoozed_until is not None and task.snoozed_until > day:
        return True
    return now - reminder.remind_at > timedelta(minutes=settings.REMINDER_LATE_MINUTES)


def _email(task: Task, reminder: Reminder) -> EmailMultiAlternatives:
    zone = person_zone(task.user)
    context = {"task": task, "site_url": settings.SITE_URL, "zone": zone.key, "reminder": reminder}
    assert task.due_time is not None
    subject = f"Reminder: {task.title[:120]} at {task.due_time:%H:%M}"
    domain = settings.SITE_URL.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "tasklift.localhost"
    assert reminder.remind_at is not None
    message = EmailMultiAlternatives(
        subject=" ".join(subject.split()),
        body=render_to_string("reminders/email/reminder.txt", context),
        to=[task.user.email],
        headers={
            "Auto-Submitted": "auto-generated",
            "Message-ID": f"<reminder-{task.pk}-{int(reminder.remind_at.timestamp())}@{domain}>",
        },
    )
    message.attach_alternative(render_to_string("reminders/email/reminder.html", context), "text/html")
    return message


def reminders_send_due(*, now: datetime | None = None, budget_s: float | None = None) -> dict[str, object]:
    """Ring the due reminders, a chunk at a time, until none is due or `budget_s` went by. A chunk rings for at
    most 0.8 of its lease, then gives the rest back (due at once, for the next claim): no job rings what
    another may have claimed since."""
    started = clock.monotonic()
    total = Rung()
    while True:
        moment = now or timezone.now()
        held = _claim(moment, settings.REMINDER_CHUNK)
        if not held:
            break
        total.claimed += len(held)
        _ring(held, moment, clock.monotonic() + settings.REMINDER_LEASE_SECONDS * 0.8, total)
        if budget_s is not None and clock.monotonic() - started > budget_s:
            break
        if now is not None and len(held) < settings.REMINDER_CHUNK:
            break
    return {
        "claimed": total.claimed,
        "emailed": total.emailed,
        "pushed": total.pushed,
        "passed": total.passed,
        "journalled": total.journalled,
        "late_s": total.late_s,
    }


def _journalled(held: list[Reminder]) -> set[str]:
    try:
        return set(cache.get_many([_journal_key(r) for r in held]))
    except Exception:  # Redis out of reach: none counts as rung (the side of a second ring, never none)
        logger.warning("reminder journal unreachable: a reminder rung before a kill may ring again")
        return set()


def _ring(held: list[Reminder], moment: datetime, give_back_at: float, total: Rung) -> None:
    """One chunk: each reminder rung (or passed), then the chunk recorded in one statement; what was not
    reached by `give_back_at` is given back."""
    tasks = Task.objects.select_related("user").in_bulk([r.task_id for r in held])
    browsers = push_subscriptions_of(list({task.user_id for task in tasks.values()}))
    journalled = _journalled(held)
    done: list[Reminder] = []
    pushed: list[int] = []
    connection = get_connection()
    try:
        for reminder in held:
            if clock.monotonic() > give_back_at:
                break
            task = tasks[reminder.task_id]
            if _passes(task, reminder, moment):
                total.passed += 1
            elif _journal_key(reminder) in journalled:
                total.journalled += 1
            else:
                assert reminder.remind_at is not None
                try:
                    connection.send_messages([_email(task, reminder)])
                except (smtplib.SMTPException, OSError) as error:  # held until the lease ends, then again
                    name = type(error).__name__
                    logger.warning("reminder of task=%s not taken by the mail server: %s", task.pk, name)
                    continue
                total.emailed += 1
                rung_to = push_send(task=task, subscriptions=browsers.get(task.user_id, []))
                pushed += rung_to
                total.pushed += len(rung_to)
                crash_point("reminder_rung")
                try:
                    cache.set(_journal_key(reminder), 1, timeout=JOURNAL_SECONDS)
                except Exception:  # Redis out of reach: recorded with the chunk; a kill before then rings again
                    logger.warning("reminder of task=%s rung, journal unreachable", reminder.task_id)
                crash_point("reminder_journalled")
                total.late_s.append(max(0.0, (timezone.now() - reminder.remind_at).total_seconds()))
            done.append(reminder)
    finally:
        connection.close()
        for reminder in done:
            reminder.sent_for = reminder.remind_at
        for reminder in held:
            reminder.lease_until = None  # recorded, or given back
        Reminder.objects.bulk_update(held, ["sent_for", "lease_until"])
        push_stamp(pushed)


def reminders_due_count(*, now: datetime | None = None, most: int) -> int:
    moment = now or timezone.now()
    due = Reminder.objects.filter(remind_at__lte=moment).filter(not_rung())
    return due.filter(Q(lease_until__isnull=True) | Q(lease_until__lt=moment))[:most].count()
