from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.template.defaultfilters import pluralize
from django.utils import timezone

from accounts.models import User
from config.errors import NotFoundError
from extraction.models import ExtractionLease, ExtractionRun, FetchFailure, ProcessedEmail
from integrations.models import Integration
from integrations.providers.base import ProviderNotFound
from integrations.providers.gmail import gmail_web_link
from integrations.providers.outlook import outlook_web_link
from integrations.selectors import integration_list
from tasks.models import Task, TaskLink


def lease_live_user_ids() -> set[int]:
    """The lock keys of the people whose lease a live runner holds now (its advisory lock is held)."""
    from extraction.services import LOCK_NAMESPACE

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s AND objsubid = 2 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [LOCK_NAMESPACE],
        )
        return {int(row[0]) for row in cursor.fetchall()}


def run_is_being_run(*, run: ExtractionRun) -> bool:
    """Whether a live runner holds the lease for this very run (another delivery of its job)."""
    return ExtractionLease.objects.filter(user_id=run.user_id, run_id=run.pk).exists()


def email_keys_handled(*, user_id: int, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of these (purpose, Message-ID) the person's ledger holds as read (tasks written, or none to
    write), through any mailbox, under that purpose: an email the person sent is read as sent mail once,
    and as inbox mail once (it may have reached one of their inboxes too). A copy that was set aside is
    not counted: the other copy may read fine."""
    wanted = {(purpose, key) for purpose, key in keys if key}
    rows = ProcessedEmail.objects.filter(
        integration__user_id=user_id,
        email_key__in={key for _, key in wanted},
        outcome__in=(ProcessedEmail.Outcome.TASKS, ProcessedEmail.Outcome.NO_TASKS),
    ).values_list("purpose", "email_key")
    return {(str(purpose), str(key)) for purpose, key in rows} & wanted


def fetch_failures_still_missing(
    *, integration_id: int, message_ids: list[str], before: datetime, purpose: str = "task_extraction"
) -> set[str]:
    """Which of `message_ids` (answered 404 just now) the provider already answered 404 for at `before` or
    earlier: a read in an earlier run that failed the same way, long enough ago that a passing fault would
    not last from one to the other."""
    if not message_ids:
        return set()
    return set(
        FetchFailure.objects.filter(
            integration_id=integration_id,
            purpose=purpose,
            message_id__in=message_ids,
            last_error_code=ProviderNotFound.code,
            updated_at__lte=before,
        ).values_list("message_id", flat=True)
    )


def run_get(*, user: User, run_id: int) -> ExtractionRun:
    run = ExtractionRun.objects.filter(user=user, pk=run_id).first()
    if run is None:
        raise NotFoundError("There is no such extraction run.", code="run_not_found")
    return run


def run_latest(*, user: User) -> ExtractionRun | None:
    return ExtractionRun.objects.filter(user=user).order_by("-created_at").first()


def run_as_dict(run: ExtractionRun) -> dict[str, object]:
    """The run record as JSON: what the API, the `extract` command and people read."""
    return {
        "id": run.pk,
        "trigger": run.trigger,
        "status": run.status,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "counts": {
            "fetched": run.emails_fetched,
            "already_done": run.emails_already_done,
            "sent_to_llm": run.emails_sent_to_llm,
            "tasks_created": run.tasks_created,
            "ungrounded": run.tasks_ungrounded,
            "quarantined": run.emails_quarantined,
            "cut_to_fit": run.emails_cut,
            "skipped_bulk": run.emails_skipped,
            "secrets_redacted": run.secrets_redacted,
            "items_closed": run.items_closed,
            "items_updated": run.items_updated,
            "items_suggested": run.items_suggested,
            "commitments_created": run.commitments_created,
            "waiting_created": run.waiting_created,
            "item_answers_refused": run.item_answers_refused,
            "old_asks_skipped": run.old_asks_skipped,
        },
        "llm": {
            "calls": run.llm_calls,
            "prompt_tokens": run.prompt_tokens,
            "output_tokens": run.output_tokens,
            "prompt_version": run.prompt_version,
        },
        "mailboxes": list(run.mailboxes.values()),
        "rejections": run.rejections,
        "error_code": run.error_code,
        "error_message": run.error_message,
    }


def quarantined_list(*, integration: Integration) -> QuerySet[ProcessedEmail]:
    return ProcessedEmail.objects.filter(integration=integration, outcome=ProcessedEmail.Outcome.QUARANTINED)


# Mailbox status -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetAside:
    """A quarantined email, as a person reads it."""

    message_id: str
    reason: str
    link: str
    when: datetime
    sender: str = ""  # "" when it could not even be fetched
    subject: str = ""


@dataclass(frozen=True)
class MailboxStatus:
    """One mailbox as its owner sees it: the integration, what was set aside and why, what could not be
    read yet, and the last resync."""

    integration: Integration
    set_aside: list[SetAside]
    set_aside_count: int
    unread: int  # messages that failed to read and are tried again by the next runs
    resync_note: str
    open_tasks: int = 0  # open tasks from its mail (they stay when it is disconnected)


SET_ASIDE_SHOWN = 20


def mailbox_status_list(*, user: User) -> list[MailboxStatus]:
    """Every connected mailbox of `user` with its status, in a constant number of queries."""
    integrations = list(
        integration_list(user=user)
        .select_related("push_channel")
        .annotate(set_aside_count=Count("ledger", filter=Q(ledger__outcome=ProcessedEmail.Outcome.QUARANTINED)))
    )
    ids = [i.pk for i in integrations]
    unread = dict(
        FetchFailure.objects.filter(integration_id__in=ids)
        .values("integration_id")
        .annotate(n=Count("pk"))
        .values_list("integration_id", "n")
    )
    open_tasks = dict(
        TaskLink.objects.filter(integration_id__in=ids, task__status=Task.Status.OPEN)
        .values("integration_id")
        .annotate(n=Count("task_id", distinct=True))
        .values_list("integration_id", "n")
    )
    recent: dict[int, list[ProcessedEmail]] = {i: [] for i in ids}
    quarantined = ProcessedEmail.objects.filter(
        integration_id__in=ids, outcome=ProcessedEmail.Outcome.QUARANTINED
    ).order_by("-updated_at")
    for entry in quarantined[: SET_ASIDE_SHOWN * max(len(ids), 1)]:
        if len(recent[entry.integration_id]) < SET_ASIDE_SHOWN:
            recent[entry.integration_id].append(entry)
    by_id = {i.pk: i for i in integrations}
    return [
        MailboxStatus(
            integration=integration,
            set_aside=[_set_aside(by_id[integration.pk], entry) for entry in recent[integration.pk]],
            set_aside_count=integration.set_aside_count,
            unread=unread.get(integration.pk, 0),
            resync_note=resync_note(
                reason=integration.resync_reason, since=integration.resynced_since, not_read=integration.resync_not_read
            ),
            open_tasks=open_tasks.get(integration.pk, 0),
        )
        for integration in integrations
    ]


def _set_aside(integration: Integration, entry: ProcessedEmail) -> SetAside:
    links: dict[str, Callable[[], str]] = {
        Integration.Provider.GMAIL: lambda: gmail_web_link(integration.account_address, entry.message_id),
        Integration.Provider.OUTLOOK: lambda: outlook_web_link(entry.message_id),
    }
    link = links[integration.provider]() if integration.provider in links else ""  # IMAP has no web client
    reason = quarantine_reason(entry.last_error, integration)
    return SetAside(entry.message_id, reason, link, entry.updated_at, sender=entry.sender, subject=entry.subject)


def quarantine_reason(last_error: str, integration: Integration) -> str:
    """Why an email was set aside, in one plain sentence (the technical detail stays in the ledger)."""
    code = last_error.split(":", 1)[0].strip()
    provider = integration.get_provider_display()
    if code.startswith("fetch_"):
        return f"{provider} would not hand this email over, several times in a row."
    if code == "llm_blocked":
        return "The AI declined to read this email (a safety filter)."
    if code in ("llm_unavailable", "llm_timeout", "llm_rejected"):
        return "The AI failed every time it was given this email."
    return "The AI's answers for this email could not be trusted."


def resync_note(*, reason: str, since: datetime | None, not_read: int) -> str:
    """What a resync did, in plain words ('' when there was none): the run record and the mailbox page."""
    if not reason or since is None:
        return ""
    why = (
        "the provider had forgotten where Tasklift stopped reading"
        if reason == "expired"
        else "Tasklift changed how it reads this mailbox"
    )
    local = timezone.localtime(since)  # the person's time zone on a page (its middleware), UTC in a worker
    note = (
        f"Because {why}, Tasklift read again all mail that came into your inbox since "
        f"{local:%d %b %Y %H:%M} ({local:%Z}), older mail moved there included."
    )
    if not_read:
        were = pluralize(not_read, "was,were")
        note += (
            f" {not_read} older email{pluralize(not_read)} in your inbox {were} more than it looks through at "
            "once and not read: look through your inbox for them."
        )
    return note


def mailboxes_to_reconnect(*, user_id: int) -> list[Integration]:
    """The person's mailboxes that Tasklift may not read until the person reconnects them."""
    return list(Integration.objects.filter(user_id=user_id, status=Integration.Status.NEEDS_REAUTH))


