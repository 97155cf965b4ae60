"""Reading a run's mailboxes into one ordered stream of emails: each mailbox opened at its cursor, its delta
listed (or, when the cursor expired or its query changed, a resync; on the first read, a bounded backfill),
then its messages fetched in provider batches, one batch ahead, as the stream is consumed. Nothing here
moves a cursor: the pipeline's commit does, once everything read is handled (DESIGN §1).

A mailbox is read once per cursor purpose its person's consent covers: its inbox, and its Sent mail
(`SyncCursor.Purpose.SENT_MAIL`, its emails marked `folder="sent"`). Each purpose has its own cursor, ledger
rows, failed reads and queue, so one that fails holds back only its own cursor.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.template.defaultfilters import pluralize
from django.utils import timezone

from config.logcontext import in_context, log_context
from extraction.crashpoints import crash_point
from extraction.models import ExtractionRun, FetchFailure, ProcessedEmail
from extraction.runrecord import RunRecord, RunStopped
from extraction.selectors import fetch_failures_still_missing, nothing_to_read, resync_note
from extraction.services import (
    LedgerEntry,
    fetch_failure_record,
    ledger_known,
    ledger_record,
    queued_id,
    queued_ids,
)
from integrations.models import FIRST_READ, Integration, SyncCursor
from integrations.providers.base import (
    CursorExpired,
    Delta,
    Email,
    Fetched,
    MailProvider,
    ProviderAuthError,
    ProviderError,
    ProviderNotFound,
    ProviderRateLimited,
    provider_close,
)
from integrations.services import cursor_fits, integration_mark_failed, integration_provider

if TYPE_CHECKING:
    from extraction.writing import BatchWriter

logger = logging.getLogger(__name__)

BACKFILL_MARGIN = timedelta(minutes=5)
# A message read that answers 404 again this long after an earlier run's 404 is taken as deleted: longer than
# a fault that passes (a message listed before it can be read, a replica behind), shorter than a poll.
DELETION_CONFIRM_AFTER = timedelta(seconds=60)


@dataclass
class Mailbox:
    """One integration during a run, for one purpose (its inbox, or its Sent mail): its client, the cursor it
    started from and the one it would move to."""

    integration: Integration
    provider: MailProvider | None  # None: no client could be made (it is then `failed`)
    cursor: SyncCursor
    new_cursor: str = ""
    pending_ids: list[str] = field(default_factory=list)
    backfill_ids: list[str] = field(default_factory=list)  # ids queued on the mailbox that this run reads
    failed: ProviderError | None = None
    had_fetch_failures: bool = False  # messages of it failed to read in earlier runs (FetchFailure rows)
    # A resync (DESIGN §6): why ("expired", "query_changed"), from when mail is read again, how much of
    # that window was over the bound and not read.
    resync: str = ""
    resync_since: datetime | None = None
    not_read: int = 0
    unread: dict[str, ProviderError] = field(default_factory=dict)  # messages that failed to read this run
    first_read_since: datetime | None = None  # the first read of Sent mail: from when it was read
    listed_at: datetime | None = None  # when its new mail was asked for: what came after is for the next run

    @property
    def purpose(self) -> str:
        return self.cursor.purpose

    @property
    def folder(self) -> Literal["inbox", "sent"]:
        return self.cursor.folder

    @property
    def key(self) -> str:
        """Its report's key in the run record: the integration's id for the inbox (as every reader of run
        records knows it), "<id>:sent" for its Sent mail."""
        pk = str(self.integration.pk)
        return pk if self.folder == "inbox" else f"{pk}:{self.folder}"

    @property
    def name(self) -> str:
        return str(self.integration) if self.folder == "inbox" else f"{self.integration} (Sent mail)"

    @property
    def held_back(self) -> bool:
        """Whether the cursor must stay: the mailbox was left out, or some of its mail is not handled."""
        return self.failed is not None or bool(self.unread)

    def report(self) -> dict[str, Any]:
        error_code, error = "", ""
        if self.failed:
            error_code, error = self.failed.code, self.failed.message
        elif self.unread:
            first = next(iter(self.unread.values()))
            error_code = "unread"
            error = (
                f"{len(self.unread)} email{pluralize(len(self.unread))} could not be read ({first.message}); "
                "they are read again next time, "
                f"and set aside for you after {settings.EXTRACTION_FETCH_ATTEMPTS} failed reads."
            )
        return {
            "provider": self.integration.provider,
            "address": self.integration.account_address,
            "folder": self.folder,
            "before": self.cursor.value,
            "fetched": self.new_cursor or None,  # read up to here (not saved): a doorbell before it is covered
            "after": None,
            "status": "failed" if self.failed else ("partial" if self.unread else "ok"),
            "error_code": error_code,
            "error": error,
            "unread": len(self.unread),
            "resync": self.resync,
            "not_read": self.not_read,
            "note": self.resync_note(),
        }

    def resync_note(self) -> str:
        if self.first_read_since is not None:
            local = timezone.localtime(self.first_read_since)
            note = f"First read of your Sent mail: what you sent since {local:%d %b %Y %H:%M} ({local:%Z})."
            if self.not_read:
                were = pluralize(self.not_read, "was,were")
                note += (
                    f" {self.not_read} older sent email{pluralize(self.not_read)} of that time {were} over the "
                    "bound and not read."
                )
            return note
        return resync_note(reason=self.resync, since=self.resync_since, not_read=self.not_read)


@dataclass(frozen=True)
class SourcedEmail:
    mailbox: Mailbox
    email: Email

    @property
    def copy_key(self) -> tuple[str, str]:
        """What makes two emails copies of one (read once, linked): their Message-ID, within one purpose."""
        return (self.mailbox.purpose, self.email.internet_message_id)

    @property
    def queued_id(self) -> str:
        """Its id as its mailbox's queues hold it (`read_anyway`, `backfill_pending`)."""
        return queued_id(self.mailbox.purpose, self.email.message_id)


