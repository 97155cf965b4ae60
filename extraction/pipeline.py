"""One extraction run (DESIGN §5): fetch without saving, read in batches of ten, write idempotently, and
only then move every cursor, in one transaction.

The order is the product's promise: a cursor is saved only after every email before it is in the ledger
(DESIGN §1). A failure anywhere before the final commit leaves every cursor where it was, and the next
run fetches the same mail again and skips what the ledger already holds.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import parseaddr
from functools import cached_property
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from accounts.selectors import consent_is_current, reading_choices
from config.logcontext import in_context, log_context
from config.metrics import run_ended
from extraction.crashpoints import crash_point
from extraction.llm import (
    GeminiClient,
    LLMBadOutput,
    LLMError,
    LLMRejected,
    LLMResult,
    LLMUnavailable,
    gemini_client,
)
from extraction.models import INTERRUPTED, AlwaysReadSender, ExtractionRun, FetchFailure, ProcessedEmail
from extraction.prompt import PROMPT_VERSION, Prompt, temp_id
from extraction.selectors import email_keys_handled, fetch_failures_still_missing, nothing_to_read, resync_note
from extraction.services import (
    LedgerEntry,
    fetch_failure_record,
    lease_acquire,
    lease_alive,
    lease_give_back,
    lease_holds,
    lease_release,
    lease_unlock,
    ledger_known,
    ledger_record,
)
from integrations.mail.bulk import bulk_reason
from integrations.models import Integration, SyncCursor
from integrations.providers.base import (
    CursorExpired,
    Delta,
    Email,
    Fetched,
    MailProvider,
    ProviderError,
    ProviderNotFound,
    ProviderRateLimited,
)
from integrations.services import (
    CURSOR_FILTERS,
    cursor_fits,
    filter_hash,
    integration_mark_failed,
    integration_provider,
    integration_save_refreshed_credentials,
)
from tasks.services import EmailCopy, EmailTaskRow, task_insert_from_emails, task_link_copies

logger = logging.getLogger(__name__)


BACKFILL_MARGIN = timedelta(minutes=5)
# A message read that answers 404 again this long after an earlier run's 404 is taken as deleted: longer than
# a fault that passes (a message listed before it can be read, a replica behind), shorter than a poll.
DELETION_CONFIRM_AFTER = timedelta(seconds=60)
LEASE_LOST = "Stopped: another run of yours took over; it finishes the work."
# What losing Redis or PostgreSQL under a run raises: the run is queued again (`_interrupted`), not failed.
INFRASTRUCTURE_ERRORS = (redis.ConnectionError, redis.TimeoutError, OperationalError, InterfaceError)


class LeaseBusy(Exception):
    """Another run of this person holds the lease; try again later."""


class RunStopped(Exception):
    """The run cannot go on; it ends with `status` and a message a person can read. `retry_after`: no run
    of this person starts before then (Gemini asked to wait)."""

    def __init__(self, status: str, code: str, message: str, *, retry_after: datetime | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


@dataclass
class Mailbox:
    """One integration during a run: its client, the cursor it started from and the one it would move to."""

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
                f"{len(self.unread)} email(s) could not be read ({first.message}); they are read again next time, "
                f"and set aside for you after {settings.EXTRACTION_FETCH_ATTEMPTS} failed reads."
            )
        return {
            "provider": self.integration.provider,
            "address": self.integration.account_address,
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
        return resync_note(reason=self.resync, since=self.resync_since, not_read=self.not_read)


@dataclass(frozen=True)
class SourcedEmail:
    mailbox: Mailbox
    email: Email


@dataclass(frozen=True)
class _Batch:
    """A batch whose Gemini call (`call`, None when every email was read already) may be in flight."""

    batch: list[SourcedEmail]
    fresh: list[SourcedEmail]
    copies: list[SourcedEmail]
    call: Future[LLMResult] | None
    counter: _QueryCounter
    skipped: list[tuple[SourcedEmail, str]] = field(default_factory=list)  # bulk mail, with why
    prompt: Prompt | None = None  # built before its turn to be sent


@dataclass(frozen=True)
class BatchStat:
    emails: int
    tasks: int
    queries: int


class ExtractionPipeline:
    """Runs one ExtractionRun to its end. Call `execute()` once."""

    def __init__(self, run: ExtractionRun, *, llm: GeminiClient | None = None) -> None:
        self.run = run
        self.llm = llm or gemini_client()
        self.token: int | None = None
        self.mailboxes: list[Mailbox] = []
        self.batch_stats: list[BatchStat] = []
        self.reads_bulk = False  # the person's choice about bulk mail, read with the consent
        self.lease_given_back = False  # by the commit, in its transaction
        # Emails sent to Gemini in this run and not yet written, by Message-ID, with the copies of each that
        # reached another mailbox in the same run: those ride along, written (linked) with their original.
        self.riders: dict[str, list[SourcedEmail]] = {}

    # The run ------------------------------------------------------------------------------------
    def execute(self) -> ExtractionRun:
        # Every line logged by the run, its threads and the libraries it calls carries its ids.
        with log_context(run_id=self.run.pk, user_id=self.run.user_id):
            return self._execute()

    def _execute(self) -> ExtractionRun:
        token = lease_acquire(run=self.run)
        if token is None:
            raise LeaseBusy(f"user {self.run.user_id} has a run in progress")
        self.token = token
        self.started = time.monotonic()
        try:
            # A delivery is counted when it takes the lease: a job that finds its run finished or being run
            # elsewhere costs nothing, and a run whose runner keeps dying is stopped (EXTRACTION_MAX_DELIVERIES).
            self._update(
                status=ExtractionRun.Status.RUNNING,
                prompt_version=PROMPT_VERSION,
                lease_token=token,
                started_at=timezone.now(),
                deliveries=F("deliveries") + 1,
            )
            self._check_consent()
            self._open_mailboxes()
            self._process_all()
            self._commit()
        except RunStopped as stop:
            self._finish(stop.status, stop.code, stop.message, retry_after=stop.retry_after)
        except SoftTimeLimitExceeded:
            # The job's time is up in the middle of a batch: its transaction rolled back; nothing moved.
            sent = ExtractionRun.objects.filter(pk=self.run.pk).values_list("emails_sent_to_llm", flat=True).first()
            cut = self._continued(sent or 0)
            self._finish(cut.status, cut.code, cut.message)
        except INFRASTRUCTURE_ERRORS as error:
            self._interrupted(error)
        except Exception:
            logger.exception("extraction run %s crashed", self.run.pk)
            self._finish(
                ExtractionRun.Status.FAILED,
                "internal_error",
                "The run stopped on an unexpected error. No mailbox position was moved; the next run retries.",
            )
        finally:
            if self.lease_given_back:
                lease_unlock(user_id=self.run.user_id, token=token)
            else:
                lease_release(user_id=self.run.user_id, token=token)
        self.run.refresh_from_db()  # the counters are summed in the database
        if self.run.lease_token == token:  # this delivery wrote the end, not one that took the run over
            run_ended(self.run)
        return self.run

    def _check_consent(self) -> None:
        choices = reading_choices(user_id=self.run.user_id)
        self.reads_bulk = choices.read_bulk_mail
        if not choices.consented:
            raise RunStopped(
                ExtractionRun.Status.SKIPPED,
                "no_consent",
                "Skipped: AI reading is not allowed. Give consent to let Tasklift read new mail.",
            )

    # Fetch --------------------------------------------------------------------------------------
    def _open_mailboxes(self) -> None:
        # Each active mailbox with its cursor (one without a cursor has nothing to read from), in the
        # mailboxes' own order, and whether messages of it failed to read before (the commit forgets them).
        cursors = (
            SyncCursor.objects.filter(
                integration__user_id=self.run.user_id,
                integration__status=Integration.Status.ACTIVE,
                purpose=SyncCursor.Purpose.TASK_EXTRACTION,
            )
            .select_related("integration")
            .annotate(fetch_failures=Exists(FetchFailure.objects.filter(integration_id=OuterRef("integration_id"))))
            .order_by("integration__provider", "integration__account_address")
        )
        for cursor in cursors:
            with log_context(integration_id=cursor.integration_id):
                self._open_mailbox(cursor)
        if any(m.pending_ids for m in self.mailboxes):
            # How far each mailbox is listed, while the batches run: the doorbell reads it (scheduling.py).
            # With nothing to read, the commit's update, a moment later, is the first to carry it.
            self._update(mailboxes=self._reports())
        if not self.mailboxes:
            raise RunStopped(ExtractionRun.Status.SKIPPED, *nothing_to_read(user_id=self.run.user_id))
        if all(m.failed for m in self.mailboxes):
            first = self.mailboxes[0].failed
            assert first is not None
            raise RunStopped(ExtractionRun.Status.FAILED, first.code, self._left_out_message())

    def _open_mailbox(self, cursor: SyncCursor) -> None:
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
                integration_provider(integration=integration),
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
        try:
            if mailbox.resync:
                delta = self._resync(mailbox)
            else:
                try:
                    delta = mailbox.provider.fetch_delta(mailbox.cursor.value)
                except CursorExpired:
                    mailbox.resync = "expired"
                    delta = self._resync(mailbox)
            crash_point("fetch")
        except ProviderError as error:
            self._leave_out(mailbox, error)
            return
        mailbox.backfill_ids = list(mailbox.integration.backfill_pending)
        new_ids = self._bound_backfill(mailbox, delta) if delta.backfill else delta.message_ids
        candidates = list(dict.fromkeys([*mailbox.backfill_ids, *new_ids]))
        known = ledger_known(integration_id=mailbox.integration.pk, message_ids=candidates)
        mailbox.new_cursor = delta.new_cursor
        mailbox.pending_ids = [i for i in candidates if i not in known]
        if candidates:
            ExtractionRun.objects.filter(pk=self.run.pk).update(
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
        integration_id = mailbox.integration.pk
        delta = mailbox.provider.resync(
            mailbox.resync_since,
            settings.EXTRACTION_RESYNC_MAX_MESSAGES,
            cursor=mailbox.cursor.value,
            handled=lambda ids: ledger_known(integration_id=integration_id, message_ids=ids),
        )
        mailbox.not_read = delta.not_read
        logger.warning(
            "extraction run %s resyncs integration %s (%s): %d emails listed, %d over the bound",
            self.run.pk,
            mailbox.integration.pk,
            mailbox.resync,
            len(delta.message_ids),
            delta.not_read,
        )
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
            "extraction run %s left out integration %s: %s",
            self.run.pk,
            mailbox.integration.pk,
            error.code,
            extra={"integration_id": mailbox.integration.pk},
        )

    def _emails(self) -> Generator[SourcedEmail]:
        """Every pending email of every mailbox, fetched in provider batches as they are needed, one ahead:
        while a chunk's emails are prepared and sent, the next chunk's request is in flight on a thread of
        its own (HTTP only; what a fetch writes is written here). Each fetch follows a check of the lease
        and the consent, as before."""
        fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fetch-run-{self.run.pk}")
        try:
            for mailbox in self.mailboxes:
                yield from self._mailbox_emails(mailbox, fetcher)
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
            for email in fetched.emails:
                yield SourcedEmail(mailbox, email)
        if ahead is not None:
            ahead.cancel()  # the mailbox was left out: what was fetched ahead is not used

    def _fetch_ahead(self, mailbox: Mailbox, wanted: list[str], fetcher: ThreadPoolExecutor) -> Future[Fetched]:
        assert mailbox.provider is not None
        self._guard_batch()  # no fetch after consent is revoked or the lease is lost
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
        )
        failed = {m: error for m, error in failed.items() if m not in deleted}
        with transaction.atomic():
            self._hold_lease()
            if deleted:
                ledger_record(
                    entries=[
                        LedgerEntry(mailbox.integration.pk, i, ProcessedEmail.Outcome.NO_TASKS, 0, "deleted")
                        for i in deleted
                    ],
                    run_id=self.run.pk,
                )
            attempts = fetch_failure_record(
                integration_id=mailbox.integration.pk,
                failures={m: (error.code, error.message) for m, error in failed.items()},
            )
        for message_id, error in failed.items():
            if attempts.get(message_id, 0) >= settings.EXTRACTION_FETCH_ATTEMPTS:
                self._set_aside(mailbox, message_id, f"fetch_{error.code}: {error.message}")
            else:
                mailbox.unread[message_id] = error
        logger.warning(
            "extraction run %s could not read %d messages of integration %s",
            self.run.pk,
            len(failed),
            mailbox.integration.pk,
            extra={"integration_id": mailbox.integration.pk},
        )

    def _batches(self) -> Generator[list[SourcedEmail]]:
        batch: list[SourcedEmail] = []
        for item in self._emails():
            batch.append(item)
            if len(batch) == settings.EXTRACTION_BATCH_SIZE:
                yield batch
                batch = []
        if batch:
            yield batch

    # The batches --------------------------------------------------------------------------------
    def _process_all(self) -> None:
        """Every batch, with up to EXTRACTION_LLM_CONCURRENCY Gemini calls in flight (DESIGN §5 needs no
        order between batches: each is written in its own transaction, and the cursors move only after all).

        This thread does everything else, in batch order: fetching (which stays at most that many batches
        ahead of the calls), the database, the checks of lease and consent before each new call. A call's
        thread only calls Gemini. When a batch ends the run (an outage, a revoked consent, a lost lease), the
        calls not yet started are cancelled and the answers of those in flight are never written.
        """
        limit = settings.EXTRACTION_LLM_CONCURRENCY
        pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix=f"gemini-run-{self.run.pk}")
        in_flight: deque[_Batch] = deque()
        sent = 0
        batches = self._batches()
        try:
            try:
                # Each batch is fetched while the calls before it are in flight, then waits for a free place.
                for emails in batches:
                    if self._slice_over(sent):
                        break  # this batch (fetched, not sent) and the rest are the continuation's
                    prepared = self._prepare_batch(emails)
                    while len(in_flight) >= limit:
                        self._finish_batch(in_flight.popleft())
                    in_flight.append(self._start_batch(prepared, pool))
                    sent += len(emails)
                else:
                    sent = -1  # every batch taken
            except RunStopped as stop:
                if stop.code == "consent_revoked":
                    # Nothing more is sent; the answers already asked for (under consent) are written.
                    while in_flight:
                        self._finish_batch(in_flight.popleft())
                raise
            while in_flight:
                self._finish_batch(in_flight.popleft())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            batches.close()  # and with it the fetch ahead (_emails)
        if sent >= 0:
            raise self._continued(sent)

    def _slice_over(self, sent: int) -> bool:
        """Whether the run has taken its share: EXTRACTION_RUN_MAX_EMAILS emails (so one person's backlog
        does not hold a worker while other people's fresh mail waits), or EXTRACTION_RUN_SECONDS of time
        (so it ends well before the job's time limit)."""
        elapsed = time.monotonic() - self.started
        return sent >= settings.EXTRACTION_RUN_MAX_EMAILS or elapsed >= settings.EXTRACTION_RUN_SECONDS

    @staticmethod
    def _continued(sent: int) -> RunStopped:
        """The end of a slice of a backlog: what was read is written (tasks and ledger), no cursor moves,
        and the next run, queued at once, skips what the ledger holds and reads on (DESIGN §1 holds)."""
        return RunStopped(
            ExtractionRun.Status.CONTINUED,
            "continued",
            f"{sent} emails read in this part of a large backlog; the next run, already queued, reads on.",
        )

    def _prepare_batch(self, batch: list[SourcedEmail]) -> _Batch:
        """What of the batch to send, and its prompt, built here while earlier calls are in flight."""
        counter = _QueryCounter()
        with connection.execute_wrapper(counter):
            # The same message reached another mailbox of the person and was read there: it is not sent to
            # Gemini again, only linked (one task per email, whichever mailbox it came through).
            handled = email_keys_handled(
                user_id=self.run.user_id, keys=[item.email.internet_message_id for item in batch]
            )
        copies = [item for item in batch if item.email.internet_message_id in handled]
        unread = [item for item in batch if item.email.internet_message_id not in handled]
        # Bulk mail (newsletters, notifications, mailing lists) is not sent: recorded as skipped, with why.
        reasons = [(item, self._bulk_reason(item)) for item in unread]  # once per email
        skipped = [(item, reason) for item, reason in reasons if reason]
        fresh = [item for item, reason in reasons if not reason and not self._rides(item)]
        prompt = self.llm.prepare([item.email for item in fresh]) if fresh else None
        return _Batch(batch, fresh, copies, None, counter, skipped, prompt)

    def _rides(self, item: SourcedEmail) -> bool:
        """Whether this email is a copy of one already on its way to Gemini in this run (a batch in flight,
        or earlier in this one): it is not sent again but written with that one, in its transaction, so that
        neither a copy is recorded before its task exists nor the task without the copy's link."""
        key = item.email.internet_message_id
        if not key:
            return False
        if key in self.riders:
            self.riders[key].append(item)
            return True
        self.riders[key] = []
        return False

    def _start_batch(self, prepared: _Batch, pool: ThreadPoolExecutor) -> _Batch:
        """Send the batch's call, once the lease and the consent are checked (right before sending)."""
        with connection.execute_wrapper(prepared.counter):
            self._guard_batch()
        if prepared.prompt is None:
            return prepared
        emails = [item.email for item in prepared.fresh]
        call = in_context(self.llm.extract, emails, prompt=prepared.prompt)
        return dataclasses.replace(prepared, call=pool.submit(call))

    @cached_property
    def always_read(self) -> set[str]:
        """The senders whose mail the person always has read: asked once, when an email may first be
        skipped as bulk (a run that reads nothing never asks)."""
        return set(AlwaysReadSender.objects.filter(user_id=self.run.user_id).values_list("address", flat=True))

    def _bulk_reason(self, item: SourcedEmail) -> str | None:
        """Why the bulk rule skips this email, or None to read it: never when the person reads bulk mail,
        for a sender they always read, or for an email they asked to have read ("read this one")."""
        email = item.email
        if self.reads_bulk or item.email.message_id in item.mailbox.integration.read_anyway:
            return None
        if parseaddr(email.sender)[1].lower() in self.always_read:
            return None
        return bulk_reason(email.list_headers, email.provider_category)

    def _finish_batch(self, started: _Batch) -> None:
        with connection.execute_wrapper(started.counter):
            if started.call is None:
                tasks = self._write([], None, copies=started.copies, skipped=started.skipped)
            else:
                try:
                    result = self._read(started.fresh, first=started.call)
                except _Unread as unread:
                    tasks = self._isolate(started.fresh, unread.error)
                    if started.copies or started.skipped:
                        self._write([], None, copies=started.copies, skipped=started.skipped)
                else:
                    tasks = self._write(started.fresh, result, copies=started.copies, skipped=started.skipped)
        self.batch_stats.append(BatchStat(emails=len(started.batch), tasks=tasks, queries=started.counter.count))

    def _guard_batch(self) -> None:
        """Before each batch: the lease is still ours, and consent still stands (a revoke stops the run)."""
        assert self.token is not None
        if not lease_alive(user_id=self.run.user_id, token=self.token):
            raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)
        if not consent_is_current(user_id=self.run.user_id):
            raise RunStopped(
                ExtractionRun.Status.CANCELLED,
                "consent_revoked",
                "Stopped: AI consent was revoked during the run. Nothing more was sent to Gemini.",
            )

    def _read(self, batch: list[SourcedEmail], *, first: Future[LLMResult] | None = None) -> LLMResult:
        """Gemini's validated answer for the batch.

        Raises _Unread when Gemini gave no usable answer in a way that may follow the batch's content
        (answers rejected on every attempt, a 5xx or timeout after the client's retries, a 400 about the
        request): the caller isolates the email that causes it. An error that cannot follow content (rate
        limiting, a refused key or model) ends the run: no cursor moves and the next run picks up the rest.
        """
        last_error: LLMBadOutput | None = None
        for attempt in range(settings.EXTRACTION_BAD_OUTPUT_ATTEMPTS):
            if attempt:
                self._guard_batch()
            try:
                if attempt == 0 and first is not None:
                    return first.result()  # the call started when the batch was fetched
                return self.llm.extract([item.email for item in batch])
            except LLMBadOutput as error:
                self._count_llm(calls=error.calls, prompt=error.usage.prompt_tokens, output=error.usage.output_tokens)
                self._reject(error, batch)
                last_error = error
            except LLMError as error:
                self._count_llm(calls=error.calls, prompt=error.usage.prompt_tokens, output=error.usage.output_tokens)
                if not _may_follow_content(error):
                    raise self._outage(error) from error
                raise _Unread(error) from error
        assert last_error is not None
        raise _Unread(last_error)

    def _isolate(self, batch: list[SourcedEmail], error: LLMError) -> int:
        """Split a batch that Gemini cannot read until the email that causes it stands alone; quarantine
        that one (durably, replayable) and let the rest proceed. Returns the tasks created.

        An outage looks the same from one batch, so when Gemini failed (rather than answered badly), a
        probe, a harmless email of our own, tells the two apart before any split and before any
        quarantine: if the probe fails too, Gemini is down and the run ends with nothing set aside.
        """
        if not isinstance(error, LLMBadOutput):
            self._probe(error)
        if len(batch) == 1:
            if not isinstance(error, LLMBadOutput):  # Gemini reads again: one more try of this email alone
                self._guard_batch()
                try:
                    return self._write(batch, self._read(batch))
                except _Unread as unread:
                    error = unread.error
            self._quarantine(batch[0], error)
            return 0
        created = 0
        middle = len(batch) // 2
        for half in (batch[:middle], batch[middle:]):
            self._guard_batch()
            try:
                result = self._read(half)
            except _Unread as unread:
                created += self._isolate(half, unread.error)
            else:
                created += self._write(half, result)
        return created

    def _probe(self, error: LLMError) -> None:
        """Whether Gemini reads anything now; if not, the run ends as an outage."""
        try:
            result = self.llm.probe()
        except LLMError as probe_error:
            usage = probe_error.usage
            self._count_llm(calls=probe_error.calls, prompt=usage.prompt_tokens, output=usage.output_tokens)
            raise self._outage(error) from probe_error
        self._count_llm(calls=result.calls, prompt=result.usage.prompt_tokens, output=result.usage.output_tokens)

    @staticmethod
    def _outage(error: LLMError) -> RunStopped:
        retry_after = None
        if isinstance(error, LLMUnavailable) and error.code == "rate_limited":
            # Gemini 429: this person's next run waits as long as Gemini asked (or a first backoff step).
            wait = error.retry_after if error.retry_after is not None else settings.PROVIDER_BACKOFF_INITIAL_S
            retry_after = timezone.now() + timedelta(seconds=wait)
        return RunStopped(
            ExtractionRun.Status.FAILED,
            f"llm_{error.code}",
            f"Gemini could not be reached ({error.message}). Tasks from earlier batches are kept; "
            "no mailbox position moved, and the next run picks up the rest.",
            retry_after=retry_after,
        )

    def _quarantine(self, item: SourcedEmail, error: LLMError) -> None:
        """Set the email aside, and its copies that reached other mailboxes in this run with it."""
        for each in (item, *self.riders.pop(item.email.internet_message_id, [])):
            self._set_aside(each.mailbox, each.email.message_id, f"llm_{error.code}: {error.message}")

    def _set_aside(self, mailbox: Mailbox, message_id: str, reason: str) -> None:
        """Quarantine one email durably: in the ledger (so the cursor may pass it), replayable by a person."""
        with transaction.atomic():
            self._hold_lease()
            ledger_record(
                entries=[
                    LedgerEntry(mailbox.integration.pk, message_id, ProcessedEmail.Outcome.QUARANTINED, 0, reason)
                ],
                run_id=self.run.pk,
            )
            ExtractionRun.objects.filter(pk=self.run.pk).update(emails_quarantined=F("emails_quarantined") + 1)
        logger.warning(
            "extraction run %s quarantined one email of integration %s",
            self.run.pk,
            mailbox.integration.pk,
            extra={"integration_id": mailbox.integration.pk},
        )

    def _hold_lease(self) -> None:
        """Inside a write transaction: lock the lease row until commit and check the token, so a runner
        that lost the lease writes nothing."""
        assert self.token is not None
        if not lease_holds(user_id=self.run.user_id, token=self.token):
            raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)

    def _write(
        self,
        batch: list[SourcedEmail],
        result: LLMResult | None,
        *,
        copies: Sequence[SourcedEmail] = (),
        skipped: Sequence[tuple[SourcedEmail, str]] = (),
    ) -> int:
        """The batch's tasks and ledger rows in one transaction: both or neither. `copies` are emails read
        through another mailbox already: linked to their tasks and recorded, not read (as are the copies
        riding on the batch's emails, see _rides). `skipped` is bulk
        mail not read, recorded with its reason (handled: the cursor may pass it)."""
        rows: list[EmailTaskRow] = []
        entries: list[LedgerEntry] = []
        copies = [*copies, *(rider for item in batch for rider in self.riders.pop(item.email.internet_message_id, []))]
        for index, item in enumerate(batch):
            assert result is not None
            email, integration = item.email, item.mailbox.integration
            found = result.tasks.get(temp_id(index), [])  # by position: two mailboxes may share an id
            rows.extend(
                EmailTaskRow(
                    user_id=self.run.user_id,
                    integration_id=integration.pk,
                    message_id=email.message_id,
                    email_key=email.internet_message_id,
                    title=task.title,
                    due_date=task.due_date,
                    priority=task.priority or "",
                    email_link=email.web_link,
                    email_sender=email.sender,
                    email_subject=email.subject,
                    email_received_at=email.received_at,
                    run_id=self.run.pk,
                )
                for task in found
            )
            outcome = ProcessedEmail.Outcome.TASKS if found else ProcessedEmail.Outcome.NO_TASKS
            entries.append(
                LedgerEntry(integration.pk, email.message_id, outcome, len(found), email_key=email.internet_message_id)
            )
        linked = [
            EmailCopy(
                self.run.user_id,
                item.mailbox.integration.pk,
                item.email.message_id,
                item.email.internet_message_id,
                item.email.web_link,
            )
            for item in copies
        ]
        entries += [
            LedgerEntry(
                item.mailbox.integration.pk,
                item.email.message_id,
                ProcessedEmail.Outcome.NO_TASKS,
                0,
                "read through another mailbox",
                email_key=item.email.internet_message_id,
            )
            for item in copies
        ]
        entries += [
            LedgerEntry(
                item.mailbox.integration.pk,
                item.email.message_id,
                ProcessedEmail.Outcome.SKIPPED,
                0,
                f"bulk:{reason}",
                email_key=item.email.internet_message_id,
                sender=item.email.sender,
                subject=item.email.subject,
            )
            for item, reason in skipped
        ]
        with transaction.atomic():
            self._hold_lease()
            created = task_insert_from_emails(rows=rows)
            task_link_copies(copies=linked)
            ledger_record(entries=entries, run_id=self.run.pk)
            crash_point("batch_tx")
            ExtractionRun.objects.filter(pk=self.run.pk).update(
                emails_sent_to_llm=F("emails_sent_to_llm") + len(batch),
                emails_already_done=F("emails_already_done") + len(copies),
                emails_cut=F("emails_cut") + (result.cut if result else 0),
                emails_skipped=F("emails_skipped") + len(skipped),
                secrets_redacted=F("secrets_redacted") + (sum(result.redacted.values()) if result else 0),
                tasks_created=F("tasks_created") + created,
                llm_calls=F("llm_calls") + (result.calls if result else 0),
                prompt_tokens=F("prompt_tokens") + (result.usage.prompt_tokens if result else 0),
                output_tokens=F("output_tokens") + (result.usage.output_tokens if result else 0),
                updated_at=timezone.now(),
            )
        crash_point("after_batch")
        return created

    # Commit -------------------------------------------------------------------------------------
    def _commit(self) -> None:
        """Move every cursor that may move, in one transaction, each a compare-and-swap, or none.

        The transaction opens by giving the lease back, which is its fence: the lease row stays locked until
        commit, and a runner whose token is no longer the row's gives nothing back and commits nothing."""
        assert self.token is not None
        # Every copy that rode on an email of this run is written with it, or the cursors would pass it.
        assert not any(self.riders.values()), "copies of this run's mail left unwritten"
        now = timezone.now()
        reports = self._reports()
        with transaction.atomic():
            if not lease_give_back(user_id=self.run.user_id, token=self.token):
                raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)
            for mailbox in self.mailboxes:
                if not mailbox.held_back and self._mark_read(mailbox, now):
                    reports[str(mailbox.integration.pk)]["after"] = mailbox.new_cursor
            left_out = [m for m in self.mailboxes if m.held_back]
            ExtractionRun.objects.filter(pk=self.run.pk).update(
                status=ExtractionRun.Status.SUCCEEDED,
                finished_at=now,
                mailboxes=reports,
                error_code="partial" if left_out else "",
                error_message=self._left_out_message() if left_out else "",
                updated_at=now,
            )
            crash_point("cursor_tx")
        self.lease_given_back = True
        crash_point("after_commit")
        self._save_credentials()

    def _mark_read(self, mailbox: Mailbox, now: datetime) -> bool:
        """Inside the commit: move the mailbox's cursor, a compare-and-swap on the value the run started
        from, and record a successful read. False when the mailbox was disconnected during the run."""
        started_at = SyncCursor.objects.filter(pk=mailbox.cursor.pk, value=mailbox.cursor.value)
        integrations = Integration.objects.filter(pk=mailbox.integration.pk)
        if mailbox.new_cursor != mailbox.cursor.value or mailbox.resync:
            changes: dict[str, Any] = {"value": mailbox.new_cursor, "updated_at": now}
            if mailbox.resync:  # a new generation, for the query we run now
                changes.update(
                    generation=F("generation") + 1,
                    filter_hash=filter_hash(CURSOR_FILTERS[mailbox.integration.provider]),
                )
            if started_at.update(**changes) != 1:
                return self._cursor_changed(mailbox)
        else:
            # Listed up to where it stood (no new history): nothing to write to the cursor, and the compare
            # rides on the mailbox's own update (which a disconnect committed meanwhile also turns away).
            integrations = integrations.filter(Exists(started_at)).exclude(status=Integration.Status.DISCONNECTED)
        read: dict[str, Any] = {
            "last_success_at": now,
            "failure_count": 0,
            "throttle_count": 0,
            "retry_after": None,
            "last_error_code": "",
            "last_error": "",
        }
        if mailbox.backfill_ids:
            # Only the queued ids this run read leave the queue: one replayed meanwhile stays for the next.
            queued = integrations.select_for_update().values_list("backfill_pending", "read_anyway").first()
            if queued is None:
                return self._cursor_changed(mailbox)
            read_queue = set(mailbox.backfill_ids)  # a set: thousands of replayed ids stay linear
            read["backfill_pending"] = [i for i in queued[0] if i not in read_queue]
            read["read_anyway"] = [i for i in queued[1] if i not in read_queue]
        if mailbox.resync:
            read.update(
                resynced_at=now,
                resync_reason=mailbox.resync,
                resynced_since=mailbox.resync_since,
                resync_not_read=mailbox.not_read,
            )
        if integrations.update(**read) != 1:
            return self._cursor_changed(mailbox)
        if mailbox.had_fetch_failures or mailbox.pending_ids:
            # Every message is read or set aside now: their failed reads are forgotten. (Only a runner
            # records them, so a mailbox that had none when this run opened it, and read nothing, has none.)
            FetchFailure.objects.filter(integration_id=mailbox.integration.pk).delete()
        return True

    def _cursor_changed(self, mailbox: Mailbox) -> bool:
        """The cursor is not where the run found it: False when it is gone with its mailbox (disconnected
        during the run: there is no cursor to move any more); otherwise nothing is moved, and the run fails."""
        if not SyncCursor.objects.filter(pk=mailbox.cursor.pk).exists():
            return False
        transaction.set_rollback(True)
        raise RunStopped(
            ExtractionRun.Status.FAILED,
            "cursor_conflict",
            f"{mailbox.integration}: the mailbox position changed during the run; nothing was moved.",
        )

    def _save_credentials(self) -> None:
        """Keep what a token refresh changed. After the outcome is recorded: a failure here is logged,
        never allowed to rewrite the run's record."""
        for mailbox in self.mailboxes:
            if mailbox.provider is None:
                continue
            try:
                integration_save_refreshed_credentials(integration=mailbox.integration, provider=mailbox.provider)
            except Exception:  # the run's outcome is already committed
                logger.exception("could not save refreshed credentials of integration %s", mailbox.integration.pk)

    def _reports(self) -> dict[str, dict[str, Any]]:
        """What the run record says of each mailbox, by integration id."""
        return {str(m.integration.pk): m.report() for m in self.mailboxes}

    # Record keeping -----------------------------------------------------------------------------
    def _left_out_message(self) -> str:
        parts = []
        for mailbox in self.mailboxes:
            if mailbox.failed is not None:
                parts.append(f"{mailbox.integration} was left out: {mailbox.failed.message}")
            elif mailbox.unread:
                parts.append(f"{mailbox.integration}: {mailbox.report()['error']}")
        return " ".join(parts)

    def _reject(self, error: LLMBadOutput, batch: list[SourcedEmail]) -> None:
        self.run.refresh_from_db(fields=["rejections"])
        # Codes and counts only: what Gemini answered is never kept (it may quote the mail).
        rejections = [*self.run.rejections, {"emails": len(batch), "code": error.code}]
        self._update(rejections=rejections)

    def _count_llm(self, *, calls: int, prompt: int = 0, output: int = 0) -> None:
        ExtractionRun.objects.filter(pk=self.run.pk).update(
            llm_calls=F("llm_calls") + calls,
            prompt_tokens=F("prompt_tokens") + prompt,
            output_tokens=F("output_tokens") + output,
        )

    def _update(self, **fields: Any) -> None:
        """Write the run's record, unless another delivery of this run took it over (its lease token)."""
        runs = ExtractionRun.objects.filter(pk=self.run.pk)
        if "lease_token" not in fields:
            runs = runs.filter(lease_token=self.token)
        runs.update(updated_at=timezone.now(), **fields)
        for name, value in fields.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self.run, name, value)

    def _interrupted(self, error: Exception) -> None:
        """Redis or PostgreSQL was lost under the run: neither the mail's fault nor the person's. The run goes
        back to the queue, its cursors where they were, and the reaper sends it again once its backoff is
        over (EXTRACTION_REAPER_SECONDS, doubling with each delivery; EXTRACTION_MAX_DELIVERIES stops it).
        With PostgreSQL still gone nothing can be written: the run stays `running` with its runner's lock
        gone, and the reaper takes it up as a dead runner's once the database is back."""
        logger.warning("extraction run %s lost its infrastructure: %s", self.run.pk, type(error).__name__)
        backoff = settings.EXTRACTION_REAPER_SECONDS * 2**self.run.deliveries  # the count before this delivery
        try:
            connection.close_if_unusable_or_obsolete()  # a connection PostgreSQL dropped is made anew
            self._update(
                status=ExtractionRun.Status.QUEUED,
                error_code=INTERRUPTED,
                error_message="Interrupted: Tasklift lost its connection to its own services. No mailbox position "
                "moved; the run is queued again and goes on by itself.",
                retry_after=timezone.now() + timedelta(seconds=backoff),
                mailboxes=self._reports(),
            )
        except DatabaseError:
            logger.warning("extraction run %s left for the reaper: the database is not reachable", self.run.pk)

    def _finish(self, status: str, code: str, message: str, *, retry_after: datetime | None = None) -> None:
        reports = self._reports()
        self._update(
            status=status,
            error_code=code,
            error_message=message,
            finished_at=timezone.now(),
            mailboxes=reports,
            retry_after=retry_after,
        )
        self._save_credentials()


class _Unread(Exception):
    """Gemini gave no usable answer for a batch, in a way that may follow the batch's content."""

    def __init__(self, error: LLMError) -> None:
        super().__init__(str(error))
        self.error = error


def _may_follow_content(error: LLMError) -> bool:
    """Whether one email could be why a call failed: a bad answer, a 5xx or timeout, a 400 about the
    request. Rate limiting and a refused key, model or permission are the same for every email."""
    if isinstance(error, LLMUnavailable):
        return error.code != "rate_limited"
    if isinstance(error, LLMRejected):
        return error.status == 400
    return isinstance(error, LLMBadOutput)


class _QueryCounter:
    """Counts the SQL statements run inside a batch (for the benchmark and the batch statistics)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def extraction_run_execute(*, run: ExtractionRun, llm: GeminiClient | None = None) -> ExtractionRun:
    """Run `run` now, in this process. Raises LeaseBusy while another run of the person holds the lease."""
    return ExtractionPipeline(run, llm=llm).execute()