def nothing_to_read(*, user_id: int) -> tuple[str, str]:
    """Why a run found no mailbox to read, as (code, message): a person whose every mailbox needs
    reconnecting is asked to reconnect those, by name, rather than to connect one."""
    waiting = [str(integration) for integration in mailboxes_to_reconnect(user_id=user_id)]
    if not waiting:
        return "no_mailbox", "Skipped: no connected mailbox to read. Connect Gmail or Outlook."
    names = " and ".join(waiting)
    one = len(waiting) == 1
    return (
        "needs_reauth",
        f"Skipped: {names} {'no longer lets' if one else 'no longer let'} Tasklift read {'it' if one else 'them'}. "
        f"Reconnect {'it' if one else 'them'} on the Mailboxes page.",
    )


# Skipped bulk mail ------------------------------------------------------------------------------------

SKIP_REASONS = {
    "category_promotions": "filed under Promotions",
    "category_social": "filed under Social",
    "category_forums": "filed under Forums",
    "precedence": "sent as bulk mail",
    "list": "a newsletter or mailing list",
    "auto_submitted": "sent automatically",
    "outlook_other": "filed under Other",
}


@dataclass(frozen=True)
class Skipped:
    """A skipped bulk email, as its owner reads it."""

    entry_id: int
    sender: str
    subject: str
    reason: str
    when: datetime


