"""Senders a person taught Tasklift to make no task from ("Never make tasks from this sender" on a task, "Not a
task" on a dismissed one). Per person; the pipeline skips their mail before Gemini next to the bulk rule
(extraction/batches.py) and records it in the ledger as `muted:<reason>`; Settings lists them and undoes one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.utils import parseaddr

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from accounts.models import User
from config.errors import ApplicationError, NotFoundError
from extraction.models import MutedSender, ProcessedEmail
from tasks.models import Task

MUTED_PREFIX = "muted:"  # the ledger's `last_error` of an email skipped for its sender


def sender_address(header: str) -> str:
    """The address of a From header, lower-cased ("" when it has none)."""
    address = parseaddr(header)[1].lower()
    return address if "@" in address else ""


def own_addresses(*, user: User) -> set[str]:
    """The person's own addresses, lower-cased: the account's and every mailbox they ever connected (mail from a
    disconnected one is still theirs). One query."""
    from integrations.models import Integration

    mailboxes = Integration.objects.filter(user_id=user.pk).values_list("account_address", flat=True)
    return {address.lower() for address in [user.email, *mailboxes] if address}


def mute_offered(task: Task, own: set[str]) -> bool:
    """Whether "Never make tasks from this sender" is offered on `task`: not on items of the person's own mail
    (what they promised or wait for: their Sent mail), nor on any task whose sender is one of `own`."""
    if task.source != Task.Source.EMAIL_AI or task.kind != Task.Kind.ASK:
        return False
    address = sender_address(task.email_sender)
    return bool(address) and address not in own


def sender_mute(*, user: User, task: Task, reason: str) -> MutedSender:
    """Make no task from the sender of this task's email any more (the task itself stays as it is). The person's
    own addresses are refused: muting one would skip their Sent mail, every promise and waiting item in it."""
    if reason not in MutedSender.Reason.values:
        raise ApplicationError("Choose “Never make tasks from this sender” or “Not a task”.", code="invalid_reason")
    address = sender_address(task.email_sender) if task.source == Task.Source.EMAIL_AI else ""
    if not address:
        raise ApplicationError("This task has no sender to stop: it was not made from an email.", code="no_sender")
    if address in own_addresses(user=user):
        raise ApplicationError(
            f"{address} is your own address: Tasklift reads your own mail for what you promised and what you "
            "wait for, so it cannot be muted. Dismiss the task instead.",
            code="own_address",
        )
    muted, _ = MutedSender.objects.get_or_create(
        user=user, address=address, defaults={"reason": reason, "task_title": task.title[:500]}
    )
    return muted


def sender_unmute(*, user: User, muted_id: int) -> str:
    """Read that sender's mail again from the next run on. Returns the address."""
    muted = MutedSender.objects.filter(user=user, pk=muted_id).first()
    if muted is None:
        raise NotFoundError("That sender is not muted any more.", code="muted_sender_not_found")
    muted.delete()
    return muted.address


def muted_reasons(*, user_id: int) -> dict[str, str]:
    """{address: ledger reason} of the person's muted senders, for a run (one query)."""
    return {
        address: f"{MUTED_PREFIX}{reason}"
        for address, reason in MutedSender.objects.filter(user_id=user_id).values_list("address", "reason")
    }


@dataclass(frozen=True)
class Muted:
    """A muted sender as Settings shows it."""

    pk: int
    address: str
    reason: str  # MutedSender.Reason
    why: str
    task_title: str
    since: datetime
    skipped: int  # emails of theirs skipped so far


def muted_sender_list(*, user: User) -> list[Muted]:
    """The person's muted senders, each with how many of their emails were skipped (one query)."""
    skipped = (
        ProcessedEmail.objects.filter(
            integration__user_id=OuterRef("user_id"),
            outcome=ProcessedEmail.Outcome.SKIPPED,
            last_error__startswith=MUTED_PREFIX,
            sender__icontains=OuterRef("address"),
        )
        .order_by()
        .values("outcome")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = MutedSender.objects.filter(user=user).annotate(skipped=Coalesce(Subquery(skipped), 0))
    return [
        Muted(m.pk, m.address, m.reason, m.get_reason_display(), m.task_title, m.created_at, m.skipped) for m in rows
    ]
