"""A private calendar feed of a person's dated open tasks, in iCalendar (RFC 5545), so that due dates appear
in Google Calendar, Outlook and Apple Calendar, which subscribe to a URL and fetch it again now and then.

The URL's secret is its only credential (a calendar app sends no login): made at random, shown once, only
its SHA-256 kept, revoked in Settings. It starts with `tl_` as access tokens do, so that every log line
keeps it out (config/logfilters.py)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

import icalendar
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from config.errors import ApplicationError
from reminders.models import CalendarFeed
from tasks.models import Task

SECRET_PREFIX = "tl_cal_"
MAX_FEEDS = 10  # live feeds per person
MAX_EVENTS = 2000  # the soonest; a calendar is no place for more


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def calendar_feed_url(*, secret: str) -> str:
    return settings.SITE_URL + reverse("calendar_feed", kwargs={"secret": secret})


def calendar_feed_create(*, user: User) -> tuple[CalendarFeed, str]:
    """A new feed; returns it with its secret, shown once and never stored."""
    if CalendarFeed.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_FEEDS:
        raise ApplicationError(
            f"You have {MAX_FEEDS} calendar links already: revoke one you no longer use first.", code="too_many_feeds"
        )
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    feed = CalendarFeed.objects.create(user=user, secret_hash=_secret_hash(secret), prefix=secret[:12])
    return feed, secret


def calendar_feed_revoke(*, user: User, feed_id: int) -> bool:
    return bool(
        CalendarFeed.objects.filter(user=user, pk=feed_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    )


def calendar_feed_list(*, user: User) -> list[CalendarFeed]:
    return list(CalendarFeed.objects.filter(user=user, revoked_at__isnull=True))


def calendar_feed_find(*, secret: str) -> CalendarFeed | None:
    """The live feed of this secret (its person active), or None: unknown, revoked, or not one of ours."""
    if not secret.startswith(SECRET_PREFIX) or len(secret) > 100:
        return None
    feed = (
        CalendarFeed.objects.select_related("user")
        .filter(secret_hash=_secret_hash(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    now = timezone.now()
    if feed is not None and (feed.last_fetched_at is None or now - feed.last_fetched_at > timedelta(hours=1)):
        CalendarFeed.objects.filter(pk=feed.pk).update(last_fetched_at=now)  # an hour's precision, few writes
    return feed


def _domain() -> str:
    return settings.SITE_URL.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "tasklift.localhost"


def calendar_feed_ics(*, user: User) -> bytes:
    """The person's open tasks that have a due date, each an all-day event on it (a VEVENT: every calendar app
    shows those, where VTODO is ignored by Google Calendar and Outlook)."""
    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//Tasklift//Tasks//EN")
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", "Tasklift")
    calendar.add("x-published-ttl", "PT1H")  # how often to fetch again, for the apps that read it
    calendar.add("refresh-interval", timedelta(hours=1), parameters={"VALUE": "DURATION"})
    tasks = Task.objects.filter(user=user, status=Task.Status.OPEN, due_date__isnull=False).order_by("due_date", "pk")
    now = timezone.now()
    domain = _domain()
    for task in tasks[:MAX_EVENTS]:
        assert task.due_date is not None
        event = icalendar.Event()
        event.add("uid", f"task-{task.pk}@{domain}")
        event.add("dtstamp", now)
        event.add("last-modified", task.updated_at)
        event.add("dtstart", task.due_date)
        event.add("dtend", task.due_date + timedelta(days=1))
        event.add("summary", task.title)
        event.add("transp", "TRANSPARENT")  # a due date does not make the person busy
        event.add("url", f"{settings.SITE_URL}/")
        description = [f"Due in Tasklift: {settings.SITE_URL}/"]
        if task.email_subject:
            description.insert(0, f"From the email “{task.email_subject}”")
        event.add("description", "\n".join(description))
        calendar.add_component(event)
    return bytes(calendar.to_ical())
