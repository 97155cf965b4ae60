from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from config.models import TimeStampedModel


class Integration(TimeStampedModel):
    """A connected mailbox. Its credentials are encrypted at rest and never shown."""

    class Provider(models.TextChoices):
        GMAIL = "gmail", "Gmail"
        OUTLOOK = "outlook", "Outlook"
        IMAP = "imap", "IMAP"
        # The person's forward-to address (integrations/inbound): mail they forward there, stored on arrival
        # (InboundMessage) and read like a mailbox's. Not a mailbox they connect: no credentials, no push.
        FORWARD = "forward", "Forwarding address"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        NEEDS_REAUTH = "needs_reauth", "Needs reconnecting"
        DISCONNECTED = "disconnected", "Disconnected"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="integrations")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    account_address = models.EmailField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    credentials_encrypted = models.TextField(blank=True, editable=False)
    # Message ids listed once at connect time (recent inbox mail), handled by the next run and cleared in
    # the same transaction that commits the cursor.
    backfill_pending = models.JSONField(default=list, blank=True)
    # Of those, the ids a person asked to have read even though the bulk rule skipped them ("read this one").
    read_anyway = models.JSONField(default=list, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    failure_count = models.PositiveIntegerField(default=0)
    retry_after = models.DateTimeField(null=True, blank=True)
    last_error_code = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)
    # The last automatic resync (an expired cursor, or one of another query): when, from when mail was
    # read again, and how many emails of that window were not read (over the resync bound).
    resynced_at = models.DateTimeField(null=True, blank=True)
    resync_reason = models.CharField(max_length=16, blank=True)  # "expired" or "query_changed"
    resynced_since = models.DateTimeField(null=True, blank=True)
    resync_not_read = models.PositiveIntegerField(default=0)
    # Push and polling (integrations/push.py, extraction/jobs.py): when the provider last rang the doorbell,
    # when the polling scan last claimed the mailbox, and how many throttles in a row (the backoff's step).
    notified_at = models.DateTimeField(null=True, blank=True)
    polled_at = models.DateTimeField(null=True, blank=True)
    throttle_count = models.PositiveIntegerField(default=0)
    # Polling by need (extraction/scheduling.py): when the scan next looks at the mailbox, when an idle check
    # last asked the provider, the mailbox's own time between rings, and when a check found mail push missed.
    next_check_at = models.DateTimeField(default=timezone.now, db_default=Now())
    checked_at = models.DateTimeField(null=True, blank=True)
    ring_gap_s = models.FloatField(null=True, blank=True)
    push_missed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "provider", "account_address"], name="one_integration_per_mailbox")
        ]
        indexes = [
            # The admin's searches by a mailbox's address (its own list, and the ledger's).
            models.Index(fields=["account_address"], name="integration_address"),
            # The scan's claim: the due active mailboxes, oldest first, without reading the others.
            models.Index(fields=["next_check_at"], condition=models.Q(status="active"), name="integration_due"),
        ]
        ordering = ("provider", "account_address")
        verbose_name = "mailbox"
        verbose_name_plural = "mailboxes"

    def __str__(self) -> str:
        return f"{self.get_provider_display()} {self.account_address}"


class SyncCursor(models.Model):
    """Where incremental sync of one mailbox stands, for one purpose. A cursor is a promise: every email
    before it has been durably handled (DESIGN §1)."""

    class Purpose(models.TextChoices):
        TASK_EXTRACTION = "task_extraction", "Task extraction"
        # What the person sent (Gmail's SENT label, Graph's sentitems): their promises and what they wait for.
        # Made and read only while their consent covers Sent mail (accounts/consent.py SENT_SINCE).
        SENT_MAIL = "sent_mail", "Sent mail"
        # What the person forwarded to their forward-to address (InboundMessage): its cursor is the stored
        # queue itself (FORWARD_CURSOR), and the commit deletes from it what the run handled.
        FORWARDED = "forwarded", "Forwarded mail"

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="cursors")
    purpose = models.CharField(max_length=32, choices=Purpose.choices, default=Purpose.TASK_EXTRACTION)
    value = models.TextField()  # Gmail historyId or Graph delta link; "" for Sent mail not read yet (FIRST_READ)
    filter_hash = models.CharField(max_length=64)  # the query the cursor belongs to
    generation = models.PositiveIntegerField(default=1)  # bumped on every full resync
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["integration", "purpose"], name="one_cursor_per_purpose")]

    def __str__(self) -> str:
        return f"{self.integration} {self.purpose} gen {self.generation}"

    @property
    def folder(self) -> Literal["inbox", "sent"]:
        """The mailbox folder this cursor follows (integrations.providers.base.Folder)."""
        return "sent" if self.purpose == self.Purpose.SENT_MAIL else "inbox"


# The value of a Sent cursor made at connect or at consent, before its first read: the run's first read
# lists the last MAIL_SENT_BACKFILL_DAYS of Sent mail from the cursor's creation, and gives the first position.
FIRST_READ = ""


class PushChannel(TimeStampedModel):
    """How a mailbox rings the doorbell: a Gmail watch (Pub/Sub push) or a Graph subscription. A
    notification only says "read this mailbox"; the cursor-driven run does the reading (DESIGN §2)."""

    integration = models.OneToOneField(Integration, on_delete=models.CASCADE, related_name="push_channel")
    # The Graph subscription id (a notification names it); for Gmail, the watched topic.
    external_id = models.CharField(max_length=255, db_index=True)
    secret_encrypted = models.TextField(blank=True, editable=False)  # Graph clientState, encrypted
    expires_at = models.DateTimeField()
    # Graph only, while the mailbox's Sent mail is read: the subscription on its sentitems folder, with the same
    # clientState, renewed and checked with the inbox's (a Gmail watch covers both labels in one).
    sent_external_id = models.CharField(max_length=255, blank=True, db_index=True)
    sent_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = "push channel"

    def __str__(self) -> str:
        return f"push {self.integration} until {self.expires_at:%Y-%m-%d %H:%M}"


# The cursor of forwarded mail: the queue of stored messages is its own position (what is stored is unread; the
# commit that writes a message's ledger row deletes it), so the value never changes.
FORWARD_CURSOR = "stored"


class InboundMessage(models.Model):
    """A message sent to a forward-to address, committed before the sender is told it was taken (SMTP's 250,
    the webhook's 200), until a run handles it. `key` is its ledger id: a retried delivery is the same row."""

    class Via(models.TextChoices):
        SMTP = "smtp", "SMTP"
        WEBHOOK = "webhook", "Webhook"

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="inbound")
    key = models.CharField(max_length=600)  # "<Message-ID>#<SHA-256 of the raw message, 32 hex>"
    raw = models.BinaryField()
    size = models.PositiveIntegerField()
    envelope_from = models.CharField(max_length=320, blank=True)
    via = models.CharField(max_length=8, choices=Via.choices)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["integration", "key"], name="inbound_once")]
        # The queue's age (/metrics): the oldest message still stored.
        indexes = [models.Index(fields=["received_at"], name="inbound_received")]
        verbose_name = "forwarded email waiting"
        verbose_name_plural = "forwarded emails waiting"

    def __str__(self) -> str:
        return f"{self.integration_id} {self.key[:60]}"


class ForwardSender(models.Model):
    """An address the person added as theirs, from which mail to their forward-to address is taken once
    confirmed (by a link sent to it). Their account's address and their mailboxes' need no confirmation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="forward_senders")
    address = models.EmailField()  # lower-cased
    confirmed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "address"], name="forward_sender_once")]
        ordering = ("address",)

    def __str__(self) -> str:
        return f"{self.user_id} {self.address}"
