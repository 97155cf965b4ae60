from __future__ import annotations

from django.conf import settings
from django.db import models

from config.models import TimeStampedModel


class ExtractionLease(models.Model):
    """One per user: who may run extraction now. `token` only grows, so a runner that lost its lease
    (expired, taken over) can tell, and can never commit a cursor."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True)
    token = models.BigIntegerField(default=0)
    run = models.ForeignKey("ExtractionRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    def __str__(self) -> str:
        return f"lease {self.user_id} #{self.token}"


# The error code of a run that lost Redis or PostgreSQL under it: queued again, sent by the reaper after its
# `retry_after` (extraction.services.extraction_runs_reap).
INTERRUPTED = "interrupted"


class ExtractionRun(TimeStampedModel):
    """One extraction run: the record a person reads of what was fetched, sent, created, and why it failed."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Extract now"
        API = "api", "API"
        SCHEDULE = "schedule", "Schedule"
        WEBHOOK = "webhook", "Webhook"
        ADMIN = "admin", "Admin"
        CONTINUATION = "continuation", "Continuation"
        RETRY = "retry", "Again after a stopped run"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        SKIPPED = "skipped", "Skipped"
        CONTINUED = "continued", "Continued"  # a slice of a backlog read; the next run takes the rest

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.SKIPPED, Status.CONTINUED)

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="extraction_runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    lease_token = models.BigIntegerField(null=True, blank=True)
    deliveries = models.PositiveIntegerField(default=0)  # times a runner took the lease for it (restarts count)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    emails_fetched = models.PositiveIntegerField(default=0)
    emails_already_done = models.PositiveIntegerField(default=0)
    emails_sent_to_llm = models.PositiveIntegerField(default=0)
    tasks_created = models.PositiveIntegerField(default=0)
    # Tasks Gemini gave whose sentence is not in their email (extraction.grounding): not written.
    tasks_ungrounded = models.PositiveIntegerField("tasks not kept (sentence not in the email)", default=0)
    # What the run's mail did to the conversations it belongs to (tasks/conversation.py, issue 22): items an
    # email closed, gave a new due date, or only suggested a change to (changed by hand before); new tasks of
    # kind commitment and waiting (also in tasks_created); item changes Gemini named that code refused (an id
    # not given to that email, a sentence not in it, no real date); and new items not written because their
    # sentence stands in an earlier item of the conversation. Database defaults too: older code inserts runs.
    items_closed = models.PositiveIntegerField(default=0, db_default=0)
    items_updated = models.PositiveIntegerField("items given a new due date", default=0, db_default=0)
    items_suggested = models.PositiveIntegerField("changes suggested (items changed by hand)", default=0, db_default=0)
    commitments_created = models.PositiveIntegerField(default=0, db_default=0)
    waiting_created = models.PositiveIntegerField("waiting items created", default=0, db_default=0)
    item_answers_refused = models.PositiveIntegerField("item changes refused", default=0, db_default=0)
    old_asks_skipped = models.PositiveIntegerField("old sentences not made new items", default=0, db_default=0)
    emails_quarantined = models.PositiveIntegerField(default=0)
    emails_cut = models.PositiveIntegerField(default=0)  # a sender, subject or body cut to fit the prompt
    emails_skipped = models.PositiveIntegerField(default=0)  # bulk mail not sent to Gemini (the bulk rule)
    secrets_redacted = models.PositiveIntegerField(default=0)  # codes, passwords, cards... kept out of prompts
    llm_calls = models.PositiveIntegerField(default=0)
    # extraction.prompt.PROMPT_VERSION when the run started ("" before it was recorded): token and task
    # figures are compared between runs of one prompt version.
    prompt_version = models.CharField(max_length=16, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # {integration id: {"provider", "address", "before", "after", "status", "error_code", "error"}}
    mailboxes = models.JSONField(default=dict, blank=True)
    # Answers from the LLM that were rejected by validation: [{"batch", "code", "message"}]
    rejections = models.JSONField(default=list, blank=True)
    # Gemini asked to wait (a 429 with a retry delay), or the run lost Redis or PostgreSQL and is queued again
    # after a backoff (INTERRUPTED): no run of this person starts before then.
    retry_after = models.DateTimeField(null=True, blank=True)
    # When the person asked the run to stop (Stop, or the API's cancel): its runner ends it `cancelled` at its
    # next batch boundary and moves no cursor (extraction/controls.py).
    cancel_requested_at = models.DateTimeField("stop asked at", null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = [models.Index(fields=["user", "-created_at"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"run {self.pk} {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class ProcessedEmail(TimeStampedModel):
    """The ledger: an email in it has been handled and is never sent to the LLM again."""

    class Outcome(models.TextChoices):
        TASKS = "tasks", "Tasks created"
        NO_TASKS = "no_tasks", "No tasks"
        QUARANTINED = "quarantined", "Quarantined"
        SKIPPED = "skipped", "Skipped (bulk mail)"  # not sent to Gemini; `last_error` is "bulk:<reason>"

    integration = models.ForeignKey("integrations.Integration", on_delete=models.CASCADE, related_name="ledger")
    # Which cursor listed it (SyncCursor.Purpose): mail sent to oneself is one message in Inbox and Sent, read
    # once under each.
    purpose = models.CharField(max_length=32, default="task_extraction", db_default="task_extraction")
    message_id = models.CharField(max_length=512)
    # The email's Message-ID: a copy of it reaching another mailbox of the person is not read again.
    email_key = models.CharField(max_length=512, blank=True)
    # The email's conversation (`Email.conversation_key`), the same through every mailbox ("" when unknown).
    conversation_key = models.CharField(max_length=512, blank=True, default="", db_default="")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    tasks_created = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=1)
    last_error = models.TextField(blank=True)
    run = models.ForeignKey(ExtractionRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="ledger")
    # Kept for skipped bulk mail only, so that its owner can see what it was and have it read anyway.
    sender = models.CharField(max_length=320, blank=True)
    subject = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["integration", "purpose", "message_id"], name="ledger_once_per_purpose")
        ]
        indexes = [
            models.Index(fields=["email_key"], condition=~models.Q(email_key=""), name="ledger_email_key"),
            # The admin's search by a message id alone (the unique index leads with the mailbox).
            models.Index(fields=["message_id"], name="ledger_message_id"),
        ]
        verbose_name = "ledger entry"
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.message_id} {self.outcome}"


class FetchFailure(TimeStampedModel):
    """A message that could not be read while the rest of its mailbox could. Its failed reads are
    counted across runs; after EXTRACTION_FETCH_ATTEMPTS it is quarantined, so that one message never
    blocks its mailbox. Until then its mailbox's cursor does not move past it."""

    integration = models.ForeignKey("integrations.Integration", on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=32, default="task_extraction", db_default="task_extraction")
    message_id = models.CharField(max_length=512)
    attempts = models.PositiveIntegerField(default=0)
    last_error_code = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["integration", "purpose", "message_id"], name="one_fetch_failure_per_purpose"
            )
        ]
        # The admin's search by a message id alone. A row waits here until its mailbox is read past it: few
        # while mail reads well, one per unread email of every mailbox while a provider fails single reads.
        indexes = [models.Index(fields=["message_id"], name="fetch_failure_message_id")]
        verbose_name = "email not read yet"
        verbose_name_plural = "emails not read yet"

    def __str__(self) -> str:
        return f"{self.message_id} failed {self.attempts}x"


class AlwaysReadSender(models.Model):
    """A sender whose mail is always read, even when the bulk rule would skip it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="always_read_senders")
    address = models.EmailField()  # lower-cased
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "address"], name="always_read_once")]

    def __str__(self) -> str:
        return f"{self.user_id} always reads {self.address}"


class MutedSender(models.Model):
    """A sender the person taught Tasklift to make no task from: their mail is skipped before Gemini, as bulk
    mail is, and recorded in the ledger as `muted:<reason>` (extraction/muting.py)."""

    class Reason(models.TextChoices):
        SENDER = "sender", "you chose never to make tasks from this sender"
        NOT_A_TASK = "not_a_task", "you marked a task from them as not a task"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="muted_senders")
    address = models.EmailField()  # lower-cased
    reason = models.CharField(max_length=16, choices=Reason.choices)
    task_title = models.CharField(max_length=500, blank=True)  # the task it was taught on, to recognise it by
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "address"], name="muted_once")]
        ordering = ("address",)

    def __str__(self) -> str:
        return f"{self.user_id} mutes {self.address}"