class MailboxReader:
    """The mailboxes of one run, and the stream of their pending emails. Fetch failures are counted here;
    one that has failed too often is set aside through the run's writer."""

    def __init__(self, record: RunRecord, writer: BatchWriter) -> None:
        self.record = record
        self.writer = writer
        self.mailboxes: list[Mailbox] = []

    def open(self, *, read_sent: bool = False) -> None:
        # Each active mailbox with its cursors (one without a cursor has nothing to read from), in the
        # mailboxes' own order, its inbox before its Sent mail, and whether messages of each purpose failed to
        # read before (the commit forgets them). Sent mail only under a consent that covers it.
        purposes: list[str] = [
            SyncCursor.Purpose.TASK_EXTRACTION,
            *([SyncCursor.Purpose.SENT_MAIL] if read_sent else []),
            SyncCursor.Purpose.FORWARDED,  # what the person forwarded to their forward-to address
        ]
        failures = FetchFailure.objects.filter(integration_id=OuterRef("integration_id"), purpose=OuterRef("purpose"))
        # The purposes are chosen here, not in SQL: a person has a few cursors, found through their mailboxes'
        # ids; a purpose predicate made the planner read the cursors' unique index whole.
        every = (
            SyncCursor.objects.filter(
                integration__user_id=self.record.run.user_id, integration__status=Integration.Status.ACTIVE
            )
            .select_related("integration")
            .annotate(fetch_failures=Exists(failures))
        )
        cursors = sorted(
            (cursor for cursor in every if cursor.purpose in purposes),
            key=lambda c: (c.integration.provider, c.integration.account_address, purposes.index(c.purpose)),
        )
        for cursor in cursors:
            with log_context(integration_id=cursor.integration_id):
                self._open_mailbox(cursor)
        if any(m.pending_ids for m in self.mailboxes):
            # How far each mailbox is listed, while the batches run: the doorbell reads it (scheduling.py).
            # With nothing to read, the commit's update, a moment later, is the first to carry it.
            self.record.update(mailboxes=self.reports())
        if not self.mailboxes:
            raise RunStopped(ExtractionRun.Status.SKIPPED, *nothing_to_read(user_id=self.record.run.user_id))
        if all(m.failed for m in self.mailboxes):
            first = self.mailboxes[0].failed
            assert first is not None
            raise RunStopped(ExtractionRun.Status.FAILED, first.code, self.left_out_message())

    def _open_mailbox(self, cursor: SyncCursor) -> None:
        # Both purposes of a mailbox share its row and its client (one sign-in, refreshed once); what the
        # whole mailbox failed on (its sign-in refused, a throttle) leaves its other purpose out without a call.
        sibling = next((m for m in self.mailboxes if m.integration.pk == cursor.integration_id), None)
        if sibling is not None:
            cursor.integration = sibling.integration
            if isinstance(sibling.failed, ProviderAuthError | ProviderRateLimited) or (
                sibling.failed is not None and sibling.provider is None
            ):
                mailbox = Mailbox(sibling.integration, None, cursor, failed=sibling.failed)
                self.mailboxes.append(mailbox)
                return
        integration = cursor.integration
        if integration.retry_after and integration.retry_after > timezone.now():
            # The provider asked us to wait: leave the mailbox out until then, cursor untouched.
            mailbox = Mailbox(integration, None, cursor)
            mailbox.failed = ProviderRateLimited(
                f"the provider asked Tasklift to wait until {integration.retry_after:%H:%M:%S} UTC."
            )
            self.mailboxes.append(mailbox)
            return
        try:
            mailbox = Mailbox(
                integration,
                sibling.provider if sibling and sibling.provider else integration_provider(integration=integration),
                cursor,
                had_fetch_failures=cursor.fetch_failures,  # type: ignore[attr-defined]  # annotated by the query
            )
            if not cursor_fits(cursor=cursor, integration=integration):
                mailbox.resync = "query_changed"  # a cursor of another query: read from the last success
        except ProviderError as error:
            mailbox = Mailbox(integration, None, cursor)
            self._leave_out(mailbox, error)
        self.mailboxes.append(mailbox)
        if not mailbox.failed:
            self._fetch_delta(mailbox)

    def _fetch_delta(self, mailbox: Mailbox) -> None:
        assert mailbox.provider is not None
        mailbox.listed_at = timezone.now()
        try:
            if mailbox.resync:
                delta = self._resync(mailbox)
            elif mailbox.purpose == SyncCursor.Purpose.SENT_MAIL and mailbox.cursor.value == FIRST_READ:
                delta = self._first_read(mailbox)
            else:
                try:
                    delta = mailbox.provider.fetch_delta(mailbox.cursor.value, folder=mailbox.folder)
                except CursorExpired:
                    mailbox.resync = "expired"
                    delta = self._resync(mailbox)
            crash_point("fetch")
        except ProviderError as error:
            self._leave_out(mailbox, error)
            return
        mailbox.backfill_ids = queued_ids(mailbox.purpose, mailbox.integration.backfill_pending)
        new_ids = self._bound_backfill(mailbox, delta) if delta.backfill else delta.message_ids
        candidates = list(dict.fromkeys([*mailbox.backfill_ids, *new_ids]))
        known = ledger_known(integration_id=mailbox.integration.pk, message_ids=candidates, purpose=mailbox.purpose)
        mailbox.new_cursor = delta.new_cursor
        mailbox.pending_ids = [i for i in candidates if i not in known]
        if candidates:
            ExtractionRun.objects.filter(pk=self.record.run.pk).update(
                emails_fetched=F("emails_fetched") + len(candidates),
                emails_already_done=F("emails_already_done") + len(known),
            )

    def _resync(self, mailbox: Mailbox) -> Delta:
        """A new cursor generation, with no person involved (DESIGN §6): a cursor for now, and what is in the
        inbox now that the ledger does not hold and that came in since the last successful read (minus a
        margin), whatever its received time (the provider tells how: integrations/providers). The old cursor
        stays until this run commits, so a failure resyncs again next time."""
        assert mailbox.provider is not None
        last_read = mailbox.integration.last_success_at or mailbox.cursor.updated_at
        mailbox.resync_since = last_read - timedelta(minutes=settings.EXTRACTION_RESYNC_MARGIN_MINUTES)
        integration_id, purpose = mailbox.integration.pk, mailbox.purpose
        delta = mailbox.provider.resync(
            mailbox.resync_since,
            settings.EXTRACTION_RESYNC_MAX_MESSAGES,
            cursor=mailbox.cursor.value,
            handled=lambda ids: ledger_known(integration_id=integration_id, message_ids=ids, purpose=purpose),
            folder=mailbox.folder,
        )
        mailbox.not_read = delta.not_read
        logger.warning(
            "extraction run %s resyncs integration %s %s (%s): %d emails listed, %d over the bound",
            self.record.run.pk,
            mailbox.integration.pk,
            mailbox.folder,
            mailbox.resync,
            len(delta.message_ids),
            delta.not_read,
        )
        return delta

    @staticmethod
    def _first_read(mailbox: Mailbox) -> Delta:
        """The first read of a mailbox's Sent mail: what was sent in the MAIL_SENT_BACKFILL_DAYS before its
        cursor was made (at connect, or when the consent came to cover Sent mail), the newest
        MAIL_SENT_BACKFILL_MAX_MESSAGES of it; the rest of that window is counted as not read."""
        assert mailbox.provider is not None
        # A cursor that was never read has never been updated: when it was made, with the backfill's margin.
        made_at = mailbox.cursor.updated_at - BACKFILL_MARGIN
        mailbox.first_read_since = made_at - timedelta(days=settings.MAIL_SENT_BACKFILL_DAYS)
        delta = mailbox.provider.first_read(
            mailbox.first_read_since, settings.MAIL_SENT_BACKFILL_MAX_MESSAGES, folder=mailbox.folder
        )
        mailbox.not_read = delta.not_read
        return delta

    @staticmethod
    def _bound_backfill(mailbox: Mailbox, delta: Delta) -> list[str]:
        """The first read of a mailbox (its whole inbox): of the mail received before it was connected,
        only the newest MAIL_BACKFILL_MAX_MESSAGES of the last MAIL_BACKFILL_DAYS are owed; everything
        received since is read, however much."""
        # An initial cursor is never updated before its first commit, so this is when the mailbox was
        # connected; with a margin, since providers stamp mail to the second and clocks differ.
        connected_at = mailbox.cursor.updated_at - BACKFILL_MARGIN
        window_start = connected_at - timedelta(days=settings.MAIL_BACKFILL_DAYS)
        received = delta.received

        def before_connect(message_id: str) -> bool:
            return message_id in received and received[message_id] < connected_at

        older = [i for i in delta.message_ids if before_connect(i) and received[i] >= window_start]
        limit = settings.MAIL_BACKFILL_MAX_MESSAGES
        kept = set(older[-limit:] if limit else [])
        return [i for i in delta.message_ids if not before_connect(i) or i in kept]

    def _leave_out(self, mailbox: Mailbox, error: ProviderError) -> None:
        mailbox.failed = error
        integration_mark_failed(integration=mailbox.integration, error=error)
        logger.warning(
            "extraction run %s left out integration %s %s: %s",
            self.record.run.pk,
            mailbox.integration.pk,
            mailbox.folder,
            error.code,
            extra={"integration_id": mailbox.integration.pk},
        )

    def emails(self) -> Generator[SourcedEmail]:
        """Every pending email of every mailbox, fetched in provider batches as they are needed, one ahead:
        while a chunk's emails are prepared and sent, the next chunk's request is in flight on a thread of
        its own (HTTP only; what a fetch writes is written here). Each fetch follows a check of the lease
        and the consent, as before."""
        fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fetch-run-{self.record.run.pk}")
        try:
            # Oldest first across every mailbox and folder (each gives its own oldest first): a reply is read
            # after the mail it answers, whichever folder each is in, so the items the earlier one made are
            # there to be delivered (the batches keep this order within a conversation).
            streams = [self._mailbox_emails(mailbox, fetcher) for mailbox in self.mailboxes]
            yield from heapq.merge(*streams, key=lambda item: item.email.received_at)
        finally:
            fetcher.shutdown(wait=True)  # a request still on its way ends before the run does

    def _mailbox_emails(self, mailbox: Mailbox, fetcher: ThreadPoolExecutor) -> Iterator[SourcedEmail]:
        chunk = settings.GMAIL_BATCH_SIZE
        ids = mailbox.pending_ids
        chunks = [ids[start : start + chunk] for start in range(0, len(ids), chunk)]
        ahead: Future[Fetched] | None = None
        for index, wanted in enumerate(chunks):
            if mailbox.failed or mailbox.provider is None:
                break
            if ahead is None:
                ahead = self._fetch_ahead(mailbox, wanted, fetcher)
            try:
                fetched = ahead.result()
            except ProviderError as error:
                self._leave_out(mailbox, error)
                break
            ahead = self._fetch_ahead(mailbox, chunks[index + 1], fetcher) if index + 1 < len(chunks) else None
            failing = any(not isinstance(error, ProviderNotFound) for error in fetched.failed.values())
            if failing and not fetched.emails and len(fetched.failed) > 1:
                # Nothing of the mailbox could be read: its provider is failing, not these messages. (404s
                # alone are not that: messages deleted, or not readable yet, each counted as its own.)
                self._leave_out(mailbox, next(iter(fetched.failed.values())))
                break
            if fetched.failed:
                self._fetch_failed(mailbox, fetched.failed)
            for email in sorted(fetched.emails, key=lambda email: email.received_at):
                # The folder is the cursor's that listed it: Gmail lists mail sent to oneself in both.
                yield SourcedEmail(mailbox, dataclasses.replace(email, folder=mailbox.folder))
        if ahead is not None:
            ahead.cancel()  # the mailbox was left out: what was fetched ahead is not used

    def _fetch_ahead(self, mailbox: Mailbox, wanted: list[str], fetcher: ThreadPoolExecutor) -> Future[Fetched]:
        assert mailbox.provider is not None
        self.record.guard()  # no fetch after consent is revoked or the lease is lost
        with log_context(integration_id=mailbox.integration.pk):
            fetch = in_context(mailbox.provider.fetch_emails, wanted)
        return fetcher.submit(fetch)

    def _fetch_failed(self, mailbox: Mailbox, failed: dict[str, ProviderError]) -> None:
        """Messages that could not be read while the rest of their mailbox could: count the failure
        durably; one that has failed EXTRACTION_FETCH_ATTEMPTS times (across runs) is quarantined, so
        that it never blocks its mailbox; the others keep their mailbox's cursor where it is.

        A 404 is a deletion (recorded as handled) only when an earlier run's read, DELETION_CONFIRM_AFTER
        ago or more, was a 404 too: two reads within one fetch are a moment apart, and a passing fault can
        last that long. The provider's own record of a deletion keeps such mail out of the delta already."""
        missing = [m for m, error in failed.items() if isinstance(error, ProviderNotFound)]
        deleted = fetch_failures_still_missing(
            integration_id=mailbox.integration.pk,
            message_ids=missing,
            before=timezone.now() - DELETION_CONFIRM_AFTER,
            purpose=mailbox.purpose,
        )
        failed = {m: error for m, error in failed.items() if m not in deleted}
        with transaction.atomic():
            self.record.hold_lease()
            if deleted:
                ledger_record(
                    entries=[
                        LedgerEntry(
                            mailbox.integration.pk,
                            i,
                            ProcessedEmail.Outcome.NO_TASKS,
                            0,
                            "deleted",
                            purpose=mailbox.purpose,
                        )
                        for i in deleted
                    ],
                    run_id=self.record.run.pk,
                )
            attempts = fetch_failure_record(
                integration_id=mailbox.integration.pk,
                failures={m: (error.code, error.message) for m, error in failed.items()},
                purpose=mailbox.purpose,
            )
        for message_id, error in failed.items():
            if attempts.get(message_id, 0) >= settings.EXTRACTION_FETCH_ATTEMPTS:
                self.writer.set_aside(
                    mailbox.integration.pk,
                    message_id,
                    f"fetch_{error.code}: {error.message}",
                    purpose=mailbox.purpose,
                )
            else:
                mailbox.unread[message_id] = error
        logger.warning(
            "extraction run %s could not read %d messages of integration %s",
            self.record.run.pk,
            len(failed),
            mailbox.integration.pk,
            extra={"integration_id": mailbox.integration.pk},
        )

    def close(self) -> None:
        """Let go of the mailboxes' connections (an IMAP server's; the HTTP providers hold none to close)."""
        for provider in {id(m.provider): m.provider for m in self.mailboxes if m.provider is not None}.values():
            provider_close(provider)

    def reports(self) -> dict[str, dict[str, Any]]:
        """What the run record says of each mailbox, by integration id (and ":sent" for its Sent mail)."""
        return {m.key: m.report() for m in self.mailboxes}

    def left_out_message(self) -> str:
        parts = []
        for mailbox in self.mailboxes:
            if mailbox.failed is not None:
                parts.append(f"{mailbox.name} was left out: {mailbox.failed.message}")
            elif mailbox.unread:
                parts.append(f"{mailbox.name}: {mailbox.report()['error']}")
        return " ".join(parts)
