"""The morning digest: one email a day, in each person's time zone, for those who turned it on, saying what
is due today, what is overdue, what is back from snooze, and which waiting items newly went past their date
without an answer. Nothing is sent on a day with nothing to say.

It fans out like the mailbox scan. Each subscription carries `due_at`, the next moment its digest is to be
looked at (DIGEST_HOUR of the person's next morning, in their zone). Beat's job counts who is due and sends
one chunk job per DIGEST_CHUNK of them; a chunk job claims up to DIGEST_CHUNK due people in one statement
(FOR UPDATE SKIP LOCKED, moving their `due_at` a lease on, so no other job takes them meanwhile), reads
their tasks in a constant number of statements whatever the chunk's size, renders and sends each person's
mail, and records the chunk's days (`DigestDay`, unique per person and day) and next mornings in two.

Nobody without a digest, nobody with two, whatever the workers and kills: the moment a mail server takes a
person's mail, that is written to Redis (one command, `_journal`); a chunk killed before it recorded its days
leaves its people due again when the lease ends, and the job that claims them then records the journalled
ones as sent without sending them again and sends the rest. A kill exactly between the mail server's yes and
the journal falls on the side of a second copy, never of none: a morning reminder that never comes is the
failure a person cannot see, while a copy is seen, and has the same Message-ID (one per person and day), so
receiving servers that drop repeated Message-IDs drop it. A chunk never sends past its lease: what it has not
reached by then it gives back."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from typing import Any
from zoneinfo import ZoneInfo

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.mail import EmailMessage, EmailMultiAlternatives, get_connection
from django.db import connection, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from extraction.crashpoints import crash_point
from reminders.models import LOOK_AT_ONCE, DigestDay, DigestSubscription, leased, unsubscribe_key_new
from tasks.models import Task
from tasks.snooze import person_zone

logger = logging.getLogger(__name__)

MAX_TASKS_PER_SECTION = 20  # then "and N more": the list is one click away
UNSUBSCRIBE_SALT = "reminders.digest.unsubscribe"  # its own: a value signed for another purpose is refused
SECTIONS = ("overdue", "due_today", "back_today", "waiting_past_due")
JOURNAL_DAYS = 3  # a journal entry outlives any lease and the morning it is of


@dataclass
class Digest:
    user: User
    day: date
    overdue: list[Task] = field(default_factory=list)
    due_today: list[Task] = field(default_factory=list)
    back_today: list[Task] = field(default_factory=list)
    waiting_past_due: list[Task] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SECTIONS, 0))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class DigestDue:
    """A person whose digest of `day` (their date) is to be made: `since` is the day of their last digest
    before it (or the day before), from which waiting items are "newly" past their date."""

    user: User
    day: date
    since: date
    unsubscribe_key: str


# Each section's condition on a task `t` of a person `p` (whose day is p.day): open, and not snoozed past the
# day, as the list shows it; asks (not waiting items) overdue or due today; back from snooze today unless
# listed as due; waiting items whose date went by since the last digest. One task may be in two sections
# (a waiting item back today and past its date), as the list would show it twice.
_SECTIONS_SQL = """
WITH people AS (
    SELECT * FROM unnest(%(users)s::bigint[], %(days)s::date[], %(sinces)s::date[]) AS p(user_id, day, since)
), listed AS (
    SELECT t.id, s.section,
           row_number() OVER (PARTITION BY t.user_id, s.section ORDER BY t.due_date NULLS LAST, t.id) AS place,
           count(*) OVER (PARTITION BY t.user_id, s.section) AS total
    FROM people p
    JOIN {tasks} t ON t.user_id = p.user_id AND t.status = %(open)s
         AND (t.snoozed_until IS NULL OR t.snoozed_until <= p.day)
    CROSS JOIN LATERAL (VALUES
        ('overdue', t.kind <> %(waiting)s AND t.due_date < p.day),
        ('due_today', t.kind <> %(waiting)s AND t.due_date = p.day),
        ('back_today', t.snoozed_until = p.day
                       AND (t.due_date IS NULL OR t.due_date > p.day OR t.kind = %(waiting)s)),
        ('waiting_past_due', t.kind = %(waiting)s AND t.due_date >= p.since AND t.due_date < p.day)
    ) AS s(section, holds)
    WHERE s.holds
)
SELECT t.*, listed.section AS digest_section, listed.total AS digest_total
FROM listed JOIN {tasks} t ON t.id = listed.id
WHERE listed.place <= %(most)s
ORDER BY t.user_id, listed.section, listed.place
"""


def digests_for(people: Iterable[DigestDue]) -> dict[int, Digest]:
    """What each person's digest of their day says, in one statement however many people: each section's
    first MAX_TASKS_PER_SECTION tasks and its count. Snoozed tasks are left out until their date."""
    people = list(people)
    digests = {due.user.pk: Digest(user=due.user, day=due.day) for due in people}
    if not people:
        return digests
    sql = _SECTIONS_SQL.format(tasks=Task._meta.db_table)
    params = {
        "users": [due.user.pk for due in people],
        "days": [due.day for due in people],
        "sinces": [due.since for due in people],
        "open": Task.Status.OPEN,
        "waiting": Task.Kind.WAITING,
        "most": MAX_TASKS_PER_SECTION,
    }
    for task in Task.objects.raw(sql, params):
        digest, section = digests[task.user_id], str(getattr(task, "digest_section"))  # noqa: B009 (the query's)
        getattr(digest, section).append(task)
        digest.counts[section] = int(getattr(task, "digest_total"))  # noqa: B009
    return digests


def _unsubscribe_signer() -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=UNSUBSCRIBE_SALT)


def _unsubscribe_link(key: str) -> str:
    token = _unsubscribe_signer().sign(key)
    return f"{settings.SITE_URL}{reverse('digest_unsubscribe')}?token={token}"


def unsubscribe_link_make(*, user: User) -> str:
    """The link that turns the person's digest off without logging in: their row's random key, signed with
    the time (it lasts DIGEST_UNSUBSCRIBE_DAYS from this email). It names no one: the key is not the id, and
    a signed value of any other purpose of the site (another salt) is refused. The signature travels as
    `token=`, which the logs redact (config/logfilters.py)."""
    subscription, _ = DigestSubscription.objects.get_or_create(user=user)
    return _unsubscribe_link(subscription.unsubscribe_key)


class UnsubscribeLinkInvalid(Exception):
    """Not a link Tasklift made: cut short, changed, or a signed value of another purpose."""


class UnsubscribeLinkExpired(UnsubscribeLinkInvalid):
    pass


class UnsubscribeLinkReplaced(UnsubscribeLinkInvalid):
    """Ours, but from an older email: the digest was turned on again since (a new key), or the link is of
    the format before issue 32, which carried the person's id (same salt, so it unsigns, and names no key)."""