SKIPPED_SHOWN = 20


def skipped_list(*, user: User) -> tuple[list[Skipped], int]:
    """The person's most recently skipped bulk emails (at most SKIPPED_SHOWN) and how many there are."""
    # Mail of a sender the person muted is theirs to undo in Settings, not bulk mail to read here.
    entries = (
        ProcessedEmail.objects.filter(integration__user=user, outcome=ProcessedEmail.Outcome.SKIPPED)
        .exclude(last_error__startswith="muted:")
        .order_by("-created_at")
    )
    shown = [
        Skipped(
            entry.pk,
            entry.sender,
            entry.subject,
            SKIP_REASONS.get(entry.last_error.removeprefix("bulk:"), "bulk mail"),
            entry.created_at,
        )
        for entry in entries[:SKIPPED_SHOWN]
    ]
    return shown, (entries.count() if len(shown) == SKIPPED_SHOWN else len(shown))


def skipped_get(*, user: User, entry_id: int) -> ProcessedEmail:
    """One skipped email of `user` (NotFoundError for anyone else's, or one no longer skipped)."""
    entry = (
        ProcessedEmail.objects.filter(pk=entry_id, integration__user=user, outcome=ProcessedEmail.Outcome.SKIPPED)
        .exclude(last_error__startswith="muted:")
        .first()
    )
    if entry is None:
        raise NotFoundError("That skipped email is not there any more.")
    return entry
