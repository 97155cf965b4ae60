"""What a later email of a conversation does to the person's items (issue 22 point 4): it closes an item it
delivers or settles, or gives it a new due date, each change with its row of history (`TaskEvent`: which email,
its sentence, what it changed from, so it can be undone). An item the person changed by hand is never changed
by an email again: the email leaves a `suggested` row instead.

Called inside the transaction that writes the batch (extraction/writing.py), so a change and its history row
are committed together or not at all. The history row goes first and is unique on its task, email and action
(`one_change_per_email_and_action`): a batch read again after a crash, or a replayed email, finds its row and
changes nothing twice, even a task the person reopened since. Only the people of the conversation may change an
item (`may_change`): anyone else's email leaves a `suggested` row too.

Also what the prompt and the writer need to know of a conversation: its open items before an email
(`conversation_open_items`) and the sentences earlier items of it came from (`conversation_old_sentences`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from email.utils import parseaddr
from typing import Literal

from django.db import IntegrityError, transaction
from django.utils import timezone

from integrations.mail.message import Email
from reminders.ring import reminder_refresh
from tasks.models import Task, TaskEvent
from tasks.services import repeat_next_make
from tasks.snooze import person_today


@dataclass(frozen=True)
class EmailChange:
    """One email's change to one item, checked already (extraction.items): the email and its words."""

    task_id: int
    outcome: Literal["delivered", "updated"]
    sentence: str
    due_date: date | None
    integration_id: int
    message_id: str
    web_link: str
    folder: str  # "inbox" | "sent"
    sender: str
    received_at: datetime


@dataclass
class ChangeCounts:
    closed: int = 0
    updated: int = 0
    suggested: int = 0


@dataclass(frozen=True)
class ConversationItem:
    """An open item of a conversation, as the prompt shows it and as it is told from the email's own."""

    task_id: int
    kind: str
    title: str
    sentence: str
    conversation_key: str
    source_id: str
    email_key: str
    received_at: datetime | None


def conversation_open_items(*, user_id: int, keys: Collection[str]) -> list[ConversationItem]:
    """The person's open items of these conversations, newest email first: one query through the index on
    (user, conversation key, status), whatever the size of the list."""
    wanted = sorted({key for key in keys if key})
    if not wanted:
        return []
    rows = (
        Task.objects.filter(user_id=user_id, conversation_key__in=wanted, status=Task.Status.OPEN)
        .exclude(conversation_key="")
        .order_by("-email_received_at", "-id")
        .values_list(
            "pk", "kind", "title", "sentence", "conversation_key", "source_id", "email_key", "email_received_at"
        )
    )
    return [ConversationItem(*row) for row in rows]


def items_before(
    items: Sequence[ConversationItem], *, conversation_key: str, message_id: str, email_key: str, received_at: datetime
) -> list[ConversationItem]:
    """The items of `items` an email may deliver: of its conversation, made by an earlier email (never by
    itself, nor by a later one read before it)."""
    return [
        item
        for item in items
        if item.conversation_key == conversation_key
        and item.source_id != message_id
        and not (email_key and item.email_key == email_key)
        and (item.received_at is None or item.received_at < received_at)
    ]


def conversation_old_sentences(*, user_id: int, keys: Collection[str]) -> list[tuple[str, str, datetime | None]]:
    """(conversation key, sentence, when its email came) of every item of these conversations, whatever its
    status, and of every email that changed one of them: the words earlier mail of the conversation said."""
    wanted = sorted({key for key in keys if key})
    if not wanted:
        return []
    tasks = Task.objects.filter(user_id=user_id, conversation_key__in=wanted).exclude(sentence="")
    found = list(tasks.values_list("conversation_key", "sentence", "email_received_at"))
    events = TaskEvent.objects.filter(task__in=tasks.values("pk"), by=TaskEvent.By.EMAIL).exclude(sentence="")
    found += events.values_list("task__conversation_key", "sentence", "email_received_at")
    return found


def participants_of(email: Email) -> str:
    """The addresses of an email's From, To and Cc, lower-cased and space-separated (Task.participants)."""
    found = [parseaddr(email.sender)[1], *(r.address for r in (*email.to, *email.cc))]
    return " ".join(dict.fromkeys(address.lower() for address in found if address))


def may_change(task: Task, change: EmailChange, own: Collection[str]) -> bool:
    """Whether `change`'s email may close or re-date `task` itself: only when its sender is the person (any of
    their addresses), or one of the people of the email the item came from (who asked, whom they asked, who
    was on it), or whom a waiting item waits on. Message-IDs travel in every forward and quoted reply, so a
    stranger can write into any conversation: their email only suggests (SECURITY.md, "Conversations")."""
    sender = parseaddr(change.sender)[1].lower()
    if not sender:
        return False
    people = {*own, *task.participants.split()}
    people.update(parseaddr(named)[1].lower() for named in (task.email_sender, task.waiting_on) if named)
    return sender in people


def conversation_changes_apply(
    *, user_id: int, changes: Sequence[EmailChange], run_id: int | None, own: Collection[str] = ()
) -> ChangeCounts:
    """Apply what emails did to the person's open items, each change with its history row. Inside the
    caller's transaction (the batch's). `own`: the person's addresses (see `may_change`)."""
    counts = ChangeCounts()
    if not changes:
        return counts
    # Locked: a person's edit that commits meanwhile waits, and is not overwritten by a stale row.
    tasks = Task.objects.select_for_update().in_bulk([c.task_id for c in changes])
    for change in changes:
        task = tasks.get(change.task_id)
        if task is None or task.user_id != user_id or task.status != Task.Status.OPEN:
            continue  # closed meanwhile, by its person or by an earlier email of this batch
        if change.outcome == "updated" and task.due_date == change.due_date:
            continue
        if task.hand_changed or not may_change(task, change, own):
            action = TaskEvent.Action.SUGGESTED
        elif change.outcome == "delivered":
            action = TaskEvent.Action.CLOSED
        else:
            action = TaskEvent.Action.UPDATED
        if not _event_insert(task, change, action, run_id):
            continue  # this email changed it already: a replay
        if action == TaskEvent.Action.CLOSED:
            task.status, task.completed_at = Task.Status.DONE, change.received_at
            task.save(update_fields=["status", "completed_at", "updated_at"])
            counts.closed += 1
            if task.repeat_rule:  # this month's rent paid: next month's comes
                repeat_next_make([task], today=person_today(user=task.user))
        elif action == TaskEvent.Action.UPDATED:
            task.due_date = change.due_date
            task.save(update_fields=["due_date", "updated_at"])
            reminder_refresh(task_ids=[task.pk])  # a reminder rings before the new date's time
            counts.updated += 1
        else:
            counts.suggested += 1
    return counts


def _event_insert(task: Task, change: EmailChange, action: str, run_id: int | None) -> bool:
    """The change's history row; False when this email made this change to this task before (the unique
    constraint, in a savepoint: the batch's transaction goes on)."""
    try:
        with transaction.atomic():
            TaskEvent.objects.create(
                task=task,
                action=action,
                by=TaskEvent.By.EMAIL,
                at=timezone.now(),
                integration_id=change.integration_id,
                message_id=change.message_id,
                web_link=change.web_link[:1000],
                email_folder=change.folder,
                email_sender=change.sender[:500],
                email_received_at=change.received_at,
                sentence=change.sentence[:300],
                run_id=run_id,
                status_before=task.status,
                due_date_before=task.due_date,
                due_date_after=change.due_date if change.outcome == "updated" else None,
            )
    except IntegrityError:
        return False
    return True
