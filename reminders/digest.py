"""The morning digest: one email a day, in each person's time zone, for those who turned it on, saying what
is due today, what is overdue, what is back from snooze, and which waiting items newly went past their date
without an answer. Nothing is sent on a day with nothing to say.

At most one a day per person, whatever the number of workers and restarts: the person and their date are a
unique row (`DigestDay`) written in the transaction that sends. A second sender at the same moment waits on
that row and finds it taken; a sender that dies before its commit leaves no row, so the next scan sends. A
copy is possible only if the mail server took the message and the commit then failed; the message's
Message-ID is the same for the day, so a receiving server may drop it even then."""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.db.models import Max, Q, QuerySet
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from reminders.models import DigestDay, DigestSubscription
from tasks.models import Task
from tasks.snooze import person_now

logger = logging.getLogger(__name__)

MAX_TASKS_PER_SECTION = 20  # then "and N more": the list is one click away
UNSUBSCRIBE_SALT = "reminders.digest.unsubscribe"


@dataclass
class Digest:
    user: User
    day: date
    overdue: list[Task] = field(default_factory=list)
    due_today: list[Task] = field(default_factory=list)
    back_today: list[Task] = field(default_factory=list)
    waiting_past_due: list[Task] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _bounded(tasks: QuerySet[Task]) -> tuple[list[Task], int]:
    return list(tasks[:MAX_TASKS_PER_SECTION]), tasks.count()


def digest_for(*, user: User, day: date) -> Digest:
    """What the person's digest of `day` (their date) says. Snoozed tasks are left out until their date."""
    shown = Task.objects.filter(user=user, status=Task.Status.OPEN).exclude(snoozed_until__gt=day)
    asks = shown.exclude(kind=Task.Kind.WAITING)
    # "Newly" past due: since the person's last digest (that day's items were due today then), or yesterday.
    last = DigestDay.objects.filter(user=user, day__lt=day).aggregate(last=Max("day"))["last"]
    since = last or day - timedelta(days=1)
    digest = Digest(user=user, day=day)
    sections = {
        "overdue": asks.filter(due_date__lt=day).order_by("due_date", "pk"),
        "due_today": asks.filter(due_date=day).order_by("pk"),
        "back_today": shown.filter(snoozed_until=day)
        .exclude(Q(due_date__lte=day) & ~Q(kind=Task.Kind.WAITING))  # already listed as due
        .order_by("due_date", "pk"),
        "waiting_past_due": shown.filter(kind=Task.Kind.WAITING, due_date__gte=since, due_date__lt=day).order_by(
            "due_date", "pk"
        ),
    }
    for name, tasks in sections.items():
        listed, count = _bounded(tasks)
        setattr(digest, name, listed)
        digest.counts[name] = count
    return digest


def unsubscribe_link_make(*, user: User) -> str:
    """The signed link that turns the person's digest off without logging in (it lasts DIGEST_UNSUBSCRIBE_DAYS).
    The signature travels as `token=`, which the logs redact (config/logfilters.py)."""
    token = signing.dumps({"u": user.pk}, salt=UNSUBSCRIBE_SALT)
    return f"{settings.SITE_URL}{reverse('digest_unsubscribe')}?token={token}"


class UnsubscribeLinkInvalid(Exception):
    pass


class UnsubscribeLinkExpired(UnsubscribeLinkInvalid):
    pass


def unsubscribe_link_user(*, token: str) -> User:
    try:
        data = signing.loads(token, salt=UNSUBSCRIBE_SALT, max_age=timedelta(days=settings.DIGEST_UNSUBSCRIBE_DAYS))
    except signing.SignatureExpired:
        raise UnsubscribeLinkExpired from None
    except signing.BadSignature:
        raise UnsubscribeLinkInvalid from None
    user_id = data.get("u") if isinstance(data, dict) else None
    user = User.objects.filter(pk=user_id).first() if isinstance(user_id, int) else None
    if user is None:
        raise UnsubscribeLinkInvalid
    return user


def digest_set(*, user: User, enabled: bool) -> DigestSubscription:
    """Turn the person's digest on or off (Settings; the unsubscribe link turns it off)."""
    subscription, _ = DigestSubscription.objects.update_or_create(
        user=user, defaults={"enabled": enabled, "unsubscribed_at": None if enabled else timezone.now()}
    )
    return subscription


