from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.db.models import F

from config.models import TimeStampedModel

# The words an operator searches tasks by in the admin, and how they are split into words: "simple" keeps
# every word as written (lower-cased), in any language, without stemming.
ADMIN_SEARCH_FIELDS = ("title", "email_subject", "email_sender")
ADMIN_SEARCH_CONFIG = "simple"


class Task(TimeStampedModel):
    """A to-do item. Unique on (user, source, source id, title key), enforced by the database, so an
    email handled twice never yields a task twice. Dismissed tasks stay as rows so they never come back."""

    class Source(models.TextChoices):
        EMAIL_AI = "email_ai", "From email"
        MANUAL = "manual", "Added by hand"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        DONE = "done", "Done"
        DISMISSED = "dismissed", "Dismissed"

    class Kind(models.TextChoices):
        # What the item is to its person: something asked of them, something they promised in mail they
        # sent, or something they asked of someone else and wait for (DESIGN §4, issue 22).
        ASK = "ask", "Asked of you"
        COMMITMENT = "commitment", "You promised"
        WAITING = "waiting", "Waiting for"

    class Priority(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks")
    source = models.CharField(max_length=16, choices=Source.choices)
    source_id = models.CharField(max_length=512)  # provider message id, or a generated id by hand
    # The email's Message-ID: the same message reaching two mailboxes of a person gives one task.
    email_key = models.CharField(max_length=512, blank=True)
    integration = models.ForeignKey(
        "integrations.Integration", on_delete=models.SET_NULL, null=True, blank=True, related_name="tasks"
    )
    # The email's conversation (`Email.conversation_key`: its root Message-ID), the same through every mailbox;
    # "" for a task added by hand. A database default too, so that every writer's raw INSERT may leave it out.
    conversation_key = models.CharField(max_length=512, blank=True, default="", db_default="")
    title = models.CharField(max_length=300)
    title_key = models.CharField(max_length=300)
    notes = models.TextField(blank=True)
    due_date = models.DateField(null=True, blank=True)
    # The time of day it is due, in the person's time zone (only with a due date): "call Bob tomorrow 3pm".
    due_time = models.TimeField(null=True, blank=True)
    priority = models.CharField(max_length=8, choices=Priority.choices, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    email_link = models.URLField(max_length=1000, blank=True)
    email_sender = models.CharField(max_length=500, blank=True)
    email_subject = models.CharField(max_length=1000, blank=True)
    email_received_at = models.DateTimeField(null=True, blank=True)
    # The email's own words the task comes from, found in its cleaned text (extraction.grounding): evidence,
    # not edited by anyone. "" for tasks added by hand and those made before sentences were kept. Room for
    # extraction.grounding.MAX_SENTENCE_CHARS, which cuts what it keeps to fit. A default in the database too:
    # tasks are inserted in SQL (tasks.services), and during an upgrade by code that does not know the column.
    sentence = models.CharField(max_length=300, blank=True, default="", db_default="")
    run = models.ForeignKey(
        "extraction.ExtractionRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="tasks"
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ASK, db_default=Kind.ASK)
    # For a waiting item: whom the person asked ("Name <address>", as in a To header); "" otherwise.
    waiting_on = models.CharField(max_length=500, blank=True, default="", db_default="")
    # The people of the email it came from (From, To and Cc addresses, lower-cased, space-separated): with the
    # person's own addresses, the only senders whose later email may close or re-date it (tasks/conversation.py).
    participants = models.TextField(blank=True, default="", db_default="")
    # The person edited or reopened it by hand: no email closes or changes it automatically again; what an
    # email would have done is kept as a `suggested` event and shown on it instead.
    hand_changed = models.BooleanField(default=False, db_default=False)
    # Snoozed: off the open list (and the digest) until this date of the person's comes (tasks/snooze.py).
    snoozed_until = models.DateField(null=True, blank=True)
    # Repeats: an RRULE (tasks/repeat.py), "" for none. Done makes the next one, a task by hand whose source id
    # names this one ("repeat:<id>") under this one's title key: one next per task (task_once_per_email_title),
    # however often Done is sent.
    repeat_rule = models.CharField(max_length=100, blank=True, default="", db_default="")

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "source", "source_id", "title_key"], name="task_once_per_email_title"
            ),
            models.UniqueConstraint(
                fields=["user", "email_key", "title_key"],
                condition=models.Q(source="email_ai") & ~models.Q(email_key=""),
                name="task_once_per_message_title",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "status", "-created_at"]),
            # The task list's orders (tasks/selectors.py), so a page is read in order and stops at its end.
            models.Index(
                F("user"),
                F("status"),
                F("due_date").asc(nulls_last=True),
                F("email_received_at").desc(nulls_last=True),
                F("created_at").desc(),
                F("id").desc(),
                name="task_open_order",
            ),
            models.Index(F("user"), F("status"), F("updated_at").desc(), F("id").desc(), name="task_closed_order"),
            # The open list of one kind (the "Waiting for" view): its few items read in order, not found
            # among all the person's open tasks.
            models.Index(
                F("user"),
                F("kind"),
                F("status"),
                F("due_date").asc(nulls_last=True),
                F("email_received_at").desc(nulls_last=True),
                F("created_at").desc(),
                F("id").desc(),
                name="task_kind_order",
            ),
            # The admin's: its changelist (newest first) and its search (tasks/admin.py).
            models.Index(F("created_at").desc(), F("id").desc(), name="task_newest"),
            models.Index(fields=["source_id"], name="task_source_id"),
            # The open items of one conversation (a reply may deliver them), found by its key alone.
            models.Index(
                fields=["user", "conversation_key", "status"],
                condition=~models.Q(conversation_key=""),
                name="task_conversation",
            ),
            GinIndex(SearchVector(*ADMIN_SEARCH_FIELDS, config=ADMIN_SEARCH_CONFIG), name="task_admin_search"),
        ]

    def __str__(self) -> str:
        return self.title


