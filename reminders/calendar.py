"""A private calendar feed of a person's dated open tasks, in iCalendar (RFC 5545), so that due dates appear
in Google Calendar, Outlook and Apple Calendar, which subscribe to a URL and fetch it again now and then.

The URL's secret is its only credential (a calendar app sends no login): made at random, shown once, only
its SHA-256 kept, revoked in Settings. It starts with `tl_` as access tokens do, so that every log line
keeps it out (config/logfilters.py).

Guessing is refused per client address: every fetch is counted before its secret is looked up, in a sliding
window on the shared Redis (accounts/counting.py), and taken out of the count again when the secret is one
we made. So only wrong secrets count: past CALENDAR_GUESSES_PER_ADDRESS of them within
CALENDAR_GUESS_WINDOW_MINUTES, that address is refused (a 429 with Retry-After) until the oldest leaves the
window, its right secrets too (else the refusal would tell a right guess from a wrong one). A calendar app
fetching its own link is never counted, however often; a revoked link is not counted either, since apps keep
fetching one for months, and their fetchers (Google's, Microsoft's) serve many people from few addresses.
While Redis is out of reach nothing can be counted and no secret is looked up (CountingUnavailable)."""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import datetime, timedelta

import icalendar
from django.conf import settings
from django.db.models import Count, Max, QuerySet, Sum
from django.urls import reverse
from django.utils import timezone

from accounts.counting import Counter, CountRefused, count_take, counted_forget, counter_key
from accounts.models import User
from config.errors import ApplicationError
from reminders.models import CalendarFeed
from tasks.models import Task
from tasks.snooze import person_today, person_zone

logger = logging.getLogger(__name__)

SECRET_PREFIX = "tl_cal_"
MAX_FEEDS = 10  # live feeds per person
MAX_EVENTS = 2000  # the soonest; a calendar is no place for more
# The window of the feed: tasks due from this many days before the person's today to this many after. Older
# ones are on the list (overdue), not in a calendar a person scrolls forward in; later ones come in in time.
WINDOW_DAYS_BEFORE = 30
WINDOW_DAYS_AFTER = 365
WINDOW_WORDS = "due from 30 days ago to a year ahead"
TIMED_EVENT_MINUTES = 30  # a task due at a time is an event of this length from it


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