def digest_enabled(*, user: User) -> bool:
    return DigestSubscription.objects.filter(user=user, enabled=True).exists()


def _in_morning(local: datetime) -> bool:
    return settings.DIGEST_HOUR <= local.hour < settings.DIGEST_HOUR + settings.DIGEST_SEND_HOURS


def digest_people_due(*, now: datetime) -> list[tuple[User, date]]:
    """The people whose morning it is and whose digest of today (theirs) is not done yet."""
    people = User.objects.filter(
        is_active=True, email_verified_at__isnull=False, digest_subscription__enabled=True
    ).order_by("pk")
    due: list[tuple[User, date]] = []
    for user in people.iterator(chunk_size=500):
        local = person_now(user=user, now=now)
        if _in_morning(local):
            due.append((user, local.date()))
    done = set(
        DigestDay.objects.filter(user_id__in=[user.pk for user, _ in due], day__in={day for _, day in due}).values_list(
            "user_id", "day"
        )
    )
    return [(user, day) for user, day in due if (user.pk, day) not in done]


def _day_take(*, user: User, day: date, outcome: str) -> bool:
    """Insert the person's row of the day, or wait for the transaction that holds it and find it taken."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {DigestDay._meta.db_table} (user_id, day, outcome, tasks, created_at) "  # noqa: S608
            "VALUES (%s, %s, %s, 0, %s) ON CONFLICT (user_id, day) DO NOTHING RETURNING id",
            [user.pk, day, outcome, timezone.now()],
        )
        return cursor.fetchone() is not None


def _message(digest: Digest) -> EmailMessage:
    unsubscribe = unsubscribe_link_make(user=digest.user)
    context = {
        "digest": digest,
        "site_url": settings.SITE_URL,
        "settings_url": settings.SITE_URL + reverse("settings"),
        "unsubscribe_url": unsubscribe,
    }
    counts = digest.counts
    parts = [
        f"{counts['due_today']} due today" if counts["due_today"] else "",
        f"{counts['overdue']} overdue" if counts["overdue"] else "",
        f"{counts['back_today']} back from snooze" if counts["back_today"] else "",
        f"{counts['waiting_past_due']} waiting past due" if counts["waiting_past_due"] else "",
    ]
    subject = "Tasklift today: " + ", ".join(p for p in parts if p)  # our words and numbers only, one line
    domain = settings.SITE_URL.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "tasklift.localhost"
    return EmailMessage(
        subject=subject,
        body=render_to_string("reminders/email/digest.txt", context),
        to=[digest.user.email],
        headers={
            # RFC 8058: a mail client's own "Unsubscribe" button POSTs to the link, no login, no page.
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
            "Message-ID": f"<digest-{digest.user.pk}-{digest.day:%Y%m%d}@{domain}>",
        },
    )


def digest_send(*, user: User, day: date) -> str | None:
    """Send the person's digest of `day` unless it is done: 'sent', 'empty' (nothing to say, nothing sent),
    or None (done already, by this or another sender). A mail server that refuses leaves the day to the
    next scan (the transaction rolls back)."""
    try:
        with transaction.atomic():
            if not _day_take(user=user, day=day, outcome=DigestDay.Outcome.EMPTY):
                return None
            digest = digest_for(user=user, day=day)
            if not digest.total:
                return DigestDay.Outcome.EMPTY
            _message(digest).send()
            DigestDay.objects.filter(user=user, day=day).update(outcome=DigestDay.Outcome.SENT, tasks=digest.total)
            return DigestDay.Outcome.SENT
    except (smtplib.SMTPException, OSError) as error:
        logger.error("digest of user=%s not sent, tried again at the next scan: %s", user.pk, type(error).__name__)
        return None


def digest_send_due(*, now: datetime | None = None) -> dict[str, int]:
    """Beat's scan: the digest of everyone whose morning it is. Returns how many were sent and empty."""
    result = {"sent": 0, "empty": 0, "skipped": 0}
    for user, day in digest_people_due(now=now or timezone.now()):
        outcome = digest_send(user=user, day=day)
        result[outcome or "skipped"] += 1
    return result
