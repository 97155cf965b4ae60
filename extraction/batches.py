"""The batches of a run in flight (DESIGN §5): emails grouped in tens, each batch prepared (copies of mail
handled already, bulk mail, its prompt) while earlier calls are in flight, sent under the lease and the
consent, its answer validated, and an email that Gemini cannot read isolated by splitting its batch.

Emails of one conversation are read in the order the stream gives them (the reader lists each mailbox's
mail oldest first): a later one never shares a batch with an earlier one (it is held for the next batch),
and a batch is prepared only once every batch in flight with an earlier email of its conversations is
written. So a reply's prompt carries the items its earlier email made (item_1 …), and may close them.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from email.utils import parseaddr
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from accounts.selectors import ReadingChoices
from config.logcontext import in_context
from extraction.llm import GeminiClient, LLMBadOutput, LLMError, LLMRejected, LLMResult, LLMUnavailable
from extraction.models import AlwaysReadSender, ExtractionRun
from extraction.muting import muted_reasons
from extraction.prompt import MAX_ITEMS_PER_EMAIL, MAX_READER_ADDRESSES, OpenItem, Prompt
from extraction.reading import SourcedEmail
from extraction.runrecord import STOPPED, RunRecord, RunStopped
from extraction.selectors import email_keys_handled
from extraction.writing import BatchWriter, answers_earlier
from integrations.mail.bulk import bulk_reason
from integrations.mail.message import Email
from integrations.models import Integration
from tasks.conversation import conversation_open_items, items_before


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

    def waits_for(self, emails: list[SourcedEmail]) -> bool:
        """Whether `emails` hold a later email of a conversation this batch has an email of (not a copy of
        the same message, which rides on it): they must wait until this batch is written."""
        return any(_follows(item, self.batch) for item in emails)


def _follows(item: SourcedEmail, earlier: list[SourcedEmail]) -> bool:
    """Whether `item` is another email of a conversation that `earlier` holds an email of."""
    key, message = item.email.conversation_key, item.email.internet_message_id
    return bool(key) and any(
        other.email.conversation_key == key and not (message and other.email.internet_message_id == message)
        for other in earlier
    )


@dataclass(frozen=True)
class BatchStat:
    emails: int
    tasks: int
    queries: int


class BatchCalls:
    """The Gemini side of one run: its emails, in batches, with up to EXTRACTION_LLM_CONCURRENCY calls in
    flight. `choices`: what the person allows read (bulk mail, whom each email was sent to); `started` when the
    run began (its slice)."""

    def __init__(
        self,
        record: RunRecord,
        llm: GeminiClient,
        writer: BatchWriter,
        emails: Generator[SourcedEmail],
        *,
        choices: ReadingChoices,
        started: float,
    ) -> None:
        self.record, self.llm, self.writer, self.emails = record, llm, writer, emails
        self.choices, self.started = choices, started
        self.batch_stats: list[BatchStat] = []

    def _batches(self) -> Generator[list[SourcedEmail]]:
        """The stream in batches, a later email of a conversation held for a batch after its earlier one's
        (and behind any of its conversation held already), so the order within a conversation stays."""
        size = settings.EXTRACTION_BATCH_SIZE
        batch: list[SourcedEmail] = []
        held: list[SourcedEmail] = []
        # A copy of an email met earlier in the stream (the same message in another mailbox) rides on it and
        # is not sent: it takes no place in a batch. Read in time order, copies sit between the others. Only
        # an email that is sent carries copies: one the bulk rule skips in its mailbox may be read through the
        # other (Outlook's Focused holds a newsletter that Gmail lists with List-Unsubscribe), and is sent.
        sent: set[tuple[str, str]] = set()
        riders = 0
        for item in self.emails:
            copy = bool(item.email.internet_message_id) and item.copy_key in sent
            if not self._bulk_reason(item):
                sent.add(item.copy_key)
            if _follows(item, batch) or _follows(item, held):
                held.append(item)
            else:
                batch.append(item)
                riders += copy
            if len(batch) - riders >= size:
                riders = 0
                yield batch
                batch, held = _refill(held, size)
                while len(batch) >= size:  # ten or more held: the refill is a whole batch already
                    yield batch
                    batch, held = _refill(held, size)
        while batch:
            yield batch
            batch, held = _refill(held, size)

    def run(self) -> None:
        """Every batch, with up to EXTRACTION_LLM_CONCURRENCY Gemini calls in flight (DESIGN §5 needs no
        order between batches: each is written in its own transaction, and the cursors move only after all).

        This thread does everything else, in batch order: fetching (which stays at most that many batches
        ahead of the calls), the database, the checks of lease and consent before each new call. A call's
        thread only calls Gemini. When a batch ends the run (an outage, a revoked consent, a lost lease), the
        calls not yet started are cancelled and the answers of those in flight are never written. A revoked
        consent and a stop the person asked for are the exceptions: no batch more is sent, but the answers
        already asked for (and paid for) are written.
        """
        limit = settings.EXTRACTION_LLM_CONCURRENCY
        pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix=f"gemini-run-{self.record.run.pk}")
        in_flight: deque[_Batch] = deque()
        sent = 0
        batches = self._batches()
        try:
            try:
                # Each batch is fetched while the calls before it are in flight, then waits for a free place.
                for emails in batches:
                    if self._slice_over(sent):
                        break  # this batch (fetched, not sent) and the rest are the continuation's
                    while any(earlier.waits_for(emails) for earlier in in_flight):
                        self._finish_batch(in_flight.popleft())  # its items are in this batch's prompt
                    prepared = self._prepare_batch(emails)
                    while len(in_flight) >= limit:
                        self._finish_batch(in_flight.popleft())
                    in_flight.append(self._start_batch(prepared, pool))
                    sent += len(emails)
                else:
                    sent = -1  # every batch taken
            except RunStopped as stop:
                if stop.code in ("consent_revoked", STOPPED):
                    # Nothing more is sent; the answers already asked for (under consent) are written.
                    while in_flight:
                        self._finish_batch(in_flight.popleft())
                if stop.code == STOPPED:
                    raise self.record.stopped() from stop  # counting the answers just written
                raise
            while in_flight:
                self._finish_batch(in_flight.popleft())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            batches.close()
            self.emails.close()  # and with it the fetch ahead (MailboxReader.emails)
        if sent >= 0:
            self.record.stop_if_asked()  # a stopped run is not continued: the next run reads the rest
            raise continued(sent)

    def _slice_over(self, sent: int) -> bool:
        """Whether the run has taken its share: EXTRACTION_RUN_MAX_EMAILS emails (so one person's backlog
        does not hold a worker while other people's fresh mail waits), or EXTRACTION_RUN_SECONDS of time
        (so it ends well before the job's time limit)."""
        elapsed = time.monotonic() - self.started
        return sent >= settings.EXTRACTION_RUN_MAX_EMAILS or elapsed >= settings.EXTRACTION_RUN_SECONDS

    def _prepare_batch(self, batch: list[SourcedEmail]) -> _Batch:
        """What of the batch to send, and its prompt, built here while earlier calls are in flight."""
        counter = _QueryCounter()
        with connection.execute_wrapper(counter):
            # The same message reached another mailbox of the person and was read there: it is not sent to
            # Gemini again, only linked (one task per email, whichever mailbox it came through).
            handled = email_keys_handled(user_id=self.record.run.user_id, keys=[item.copy_key for item in batch])
        copies = [item for item in batch if item.copy_key in handled]
        unread = [item for item in batch if item.copy_key not in handled]
        # Bulk mail (newsletters, notifications, mailing lists) is not sent: recorded as skipped, with why.
        reasons = [(item, self._bulk_reason(item)) for item in unread]  # once per email
        skipped = [(item, reason) for item, reason in reasons if reason]
        fresh = [item for item, reason in reasons if not reason and not self.writer.rides(item)]
        prompt = self._prompt(fresh) if fresh else None
        return _Batch(batch, fresh, copies, None, counter, skipped, prompt)

    def _start_batch(self, prepared: _Batch, pool: ThreadPoolExecutor) -> _Batch:
        """Send the batch's call, once the lease and the consent are checked (right before sending), unless the
        person asked the run to stop: a batch boundary, where a stopped run ends."""
        with connection.execute_wrapper(prepared.counter):
            self.record.guard()
            self.record.stop_if_asked()
        if prepared.prompt is None:
            return prepared
        emails = [item.email for item in prepared.fresh]
        call = in_context(self.llm.extract, emails, prompt=prepared.prompt)
        return dataclasses.replace(prepared, call=pool.submit(call))

    def _prompt(self, batch: list[SourcedEmail]) -> Prompt:
        # A consent to a text before recipients were sent covers a prompt without them (accounts/consent.py).
        reader = self.reader_addresses if self.choices.read_recipients else None
        emails = [item.email for item in batch]
        return self.llm.prepare(emails, reader=reader, open_items=self._open_items(emails))

    def _open_items(self, emails: list[Email]) -> list[list[OpenItem]]:
        """Per email, the person's open items its earlier mail made, newest first (one query per batch, and
        none for a batch of first emails of their conversations)."""
        keys = [email.conversation_key for email in emails if answers_earlier(email)]
        found = conversation_open_items(user_id=self.record.run.user_id, keys=keys) if keys else []
        return [
            [
                OpenItem(item.task_id, item.kind, item.title, item.sentence)
                for item in items_before(
                    found,
                    conversation_key=email.conversation_key,
                    message_id=email.message_id,
                    email_key=email.internet_message_id,
                    received_at=email.received_at,
                )[:MAX_ITEMS_PER_EMAIL]
            ]
            if answers_earlier(email)
            else []
            for email in emails
        ]

    @cached_property
    def reader_addresses(self) -> list[str]:
        """The person's own addresses, for the prompt: every mailbox they connected, even one that needs
        reconnecting (mail to it is still theirs). Asked once, when the first prompt is built."""
        return list(
            Integration.objects.filter(user_id=self.record.run.user_id)
            .exclude(status=Integration.Status.DISCONNECTED)
            .order_by("id")
            .values_list("account_address", flat=True)[:MAX_READER_ADDRESSES]
        )

    @cached_property
    def always_read(self) -> set[str]:
        """The senders whose mail the person always has read: asked once, when an email may first be
        skipped as bulk (a run that reads nothing never asks)."""
        return set(AlwaysReadSender.objects.filter(user_id=self.record.run.user_id).values_list("address", flat=True))

    @cached_property
    def muted(self) -> dict[str, str]:
        """The senders the person taught Tasklift to make no task from, asked once as `always_read` is."""
        return muted_reasons(user_id=self.record.run.user_id)

    def _bulk_reason(self, item: SourcedEmail) -> str | None:
        """Why the bulk rule skips this email, or None to read it: never when the person reads bulk mail,
        for a sender they always read, or for an email they asked to have read ("read this one"). A sender the
        person muted is skipped whatever those say ("muted:<reason>")."""
        email = item.email
        if muted := self.muted.get(parseaddr(email.sender)[1].lower()):
            return muted
        if self.choices.read_bulk_mail or item.queued_id in item.mailbox.integration.read_anyway:
            return None
        if parseaddr(email.sender)[1].lower() in self.always_read:
            return None
        return bulk_reason(email.list_headers, email.provider_category)

    def _finish_batch(self, started: _Batch) -> None:
        with connection.execute_wrapper(started.counter):
            if started.call is None:
                tasks = self.writer.write([], None, copies=started.copies, skipped=started.skipped)
            else:
                try:
                    result = self._read(started.fresh, first=started.call)
                except _Unread as unread:
                    tasks = self._isolate(started.fresh, unread.error)
                    if started.copies or started.skipped:
                        self.writer.write([], None, copies=started.copies, skipped=started.skipped)
                else:
                    tasks = self.writer.write(started.fresh, result, copies=started.copies, skipped=started.skipped)
        self.batch_stats.append(BatchStat(emails=len(started.batch), tasks=tasks, queries=started.counter.count))

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
                self.record.guard()
            try:
                if attempt == 0 and first is not None:
                    return first.result()  # the call started when the batch was fetched
                return self.llm.extract([item.email for item in batch], prompt=self._prompt(batch))
            except LLMBadOutput as error:
                self.record.count_llm(
                    calls=error.calls, prompt=error.usage.prompt_tokens, output=error.usage.output_tokens
                )
                self.record.reject(error.code, len(batch))
                last_error = error
            except LLMError as error:
                self.record.count_llm(
                    calls=error.calls, prompt=error.usage.prompt_tokens, output=error.usage.output_tokens
                )
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
                self.record.guard()
                try:
                    return self.writer.write(batch, self._read(batch))
                except _Unread as unread:
                    error = unread.error
            self.writer.quarantine(batch[0], error)
            return 0
        created = 0
        middle = len(batch) // 2
        for half in (batch[:middle], batch[middle:]):
            self.record.guard()
            try:
                result = self._read(half)
            except _Unread as unread:
                created += self._isolate(half, unread.error)
            else:
                created += self.writer.write(half, result)
        return created

    def _probe(self, error: LLMError) -> None:
        """Whether Gemini reads anything now; if not, the run ends as an outage."""
        try:
            result = self.llm.probe()
        except LLMError as probe_error:
            usage = probe_error.usage
            self.record.count_llm(calls=probe_error.calls, prompt=usage.prompt_tokens, output=usage.output_tokens)
            raise self._outage(error) from probe_error
        self.record.count_llm(calls=result.calls, prompt=result.usage.prompt_tokens, output=result.usage.output_tokens)

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


def _refill(held: list[SourcedEmail], size: int) -> tuple[list[SourcedEmail], list[SourcedEmail]]:
    """The next batch from the held emails, in order, each unless an earlier one of its conversation is in
    that batch or still held (the first always goes, so every held email goes in time); and those still held."""
    batch: list[SourcedEmail] = []
    still: list[SourcedEmail] = []
    for item in held:
        if len(batch) < size and not _follows(item, batch) and not _follows(item, still):
            batch.append(item)
        else:
            still.append(item)
    return batch, still


def continued(sent: int) -> RunStopped:
    """The end of a slice of a backlog: what was read is written (tasks and ledger), no cursor moves,
    and the next run, queued at once, skips what the ledger holds and reads on (DESIGN §1 holds)."""
    return RunStopped(
        ExtractionRun.Status.CONTINUED,
        "continued",
        f"{sent} emails read in this part of a large backlog; the next run, already queued, reads on.",
    )


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
