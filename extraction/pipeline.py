"""One extraction run (DESIGN §5): fetch without saving, read in batches of ten, write idempotently, and
only then move every cursor, in one transaction.

The order is the product's promise: a cursor is saved only after every email before it is in the ledger
(DESIGN §1). A failure anywhere before the final commit leaves every cursor where it was, and the next
run fetches the same mail again and skips what the ledger already holds.

Its parts: extraction/reading.py reads the mailboxes into one stream of emails, extraction/batches.py keeps
the Gemini calls in flight, extraction/writing.py writes what each batch means; this module keeps the order
(consent, mailboxes, batches, commit) and the commit, and records how the run ended.

A run its person stops (extraction/controls.py) ends `cancelled` at a batch boundary, or at the commit, and
moves no cursor: what its batches wrote stays, and the next run fetches the same delta and reads the rest.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from accounts.selectors import ReadingChoices, reading_choices
from config.logcontext import log_context
from config.metrics import run_ended
from extraction.batches import BatchCalls, BatchStat, continued
from extraction.crashpoints import crash_point
from extraction.llm import GeminiClient, gemini_client
from extraction.models import INTERRUPTED, ExtractionRun, FetchFailure, ProcessedEmail
from extraction.prompt import PROMPT_VERSION
from extraction.reading import Mailbox, MailboxReader
from extraction.runrecord import INFRASTRUCTURE_ERRORS, LEASE_LOST, LeaseBusy, RunRecord, RunStopped
from extraction.services import lease_acquire, lease_give_back, lease_release, lease_unlock, queued_id
from extraction.writing import BatchWriter
from integrations.models import InboundMessage, Integration, SyncCursor
from integrations.services import cursor_filter_hash, integration_save_refreshed_credentials

__all__ = ["ExtractionPipeline", "LeaseBusy", "RunStopped", "extraction_run_execute"]

logger = logging.getLogger(__name__)


class ExtractionPipeline:
    """Runs one ExtractionRun to its end. Call `execute()` once."""

    def __init__(self, run: ExtractionRun, *, llm: GeminiClient | None = None) -> None:
        self.run = run
        self.llm = llm or gemini_client()
        self.record = RunRecord(run)
        self.writer = BatchWriter(self.record)
        self.reader = MailboxReader(self.record, self.writer)
        self.batch_stats: list[BatchStat] = []
        self.choices = ReadingChoices(consented=False, read_bulk_mail=False)  # read with the consent
        self.lease_given_back = False  # by the commit, in its transaction
        self.counted = False  # this delivery, in the run's `deliveries`
        self.started = time.monotonic()

    # The run ------------------------------------------------------------------------------------
    def execute(self) -> ExtractionRun:
        # Every line logged by the run, its threads and the libraries it calls carries its ids.
        with log_context(run_id=self.run.pk, user_id=self.run.user_id):
            return self._execute()

    def _execute(self) -> ExtractionRun:
        token = lease_acquire(run=self.run)
        if token is None:
            raise LeaseBusy(f"user {self.run.user_id} has a run in progress")
        self.record.token = token
        self.started = time.monotonic()
        try:
            # A delivery is counted when it takes the lease: a job that finds its run finished or being run
            # elsewhere costs nothing, and a run whose runner keeps dying is stopped (EXTRACTION_MAX_DELIVERIES).
            self.record.update(
                status=ExtractionRun.Status.RUNNING,
                prompt_version=PROMPT_VERSION,
                lease_token=token,
                started_at=timezone.now(),
                deliveries=F("deliveries") + 1,
            )
            self.counted = True
            if self.run.cancel_requested_at is not None:
                # Asked to stop, then its runner died (and the reaper queued it again): it ends before it reads
                # anything. (A stop asked as this runner took the run is seen at a batch or at the commit.)
                raise self.record.stop_seen()
            self._check_consent()
            self.reader.open(read_sent=self.choices.read_sent)
            calls = BatchCalls(
                self.record,
                self.llm,
                self.writer,
                self.reader.emails(),
                choices=self.choices,
                started=self.started,
            )
            self.batch_stats = calls.batch_stats
            calls.run()
            self._commit()
        except RunStopped as stop:
            self._finish(stop.status, stop.code, stop.message, retry_after=stop.retry_after)
        except SoftTimeLimitExceeded:
            # The job's time is up in the middle of a batch: its transaction rolled back; nothing moved.
            sent = ExtractionRun.objects.filter(pk=self.run.pk).values_list("emails_sent_to_llm", flat=True).first()
            cut = self.record.stopped() if self.record.stop_asked() else continued(sent or 0)
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
            self.reader.close()
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
        self.choices = choices
        if not choices.consented:
            raise RunStopped(
                ExtractionRun.Status.SKIPPED,
                "no_consent",
                "Skipped: AI reading is not allowed. Give consent to let Tasklift read new mail.",
            )

    # Commit -------------------------------------------------------------------------------------
    def _commit(self) -> None:
        """Move every cursor that may move, in one transaction, each a compare-and-swap, or none.

        The transaction opens by giving the lease back, which is its fence: the lease row stays locked until
        commit, and a runner whose token is no longer the row's gives nothing back and commits nothing. The
        run's outcome is written only if its person did not ask it to stop: a stopped run moves no cursor, even
        with every batch written (the next run lists the same mail, finds it all in the ledger, and moves them).
        That statement locks the run's row, so a stop asked meanwhile (extraction/controls.py locks it too) is
        either seen here or waits for the commit and is answered as too late: never lost between the two."""
        assert self.record.token is not None
        # Every copy that rode on an email of this run is written with it, or the cursors would pass it.
        assert self.writer.all_written(), "copies of this run's mail left unwritten"
        now = timezone.now()
        reports = self.reader.reports()
        with transaction.atomic():
            if not lease_give_back(user_id=self.run.user_id, token=self.record.token):
                raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)
            for group in self._by_integration():
                for mailbox in self._mark_read(group, now):
                    reports[mailbox.key]["after"] = mailbox.new_cursor
            left_out = [m for m in self.reader.mailboxes if m.held_back]
            ended = ExtractionRun.objects.filter(pk=self.run.pk, cancel_requested_at__isnull=True).update(
                status=ExtractionRun.Status.SUCCEEDED,
                finished_at=now,
                mailboxes=reports,
                error_code="partial" if left_out else "",
                error_message=self.reader.left_out_message() if left_out else "",
                updated_at=now,
            )
            if not ended:  # its person asked it to stop: every cursor moved above goes back with the raise
                raise self.record.stop_seen()
            crash_point("cursor_tx")
        self.lease_given_back = True
        crash_point("after_commit")
        self._save_credentials()

    def _by_integration(self) -> list[list[Mailbox]]:
        """The run's mailboxes, each integration's purposes (inbox, Sent mail) together."""
        groups: dict[int, list[Mailbox]] = {}
        for mailbox in self.reader.mailboxes:
            groups.setdefault(mailbox.integration.pk, []).append(mailbox)
        return list(groups.values())

    def _mark_read(self, group: list[Mailbox], now: datetime) -> list[Mailbox]:
        """Inside the commit: move the cursor of each purpose of one integration that is not held back, each a
        compare-and-swap on the value the run started from, and record what was read on the mailbox. A
        purpose held back holds only its own cursor; the mailbox counts as read successfully (its failures
        and throttle forgotten) only when every purpose of it was. Returns the purposes moved: none when
        the mailbox was disconnected during the run."""
        moving = [m for m in group if not m.held_back]
        if not moving:
            return []
        integration = moving[0].integration
        integrations = Integration.objects.filter(pk=integration.pk)
        for mailbox in moving:
            started_at = SyncCursor.objects.filter(pk=mailbox.cursor.pk, value=mailbox.cursor.value)
            if mailbox.new_cursor != mailbox.cursor.value or mailbox.resync:
                changes: dict[str, Any] = {"value": mailbox.new_cursor, "updated_at": now}
                if mailbox.resync:  # a new generation, for the query we run now
                    changes.update(
                        generation=F("generation") + 1,
                        filter_hash=cursor_filter_hash(provider=integration.provider, purpose=mailbox.purpose),
                    )
                if started_at.update(**changes) != 1:
                    return self._cursor_changed(mailbox)
            else:
                # Listed up to where it stood (no new history): nothing to write to the cursor, and the compare
                # rides on the mailbox's own update (which a disconnect committed meanwhile also turns away).
                integrations = integrations.filter(Exists(started_at)).exclude(status=Integration.Status.DISCONNECTED)
        read: dict[str, Any] = {"updated_at": now}
        if len(moving) == len(group):
            read.update(
                # Read as of its listing (its first folder's): mail that came after it is not in this run, and
                # the next look, a ring left unread, a resync all count from that moment, not the run's end.
                last_success_at=min((m.listed_at for m in group if m.listed_at), default=now),
                failure_count=0,
                throttle_count=0,
                retry_after=None,
                last_error_code="",
                last_error="",
            )
        if any(m.backfill_ids for m in moving):
            # Only the queued ids this run read leave the queue: one replayed meanwhile stays for the next.
            queued = integrations.select_for_update().values_list("backfill_pending", "read_anyway").first()
            if queued is None:
                return self._cursor_changed(moving[0])
            # A set: thousands of replayed ids stay linear.
            read_queue = {queued_id(m.purpose, i) for m in moving for i in m.backfill_ids}
            read["backfill_pending"] = [i for i in queued[0] if i not in read_queue]
            read["read_anyway"] = [i for i in queued[1] if i not in read_queue]
        resynced = [m for m in moving if m.resync]
        if resynced:
            read.update(
                resynced_at=now,
                resync_reason=resynced[0].resync,
                resynced_since=min(m.resync_since for m in resynced if m.resync_since),
                resync_not_read=sum(m.not_read for m in resynced),
            )
        if integrations.update(**read) != 1:
            return self._cursor_changed(moving[0])
        for mailbox in moving:
            if mailbox.purpose == SyncCursor.Purpose.FORWARDED:
                # The stored queue is the cursor: what the ledger now holds leaves it, with this commit (a
                # delivery retried meanwhile of a message read is in the ledger too, by its key).
                handled = ProcessedEmail.objects.filter(
                    integration_id=integration.pk, purpose=mailbox.purpose, message_id=OuterRef("key")
                )
                InboundMessage.objects.filter(integration_id=integration.pk).filter(Exists(handled)).delete()
            if mailbox.had_fetch_failures or mailbox.pending_ids:
                # Every message is read or set aside now: their failed reads are forgotten. (Only a runner
                # records them, so a purpose that had none when this run opened it, and read nothing, has none.)
                FetchFailure.objects.filter(integration_id=integration.pk, purpose=mailbox.purpose).delete()
        return moving

    def _cursor_changed(self, mailbox: Mailbox) -> list[Mailbox]:
        """The cursor is not where the run found it: nothing when it is gone with its mailbox (disconnected
        during the run: there is no cursor to move any more); otherwise nothing is moved, and the run fails."""
        if not SyncCursor.objects.filter(pk=mailbox.cursor.pk).exists():
            return []
        transaction.set_rollback(True)
        raise RunStopped(
            ExtractionRun.Status.FAILED,
            "cursor_conflict",
            f"{mailbox.integration}: the mailbox position changed during the run; nothing was moved.",
        )

    def _save_credentials(self) -> None:
        """Keep what a token refresh changed. After the outcome is recorded: a failure here is logged,
        never allowed to rewrite the run's record."""
        saved: set[int] = set()
        for mailbox in self.reader.mailboxes:
            if mailbox.provider is None or mailbox.integration.pk in saved:
                continue  # the purposes of a mailbox share its client
            saved.add(mailbox.integration.pk)
            try:
                integration_save_refreshed_credentials(integration=mailbox.integration, provider=mailbox.provider)
            except Exception:  # the run's outcome is already committed
                logger.exception("could not save refreshed credentials of integration %s", mailbox.integration.pk)

    # Record keeping -----------------------------------------------------------------------------
    def _interrupted(self, error: Exception) -> None:
        """Redis or PostgreSQL was lost under the run: neither the mail's fault nor the person's. The run goes
        back to the queue, its cursors where they were, and the reaper sends it again once its backoff is
        over (EXTRACTION_REAPER_SECONDS, doubling with each runner that died before). This delivery does not
        count toward EXTRACTION_MAX_DELIVERIES: only a runner that died while the services were up does.
        With PostgreSQL gone the write is tried again until it is back (a restart takes seconds), for at most
        EXTRACTION_OUTAGE_WRITE_SECONDS; after that the run stays `running` with its runner's lock gone, and
        the reaper takes it up as a dead runner's (counted) once the database is back."""
        logger.warning("extraction run %s lost its infrastructure: %s", self.run.pk, type(error).__name__)
        backoff = settings.EXTRACTION_REAPER_SECONDS * 2**self.run.deliveries  # the count before this delivery
        deadline = time.monotonic() + settings.EXTRACTION_OUTAGE_WRITE_SECONDS
        while True:
            try:
                connection.close_if_unusable_or_obsolete()  # a connection PostgreSQL dropped is made anew
                self.record.update(
                    status=ExtractionRun.Status.QUEUED,
                    error_code=INTERRUPTED,
                    error_message="Interrupted: Tasklift lost its connection to its own services. No mailbox "
                    "position moved; the run is queued again and goes on by itself.",
                    retry_after=timezone.now() + timedelta(seconds=backoff),
                    mailboxes=self.reader.reports(),
                    # Counted when it took the lease; an outage is not a death.
                    **({"deliveries": F("deliveries") - 1} if self.counted else {}),
                )
                return
            except (DatabaseError, InterfaceError):
                with contextlib.suppress(DatabaseError, InterfaceError):
                    connection.close()  # made anew at the next try
                if time.monotonic() >= deadline:
                    logger.warning("extraction run %s left for the reaper: the database is not reachable", self.run.pk)
                    return
                time.sleep(1)

    def _finish(self, status: str, code: str, message: str, *, retry_after: datetime | None = None) -> None:
        reports = self.reader.reports()
        self.record.update(
            status=status,
            error_code=code,
            error_message=message,
            finished_at=timezone.now(),
            mailboxes=reports,
            retry_after=retry_after,
        )
        self._save_credentials()


def extraction_run_execute(*, run: ExtractionRun, llm: GeminiClient | None = None) -> ExtractionRun:
    """Run `run` now, in this process. Raises LeaseBusy while another run of the person holds the lease."""
    return ExtractionPipeline(run, llm=llm).execute()