def unsubscribe_link_subscription(*, token: str) -> DigestSubscription:
    """The digest choice that the link of an email turns off, or UnsubscribeLink{Invalid,Expired,Replaced}."""
    try:
        key = _unsubscribe_signer().unsign(token, max_age=timedelta(days=settings.DIGEST_UNSUBSCRIBE_DAYS))
    except signing.SignatureExpired:
        raise UnsubscribeLinkExpired from None
    except signing.BadSignature:
        raise UnsubscribeLinkInvalid from None
    subscription = DigestSubscription.objects.select_related("user").filter(unsubscribe_key=key).first()
    if subscription is None:
        raise UnsubscribeLinkReplaced
    return subscription


def digest_set(*, user: User, enabled: bool) -> DigestSubscription:
    """Turn the person's digest on or off (Settings; the unsubscribe link turns it off). Turning it on again
    after it was off gives the row a new key, so that no unsubscribe link of an earlier email works any more;
    saving the choice it already has changes nothing (the links of recent emails keep working)."""
    with transaction.atomic():
        subscription, created = DigestSubscription.objects.select_for_update().get_or_create(
            user=user, defaults={"enabled": enabled, "unsubscribed_at": None if enabled else timezone.now()}
        )
        if created or subscription.enabled == enabled:
            return subscription
        subscription.enabled = enabled
        if enabled:
            subscription.unsubscribe_key = unsubscribe_key_new()
            subscription.unsubscribed_at = None
            # Off and on again while a chunk holds the row: its `due_at` stays that chunk's (models.leased).
            held = DigestSubscription.objects.filter(leased(timezone.now()), pk=subscription.pk).exists()
            subscription.due_at = subscription.due_at if held else LOOK_AT_ONCE
        else:
            subscription.unsubscribed_at = timezone.now()
        subscription.save(update_fields=["enabled", "unsubscribe_key", "unsubscribed_at", "due_at", "updated_at"])
    return subscription


