"""What reminds a person of their tasks where they already look: the morning digest email (their choice, and
the record of each day's send) and private calendar feeds."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models

from config.models import TimeStampedModel

# A subscription's `due_at` when it is to be looked at by the next scan, whatever the clock says (turned on,
# or the person's time zone changed): the chunk that claims it works out the person's next morning.
LOOK_AT_ONCE = datetime(2000, 1, 1, tzinfo=UTC)


def leased(now: datetime) -> models.Q:
    """Subscriptions a digest chunk holds now (`due_at` a lease ahead, reminders/digest.py `_claim`). A change
    of the person's (a time zone, the digest turned on again) leaves their `due_at` to that chunk: made due at
    once, a second chunk would claim them beside the first and both could send."""
    return models.Q(due_at__gt=now, due_at__lte=now + timedelta(seconds=settings.DIGEST_CHUNK_LEASE_SECONDS))


def unsubscribe_key_new() -> str:
    return secrets.token_urlsafe(24)


class DigestSubscription(TimeStampedModel):
    """A person's choice about the morning digest: off until they turn it on in Settings, off again by the
    email's unsubscribe link.

    `unsubscribe_key` is what the unsubscribe link names (signed, reminders/digest.py) in place of the person:
    random, so the link shows no id, and renewed each time the digest is turned on again, so the links of the
    emails before then stop working.

    `due_at` is when the digest is next looked at (DIGEST_HOUR of the person's next morning, in their zone;
    a lease on while a chunk holds it): beat claims the due ones by it (reminders/digest.py)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="digest_subscription"
    )
    enabled = models.BooleanField(default=False)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    unsubscribe_key = models.CharField(max_length=64, unique=True, default=unsubscribe_key_new)
    due_at = models.DateTimeField(default=LOOK_AT_ONCE)

    class Meta:
        indexes = [models.Index(fields=["due_at"], condition=models.Q(enabled=True), name="digest_due")]

    def __str__(self) -> str:
        return f"digest of {self.user_id} {'on' if self.enabled else 'off'}"


class DigestDay(models.Model):
    """One person's digest of one day of theirs (the idempotency key: person and local date, unique in the
    database). The row is written in the same transaction as the send, so a sender that dies before it
    commits leaves no row and another sends; two senders at once wait on each other's row and one sends."""

    class Outcome(models.TextChoices):
        SENT = "sent", "Sent"
        EMPTY = "empty", "Nothing to say"  # nothing due: no email, and the day is not looked at again
        FAILED = "failed", "Mail server refused"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="digest_days")
    day = models.DateField()  # the person's date, in their time zone
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    tasks = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="one_digest_per_person_and_day")]
        ordering = ("-day",)

    def __str__(self) -> str:
        return f"digest of {self.user_id} on {self.day}: {self.outcome}"


class CalendarFeed(models.Model):
    """A private iCalendar feed of a person's dated open tasks. Only the SHA-256 of its secret is kept: the
    URL is shown once, when it is made; revoking it makes the URL answer 404."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_feeds")
    secret_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16)  # the first characters, so a person can tell feeds apart
    created_at = models.DateTimeField(auto_now_add=True)
    last_fetched_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"calendar feed {self.prefix}… of {self.user_id}"


def not_rung() -> models.Q:
    """Reminders not yet rung for their time: the claim's condition, and its index's (the same expression, so
    that the planner sees the index serves it; rung ones, months of them, are not in it)."""
    return models.Q(sent_for__isnull=True) | ~models.Q(sent_for=models.F("remind_at"))


class Reminder(models.Model):
    """A task's reminder: `minutes_before` its due time (0: at the time), by email and, where the person has
    subscribed a browser, by Web Push (reminders/ring.py).

    `remind_at` is when it rings (UTC), worked out from the task's date and time in the person's zone whenever
    those change (None while the task has no time). `sent_for` is the `remind_at` it last rang for: once per
    task and time (a time moved later rings again at the new one). `lease_until`: a sender holds it until then."""

    task = models.OneToOneField("tasks.Task", on_delete=models.CASCADE, primary_key=True, related_name="reminder")
    minutes_before = models.PositiveIntegerField(default=0)
    remind_at = models.DateTimeField(null=True, blank=True)
    sent_for = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["remind_at"], condition=models.Q(remind_at__isnull=False) & not_rung(), name="reminder_due"
            )
        ]

    def __str__(self) -> str:
        return f"reminder of task {self.task_id} at {self.remind_at}"


class PushSubscription(models.Model):
    """A browser a person turned notifications on in (Web Push, RFC 8030): the push service's `endpoint` the
    browser gave, and its keys (`p256dh`, `auth`, encrypted at rest: config/crypto.py), which reminders are
    encrypted to (RFC 8291). One per endpoint; dropped when the push service answers 404 or 410 (the browser
    let it go) or the person turns it off."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions")
    endpoint = models.URLField(max_length=2000, unique=True)
    keys_encrypted = models.TextField()
    label = models.CharField(max_length=100, blank=True)  # "Chrome on Linux", for the person to tell them apart
    created_at = models.DateTimeField(auto_now_add=True)
    last_pushed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"push subscription {self.pk} of {self.user_id}"
