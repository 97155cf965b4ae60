"""Writing what a batch means (DESIGN §5): its tasks, the links of its copies in other mailboxes, what its
mail did to the open items of its conversations (closed, new due date, suggested: tasks/conversation.py, each
with its history row), and its ledger rows, in one transaction (all or nothing), fenced by the run's lease; and
setting one email aside (quarantine) where a person sees and replays it.

A new item whose sentence stands in an earlier item of its conversation (its own sentence, or the sentence of
an email that changed it) is not written: an old ask quoted back under a header the cleaner does not know, or
repeated, is not new (issue 22 point 6). Counted on the run (`old_asks_skipped`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from email.utils import parseaddr

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from extraction.crashpoints import crash_point
from extraction.grounding import sentence_seen
from extraction.llm import ExtractedTask, LLMError, LLMResult
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.muting import own_addresses
from extraction.prompt import temp_id
from extraction.reading import SourcedEmail
from extraction.runrecord import RunRecord
from extraction.services import INBOX, LedgerEntry, ledger_record
from integrations.mail.message import Email
from tasks.conversation import EmailChange, conversation_changes_apply, conversation_old_sentences, participants_of
from tasks.models import Task
from tasks.services import EmailCopy, EmailTaskRow, task_insert_from_emails, task_link_copies

logger = logging.getLogger(__name__)


class BatchWriter:
    """Writes a run's batches. It also keeps the copies riding on emails of the run (see `rides`)."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        # Emails sent to Gemini in this run and not yet written, by Message-ID, with the copies of each that
        # reached another mailbox in the same run: those ride along, written (linked) with their original.
        self.riders: dict[tuple[str, str], list[SourcedEmail]] = {}
        self.own: set[str] | None = None  # the person's addresses, read once a batch changes an item

    def _own(self, needed: object) -> set[str]:
        """The person's own addresses (extraction.muting), read once, when `needed` (changes or waiting items
        to judge): their email may change any of their items, and nobody waits on themselves."""
        if self.own is None and needed:
            self.own = own_addresses(user=self.record.run.user)
        return self.own or set()

    def _waits_on_oneself(self, task: ExtractedTask) -> bool:
        """A waiting item on one of the person's own addresses: their note to themselves, read again through
        Sent. The inbox read of the same note gives its ask; this would be the same thing a second time."""
        if task.kind != "waiting" or not task.waiting_on:
            return False
        return parseaddr(task.waiting_on)[1].lower() in self._own(True)

    def rides(self, item: SourcedEmail) -> bool:
        """Whether this email is a copy of one already on its way to Gemini in this run (a batch in flight,
        or earlier in this one): it is not sent again but written with that one, in its transaction, so that
        neither a copy is recorded before its task exists nor the task without the copy's link."""
        key = item.copy_key  # within one purpose: sent mail and inbox mail are each read once
        if not item.email.internet_message_id:
            return False
        if key in self.riders:
            self.riders[key].append(item)
            return True
        self.riders[key] = []
        return False

    def all_written(self) -> bool:
        """Whether every copy that rode on an email of this run is written with it (before the commit: the
        cursors would pass it otherwise)."""
        return not any(self.riders.values())

    def quarantine(self, item: SourcedEmail, error: LLMError) -> None:
        """Set the email aside, and its copies that reached other mailboxes in this run with it."""
        for each in (item, *self.riders.pop(item.copy_key, [])):
            self.set_aside(
                each.mailbox.integration.pk,
                each.email.message_id,
                f"llm_{error.code}: {error.message}",
                conversation_key=each.email.conversation_key,
                sender=each.email.sender,
                subject=each.email.subject,
                purpose=each.mailbox.purpose,
            )

    def set_aside(
        self,
        integration_id: int,
        message_id: str,
        reason: str,
        *,
        conversation_key: str = "",
        sender: str = "",
        subject: str = "",
        purpose: str = INBOX,
    ) -> None:
        """Quarantine one email durably: in the ledger (so the cursor may pass it), replayable by a person."""
        run = self.record.run
        with transaction.atomic():
            self.record.hold_lease()
            ledger_record(
                entries=[
                    LedgerEntry(
                        integration_id,
                        message_id,
                        ProcessedEmail.Outcome.QUARANTINED,
                        0,
                        reason,
                        sender=sender,  # shown on the Mailboxes page, so the person knows which email it is
                        subject=subject,
                        conversation_key=conversation_key,
                        purpose=purpose,
                    )
                ],
                run_id=run.pk,
            )
            ExtractionRun.objects.filter(pk=run.pk).update(emails_quarantined=F("emails_quarantined") + 1)
        logger.warning(
            "extraction run %s quarantined one email of integration %s",
            run.pk,
            integration_id,
            extra={"integration_id": integration_id},
        )

    def write(
        self,
        batch: list[SourcedEmail],
        result: LLMResult | None,
        *,
        copies: Sequence[SourcedEmail] = (),
        skipped: Sequence[tuple[SourcedEmail, str]] = (),
    ) -> int:
        """The batch's tasks and ledger rows in one transaction: both or neither. `copies` are emails read
        through another mailbox already: linked to their tasks and recorded, not read (as are the copies
        riding on the batch's emails, see `rides`). `skipped` is bulk
        mail not read, recorded with its reason (handled: the cursor may pass it)."""
        with transaction.atomic():
            self.record.hold_lease()
            created = self._write(batch, result, copies, skipped)
        crash_point("after_batch")
        return created

    def _write(
        self,
        batch: list[SourcedEmail],
        result: LLMResult | None,
        copies: Sequence[SourcedEmail],
        skipped: Sequence[tuple[SourcedEmail, str]],
    ) -> int:
        """Inside write()'s transaction, under the lease."""
        rows: list[EmailTaskRow] = []
        entries: list[LedgerEntry] = []
        changes: list[EmailChange] = []
        old_skipped = 0
        copies = [*copies, *(rider for item in batch for rider in self.riders.pop(item.copy_key, []))]
        old = self._old_sentences(batch)
        for index, item in enumerate(batch):
            assert result is not None
            email, integration = item.email, item.mailbox.integration
            given = result.tasks.get(temp_id(index), [])  # by position: two mailboxes may share an id
            found = [task for task in given if not _said_before(task, email, old) and not self._waits_on_oneself(task)]
            old_skipped += len(given) - len(found)
            rows.extend(
                EmailTaskRow(
                    user_id=self.record.run.user_id,
                    integration_id=integration.pk,
                    message_id=email.message_id,
                    email_key=email.internet_message_id,
                    title=task.title,
                    due_date=task.due_date,
                    due_time=task.due_time,
                    priority=task.priority or "",
                    email_link=email.web_link,
                    email_sender=email.sender,
                    email_subject=email.subject,
                    email_received_at=email.received_at,
                    run_id=self.record.run.pk,
                    sentence=task.sentence,
                    conversation_key=email.conversation_key,
                    kind=task.kind,
                    waiting_on=task.waiting_on,
                    participants=participants_of(email),
                )
                for task in found
            )
            changes.extend(
                EmailChange(
                    task_id=change.task_id,
                    outcome=change.outcome,
                    sentence=change.sentence,
                    due_date=change.due_date,
                    integration_id=integration.pk,
                    message_id=email.message_id,
                    web_link=email.web_link,
                    folder=email.folder,
                    sender=email.sender,
                    received_at=email.received_at,
                )
                for change in result.changes.get(temp_id(index), [])
            )
            outcome = ProcessedEmail.Outcome.TASKS if found else ProcessedEmail.Outcome.NO_TASKS
            # Tasks whose sentence is not in the email are not written; the email is handled all the same
            # (an answer without evidence is not a poison to set aside), its ledger row saying how many.
            ungrounded = result.ungrounded.get(temp_id(index), 0)
            entries.append(
                LedgerEntry(
                    integration.pk,
                    email.message_id,
                    outcome,
                    len(found),
                    f"ungrounded:{ungrounded}" if ungrounded else "",
                    email_key=email.internet_message_id,
                    conversation_key=email.conversation_key,
                    purpose=item.mailbox.purpose,
                )
            )
        linked = [
            EmailCopy(
                self.record.run.user_id,
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
                conversation_key=item.email.conversation_key,
                purpose=item.mailbox.purpose,
            )
            for item in copies
        ]
        entries += [
            LedgerEntry(
                item.mailbox.integration.pk,
                item.email.message_id,
                ProcessedEmail.Outcome.SKIPPED,
                0,
                reason if reason.startswith("muted:") else f"bulk:{reason}",  # muted: a sender the person muted
                email_key=item.email.internet_message_id,
                sender=item.email.sender,
                subject=item.email.subject,
                conversation_key=item.email.conversation_key,
                purpose=item.mailbox.purpose,
            )
            for item, reason in skipped
        ]
        kinds: Counter[str] = Counter()
        created = task_insert_from_emails(rows=rows, kinds=kinds)
        task_link_copies(copies=linked)
        changed = conversation_changes_apply(
            user_id=self.record.run.user_id, changes=changes, run_id=self.record.run.pk, own=self._own(changes)
        )
        ledger_record(entries=entries, run_id=self.record.run.pk)
        crash_point("batch_tx")
        ExtractionRun.objects.filter(pk=self.record.run.pk).update(
            emails_sent_to_llm=F("emails_sent_to_llm") + len(batch),
            emails_already_done=F("emails_already_done") + len(copies),
            emails_cut=F("emails_cut") + (result.cut if result else 0),
            emails_skipped=F("emails_skipped") + len(skipped),
            secrets_redacted=F("secrets_redacted") + (sum(result.redacted.values()) if result else 0),
            tasks_created=F("tasks_created") + created,
            tasks_ungrounded=F("tasks_ungrounded") + (sum(result.ungrounded.values()) if result else 0),
            llm_calls=F("llm_calls") + (result.calls if result else 0),
            prompt_tokens=F("prompt_tokens") + (result.usage.prompt_tokens if result else 0),
            output_tokens=F("output_tokens") + (result.usage.output_tokens if result else 0),
            items_closed=F("items_closed") + changed.closed,
            items_updated=F("items_updated") + changed.updated,
            items_suggested=F("items_suggested") + changed.suggested,
            commitments_created=F("commitments_created") + kinds[Task.Kind.COMMITMENT],
            waiting_created=F("waiting_created") + kinds[Task.Kind.WAITING],
            item_answers_refused=F("item_answers_refused") + (sum(result.refused.values()) if result else 0),
            old_asks_skipped=F("old_asks_skipped") + old_skipped,
            updated_at=timezone.now(),
        )
        return created

    def _old_sentences(self, batch: list[SourcedEmail]) -> list[tuple[str, str, datetime | None]]:
        """The sentences of earlier items of the batch's conversations: only of emails that answer others
        (a conversation's first email has nothing earlier), so a batch of new mail asks nothing more."""
        keys = [item.email.conversation_key for item in batch if answers_earlier(item.email)]
        return conversation_old_sentences(user_id=self.record.run.user_id, keys=keys) if keys else []


def answers_earlier(email: Email) -> bool:
    """Whether an email names earlier messages of its conversation (a reply, a forward in its thread)."""
    return bool(email.in_reply_to or email.references)


def _said_before(task: ExtractedTask, email: Email, old: list[tuple[str, str, datetime | None]]) -> bool:
    """Whether the task's sentence stands in an earlier item of the email's conversation."""
    key = email.conversation_key
    return any(
        conversation == key and (at is None or at < email.received_at) and sentence_seen(task.sentence, sentence)
        for conversation, sentence, at in old
    )