def digest_enabled(*, user: User) -> bool:
    return DigestSubscription.objects.filter(user=user, enabled=True).exists()


def _morning(zone: ZoneInfo, day: date) -> datetime:
    """DIGEST_HOUR of `day` in the zone, as an aware time (a DST gap moves it the way zoneinfo does)."""
    return datetime.combine(day, clock_time(settings.DIGEST_HOUR), tzinfo=zone)


def _in_morning(local: datetime) -> bool:
    return settings.DIGEST_HOUR <= local.hour < settings.DIGEST_HOUR + settings.DIGEST_SEND_HOURS


def _due(*, user: User, day: date, last: date | None, unsubscribe_key: str = "") -> DigestDue:
    return DigestDue(user=user, day=day, since=last or day - timedelta(days=1), unsubscribe_key=unsubscribe_key)


@dataclass
class _Claimed:
    user: User
    unsubscribe_key: str
    local: datetime
    reachable: bool  # active, with a verified address
    next_at: datetime  # when the person's digest is looked at next, once this chunk is recorded


def _claim(*, now: datetime, limit: int) -> list[_Claimed]:
    """Claim up to `limit` people whose digest is due, in one statement: their `due_at` moves a lease on
    (DIGEST_CHUNK_LEASE_SECONDS), so no other chunk takes them until this one recorded them or died."""
    subscriptions, users = DigestSubscription._meta.db_table, User._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH due AS (
                SELECT user_id FROM {subscriptions}
                WHERE enabled AND due_at <= %(now)s
                ORDER BY due_at, user_id LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED
            )
            UPDATE {subscriptions} s SET due_at = %(lease)s
            FROM due JOIN {users} u ON u.id = due.user_id
            WHERE s.user_id = due.user_id
            RETURNING u.id, u.email, u.timezone, u.is_active AND u.email_verified_at IS NOT NULL, s.unsubscribe_key
            """,  # noqa: S608 (table names are ours; every value is a parameter)
            {"now": now, "limit": limit, "lease": now + timedelta(seconds=settings.DIGEST_CHUNK_LEASE_SECONDS)},
        )
        rows = cursor.fetchall()
    claimed = []
    for user_id, email, zone_name, reachable, key in sorted(rows):  # in the order claimed
        user = User(pk=user_id, email=email, timezone=zone_name)
        zone = person_zone(user)
        local = now.astimezone(zone)
        if local.hour < settings.DIGEST_HOUR:  # its zone changed to one whose morning is still to come
            next_at = _morning(zone, local.date())
        else:
            next_at = _morning(zone, local.date() + timedelta(days=1))
        claimed.append(_Claimed(user=user, unsubscribe_key=key, local=local, reachable=reachable, next_at=next_at))
    return claimed


def _last_days(people: list[tuple[int, date]]) -> dict[int, tuple[date | None, bool]]:
    """For each (person, day): the day of their last digest before it, and whether that day's is done."""
    if not people:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT p.user_id, max(d.day) FILTER (WHERE d.day < p.day), bool_or(d.day = p.day)
            FROM unnest(%s::bigint[], %s::date[]) AS p(user_id, day)
            JOIN {DigestDay._meta.db_table} d ON d.user_id = p.user_id AND d.day <= p.day
            GROUP BY p.user_id
            """,  # noqa: S608
            [[u for u, _ in people], [d for _, d in people]],
        )
        return {int(user_id): (last, bool(done)) for user_id, last, done in cursor.fetchall()}


def _journal_key(user_id: int, day: date) -> str:
    return f"digest-sent:{user_id}:{day:%Y%m%d}"


def _journal(user_id: int, day: date) -> bool:
    """Write down in Redis that the person's mail of the day was taken by the mail server. False if Redis
    could not be told: the caller then records the day in PostgreSQL at once."""
    try:
        cache.set(_journal_key(user_id, day), 1, timeout=JOURNAL_DAYS * 86400)
    except Exception:  # the cache raises its client's errors; the mail is sent, so the day must be recorded
        logger.warning("digest of user=%s sent, journal unreachable: recorded at once", user_id)
        return False
    return True


# Each section as the mail shows it: the person's own first, then what they wait for, apart.
_SECTION_WORDS = (
    ("due_today", "Due today", "#047857", False),
    ("overdue", "Overdue", "#b91c1c", True),
    ("back_today", "Back from snooze", "#374151", False),
    ("waiting_past_due", "Still waiting, past the date", "#92400e", True),
)


def _message(digest: Digest, unsubscribe_key: str) -> EmailMessage:
    """The digest as a multipart mail: its text, and HTML with inline styles beside it; every task a link to its
    own page (tasks/<id>), with its sender, its due date and time."""
    unsubscribe = _unsubscribe_link(unsubscribe_key)
    context = {
        "sections": [
            {
                "heading": heading,
                "colour": colour,
                "late": late,
                "tasks": getattr(digest, name),
                "count": digest.counts[name],
            }
            for name, heading, colour, late in _SECTION_WORDS
        ],
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
    message = EmailMultiAlternatives(
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
    message.attach_alternative(render_to_string("reminders/email/digest.html", context), "text/html")
    return message


def _record(days: list[DigestDay], next_at: dict[int, datetime]) -> None:
    """The chunk's days and each person's next look, in two statements and one transaction."""
    with transaction.atomic():
        if days:
            DigestDay.objects.bulk_create(days, ignore_conflicts=True)
        if next_at:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"""
                    UPDATE {DigestSubscription._meta.db_table} s SET due_at = n.due_at
                    FROM unnest(%s::bigint[], %s::timestamptz[]) AS n(user_id, due_at)
                    WHERE s.user_id = n.user_id
                    """,  # noqa: S608
                    [list(next_at), list(next_at.values())],
                )


def digest_chunk(*, now: datetime | None = None, limit: int | None = None) -> dict[str, int]:
    """Claim one chunk of the people whose digest is due and handle it: 'sent', 'empty' (nothing to say,
    nothing sent), 'skipped' (not their morning, or done already), 'failed' (the mail server refused: looked
    at again at the next scan), 'claimed' (all of them; 0 when nobody is due)."""
    now = now or timezone.now()
    started = time.monotonic()
    result = dict.fromkeys(("claimed", "sent", "empty", "skipped", "failed"), 0)
    claimed = _claim(now=now, limit=limit or settings.DIGEST_CHUNK)
    result["claimed"] = len(claimed)
    if not claimed:
        return result
    # Not active or no verified address, or not their morning (past it: a worker down all morning skips
    # the day rather than send a "morning" digest at night): nothing sent, looked at again at `next_at`.
    mornings = [c for c in claimed if c.reachable and _in_morning(c.local)]
    in_morning = {c.user.pk for c in mornings}
    state = _last_days([(c.user.pk, c.local.date()) for c in mornings])
    try:
        journal = cache.get_many([_journal_key(c.user.pk, c.local.date()) for c in mornings]) if mornings else {}
    except Exception:  # Redis out of reach: a journalled person gets a second copy, nobody none (the side chosen)
        logger.warning("digest journal unreachable: a chunk of %s sends without it", len(mornings))
        journal = {}
    # Each person's next look, once their outcome is known: one a failure leaves unreached keeps the lease, and
    # is due again when it ends (never moved on to tomorrow without a digest).
    next_at: dict[int, datetime] = {}
    days: list[DigestDay] = []
    to_make: list[tuple[_Claimed, DigestDue]] = []
    for c in claimed:
        day = c.local.date()
        last, done = state.get(c.user.pk, (None, False))
        if c.user.pk not in in_morning or done:
            next_at[c.user.pk] = c.next_at
            result["skipped"] += 1
        elif _journal_key(c.user.pk, day) in journal:  # sent by a chunk that died before it recorded
            days.append(DigestDay(user_id=c.user.pk, day=day, outcome=DigestDay.Outcome.SENT))
            next_at[c.user.pk] = c.next_at
            result["sent"] += 1
        else:
            to_make.append((c, _due(user=c.user, day=day, last=last, unsubscribe_key=c.unsubscribe_key)))
    digests = digests_for(due for _, due in to_make)
    lease_end = settings.DIGEST_CHUNK_LEASE_SECONDS * 0.8  # seconds from the claim: the rest is given back
    mail_server: Any = None
    try:
        for c, due in to_make:
            digest = digests[c.user.pk]
            if not digest.total:
                days.append(DigestDay(user_id=c.user.pk, day=due.day, outcome=DigestDay.Outcome.EMPTY))
                next_at[c.user.pk] = c.next_at
                result["empty"] += 1
                continue
            if time.monotonic() - started > lease_end:
                next_at[c.user.pk] = now  # given back: due at once, for the next chunk
                result["skipped"] += 1
                continue
            try:
                mail_server = mail_server or get_connection()
                mail_server.send_messages([_message(digest, due.unsubscribe_key)])
                crash_point("digest_handed_over")
            except SoftTimeLimitExceeded:
                raise  # the job's time is up: whom it did not reach keep the lease and are due again after it
            except Exception as error:  # the mail server refused, or this person's mail cannot be made (an
                # address Django will not put in a header): the others of the chunk are not held back by it
                reason = type(error).__name__
                logger.error("digest of user=%s not sent, tried again at the next scan: %s", c.user.pk, reason)
                next_at[c.user.pk] = now + timedelta(seconds=settings.DIGEST_SCAN_SECONDS)
                result["failed"] += 1
                continue
            sent = DigestDay(user_id=c.user.pk, day=due.day, outcome=DigestDay.Outcome.SENT, tasks=digest.total)
            if _journal(c.user.pk, due.day):
                days.append(sent)
            else:
                _record([sent], {})
            crash_point("digest_journalled")
            next_at[c.user.pk] = c.next_at
            result["sent"] += 1
    finally:
        if mail_server is not None:
            mail_server.close()
        _record(days, next_at)
    return result


def digest_due_count(*, now: datetime | None = None, most: int) -> int:
    """How many people's digest is due (counting stops at `most`), from the index of due times."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {DigestSubscription._meta.db_table} "  # noqa: S608
            "WHERE enabled AND due_at <= %s LIMIT %s) AS due",
            [now or timezone.now(), most],
        )
        return int(cursor.fetchone()[0])


def digest_send_due(*, now: datetime | None = None, budget_s: float | None = None) -> dict[str, int]:
    """Chunk after chunk of the people whose digest is due, until nobody is or `budget_s` went by. Returns
    how many were claimed, sent, empty, skipped and failed."""
    started = time.monotonic()
    total = dict.fromkeys(("claimed", "sent", "empty", "skipped", "failed"), 0)
    while True:
        result = digest_chunk(now=now)
        for name, count in result.items():
            total[name] += count
        spent = time.monotonic() - started
        if result["claimed"] < settings.DIGEST_CHUNK or (budget_s is not None and spent > budget_s):
            return total