class TaskLink(models.Model):
    """Where a task's email is: one row per mailbox it reached (Gmail and Outlook may both hold it)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="links")
    integration = models.ForeignKey("integrations.Integration", on_delete=models.CASCADE, related_name="+")
    message_id = models.CharField(max_length=512)
    web_link = models.URLField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "integration"], name="one_link_per_mailbox")]
        ordering = ("id",)
        verbose_name = "mailbox link"

    def __str__(self) -> str:
        return f"{self.task_id} in {self.integration_id}"


class TaskListVersion(models.Model):
    """How many times a person's tasks have changed: what an open list polls every few seconds
    (`task_list_version`), read by its primary key whatever the number of tasks.

    The database counts, by triggers on tasks and their mailbox links (tasks/migrations/0005), in the
    transaction of each change and whoever makes it: the pipeline's inserts, a person's edits, the admin's
    edits and deletes, a deleted mailbox's links. Changes of one person queue on this row until they commit,
    so a poll never misses one that was stamped earlier but committed later (a latest `updated_at` would).
    The row goes with its person by a foreign key of the database's own, ON DELETE CASCADE (why not
    Django's: see the migration)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, primary_key=True, related_name="+"
    )
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"tasks of {self.user_id} changed {self.version}x"


class TaskEvent(models.Model):
    """One change of an item, in its history: made by an email (automatic: `closed`, `updated`, or `suggested`
    when the item was changed by hand before) or by its person. An automatic change is reversible: it keeps
    what it changed from (`status_before`, `due_date_before`), and undoing it stamps `undone_at` and puts
    those back. One email changes one item at most once per action (the unique constraint): a run read again
    after a crash finds the row and changes nothing twice."""

    class Action(models.TextChoices):
        CLOSED = "closed", "Closed"  # delivered, paid, cancelled, settled
        UPDATED = "updated", "Due date changed"
        SUGGESTED = "suggested", "Suggested"  # what an email would have done to an item changed by hand
        REOPENED = "reopened", "Reopened"
        UNDONE = "undone", "Undone"

    class By(models.TextChoices):
        EMAIL = "email", "An email"
        PERSON = "person", "You"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16, choices=Action.choices)
    by = models.CharField(max_length=8, choices=By.choices)
    at = models.DateTimeField()
    # The email that made the change (automatic changes): where it is, and what of it says so.
    integration = models.ForeignKey(
        "integrations.Integration", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    message_id = models.CharField(max_length=512, blank=True, default="")
    web_link = models.URLField(max_length=1000, blank=True, default="")
    email_folder = models.CharField(max_length=8, blank=True, default="")  # "inbox" | "sent" ("sent": your reply)
    email_sender = models.CharField(max_length=500, blank=True, default="")
    email_received_at = models.DateTimeField(null=True, blank=True)
    sentence = models.CharField(max_length=300, blank=True, default="")
    run = models.ForeignKey(
        "extraction.ExtractionRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="task_events"
    )
    # What the change changed, to undo it: the status and due date before, and the due date it set.
    status_before = models.CharField(max_length=16, blank=True, default="")
    due_date_before = models.DateField(null=True, blank=True)
    due_date_after = models.DateField(null=True, blank=True)
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("at", "id")
        constraints = [
            models.UniqueConstraint(
                fields=["task", "message_id", "action"],
                condition=models.Q(by="email"),
                name="one_change_per_email_and_action",
            )
        ]
        indexes = [models.Index(fields=["task", "at"], name="task_event_history")]
        verbose_name = "task history entry"
        verbose_name_plural = "task history"

    def __str__(self) -> str:
        return f"{self.task_id} {self.action} by {self.by}"