class CalendarGuessing(Exception):
    """Too many wrong calendar secrets from this client address: nothing is looked up for `retry_after` s."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"calendar guesses refused for {retry_after} s")
        self.retry_after = retry_after


def _guesses(address: str) -> Counter:
    return Counter(
        key=counter_key("calendar-guesses", address),
        limit=settings.CALENDAR_GUESSES_PER_ADDRESS,
        window_s=settings.CALENDAR_GUESS_WINDOW_MINUTES * 60,
    )


def calendar_feed_find(*, secret: str, address: str) -> CalendarFeed | None:
    """The live feed of this secret (its person active), or None: unknown, revoked, or not one of ours.
    Raises CalendarGuessing past the wrong secrets allowed from `address`, CountingUnavailable without Redis."""
    try:
        guess = count_take(_guesses(address))  # before the lookup: a refused guess is never looked up
    except CountRefused as refusal:
        logger.warning("calendar feed refused: too many wrong secrets from one address, %d s left", refusal.retry_after)
        raise CalendarGuessing(refusal.retry_after) from None
    if not secret.startswith(SECRET_PREFIX) or len(secret) > 100:
        return None
    feed = CalendarFeed.objects.select_related("user").filter(secret_hash=_secret_hash(secret)).first()
    if feed is None:
        return None  # a wrong secret: it stays counted
    counted_forget(guess)  # one we made, live or revoked: not a guess
    if feed.revoked_at is not None or not feed.user.is_active:
        return None
    now = timezone.now()
    if feed.last_fetched_at is None or now - feed.last_fetched_at > timedelta(hours=1):
        CalendarFeed.objects.filter(pk=feed.pk).update(last_fetched_at=now)  # an hour's precision, few writes
    return feed


def _domain() -> str:
    return settings.SITE_URL.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "tasklift.localhost"


def _feed_tasks(user: User) -> QuerySet[Task]:
    today = person_today(user=user)
    return Task.objects.filter(
        user=user,
        status=Task.Status.OPEN,
        due_date__gte=today - timedelta(days=WINDOW_DAYS_BEFORE),
        due_date__lte=today + timedelta(days=WINDOW_DAYS_AFTER),
    ).select_related("reminder")


def calendar_feed_version(*, user: User) -> str:
    """What the feed's bytes depend on, in one small statement, so that a calendar app asking again with the
    ETag it holds gets a 304 without the feed being built: its tasks' count, ids and last change, and the site's
    address (in every event), the person's today (the window moves with it) and time zone (a timed event's
    start is in it). A task that leaves the feed
    changes the count or the ids; one that changes, or joins it, the last change."""
    state = _feed_tasks(user).aggregate(count=Count("pk"), ids=Sum("pk"), changed=Max("updated_at"))
    today = person_today(user=user)
    seen = f"{state['count']}:{state['ids']}:{state['changed']}:{settings.SITE_URL}:{MAX_EVENTS}:{today}"
    seen += f":{user.timezone}"
    return hashlib.sha256(seen.encode()).hexdigest()[:32]


def calendar_feed_ics(*, user: User) -> bytes:
    """The person's open tasks due within the window (WINDOW_DAYS_BEFORE their today to WINDOW_DAYS_AFTER), the
    soonest MAX_EVENTS: each an all-day event on its date, or, due at a time, a half-hour event then in the
    person's zone (VEVENTs: every calendar app shows those, where VTODO is ignored by Google Calendar and
    Outlook). The window is said in the calendar's description."""
    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//Tasklift//Tasks//EN")
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", "Tasklift")
    calendar.add("x-wr-caldesc", f"Your open Tasklift tasks {WINDOW_WORDS}.")
    calendar.add("x-published-ttl", "PT1H")  # how often to fetch again, for the apps that read it
    calendar.add("refresh-interval", timedelta(hours=1), parameters={"VALUE": "DURATION"})
    tasks = _feed_tasks(user).order_by("due_date", "due_time", "pk")
    domain = _domain()
    zone = person_zone(user)
    for task in tasks[:MAX_EVENTS]:
        assert task.due_date is not None
        event = icalendar.Event()
        event.add("uid", f"task-{task.pk}@{domain}")
        # When the task last changed, not the time of the fetch (RFC 5545 3.8.7.2, for a calendar without a
        # METHOD): the same tasks give the same bytes, so that the feed's ETag holds between fetches.
        event.add("dtstamp", task.updated_at)
        event.add("last-modified", task.updated_at)
        if task.due_time is not None:  # at its time in the person's zone, for half an hour
            start = datetime.combine(task.due_date, task.due_time, tzinfo=zone)
            event.add("dtstart", start)
            event.add("dtend", start + timedelta(minutes=TIMED_EVENT_MINUTES))
        else:
            event.add("dtstart", task.due_date)
            event.add("dtend", task.due_date + timedelta(days=1))
        reminder = getattr(task, "reminder", None)
        if reminder is not None and task.due_time is not None:  # the calendar app rings too, as Tasklift does
            alarm = icalendar.Alarm()
            alarm.add("action", "DISPLAY")
            alarm.add("description", task.title)
            alarm.add("trigger", timedelta(minutes=-reminder.minutes_before))
            event.add_component(alarm)
        if task.repeat_rule:  # the days it comes round again; Done makes the next task, which carries it on
            event.add("rrule", icalendar.vRecur.from_ical(task.repeat_rule))
        event.add("summary", task.title)
        event.add("transp", "TRANSPARENT")  # a due date does not make the person busy
        opens = f"{settings.SITE_URL}/tasks/{task.pk}"  # the task on a page of its own
        event.add("url", opens)
        description = [f"Due in Tasklift: {opens}"]
        if task.email_subject:
            description.insert(0, f"From the email “{task.email_subject}”")
        event.add("description", "\n".join(description))
        calendar.add_component(event)
    return bytes(calendar.to_ical())
