"""The forward-to address read as a mailbox: its mail is what was stored on arrival (InboundMessage), oldest
first, each unwrapped to the email the person forwarded (integrations/mail/forwarded.py).

The stored queue is its own cursor (FORWARD_CURSOR): what is stored is unread, and the run's commit deletes what
it wrote to the ledger. So no position can skip a message whose row committed after a later one's (sequence
order is not commit order), and a retried delivery of a message read already is found in the ledger.

Listing loads the raw messages (bounded: LIST_MAX_MESSAGES, LIST_MAX_BYTES), on the run's own thread and
database connection; reading them only parses. What a run leaves stored is the next run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from integrations.mail.forwarded import unwrap_forward
from integrations.mail.message import email_from_rfc822
from integrations.models import FORWARD_CURSOR
from integrations.providers.base import Delta, Email, Fetched, Folder, ProviderNotFound

LIST_MAX_MESSAGES = 500
LIST_MAX_BYTES = 64_000_000


class ForwardProvider:
    provider = "forward"

    def __init__(self, *, integration_id: int) -> None:
        self.integration_id = integration_id
        self._listed: dict[str, tuple[bytes, datetime]] = {}

    def current_cursor(self, folder: Folder = "inbox") -> str:
        return FORWARD_CURSOR

    def fetch_delta(self, cursor: str, *, folder: Folder = "inbox") -> Delta:
        return self._list() if folder == "inbox" else Delta(message_ids=[], new_cursor=FORWARD_CURSOR)

    def fetch_deltas(self, cursors: Mapping[Folder, str]) -> dict[Folder, Delta]:
        """The idle check's question (is anything stored?), answered from the keys alone: nothing is loaded."""
        return {
            folder: self._list(load=False) if folder == "inbox" else self.fetch_delta(cursor, folder=folder)
            for folder, cursor in cursors.items()
        }

    def resync(
        self,
        since: datetime,
        limit: int,
        *,
        cursor: str,
        handled: Callable[[list[str]], set[str]],
        folder: Folder = "inbox",
    ) -> Delta:
        return self.fetch_delta(cursor, folder=folder)  # the queue never expires: it is what is owed

    def first_read(self, since: datetime, limit: int, *, folder: Folder = "inbox") -> Delta:
        return self.fetch_delta(FORWARD_CURSOR, folder=folder)

    def _list(self, *, load: bool = True) -> Delta:
        from integrations.models import InboundMessage

        stored = (
            InboundMessage.objects.filter(integration_id=self.integration_id)
            .order_by("received_at", "pk")
            .values_list("key", "size", "received_at")[:LIST_MAX_MESSAGES]
        )
        keys: list[str] = []
        total = 0
        for key, size, _ in stored:
            if keys and total + size > LIST_MAX_BYTES:
                break
            keys.append(key)
            total += size
        if not load:
            return Delta(message_ids=keys, new_cursor=FORWARD_CURSOR)
        rows = InboundMessage.objects.filter(integration_id=self.integration_id, key__in=keys)
        self._listed = {key: (bytes(raw), at) for key, raw, at in rows.values_list("key", "raw", "received_at")}
        ordered = [key for key in keys if key in self._listed]
        return Delta(
            message_ids=ordered,
            new_cursor=FORWARD_CURSOR,
            received={key: self._listed[key][1] for key in ordered},
        )

    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        emails: list[Email] = []
        failed: dict[str, ProviderNotFound] = {}
        for key in message_ids:
            if key not in self._listed:
                failed[key] = ProviderNotFound("The forwarded email is no longer stored.")
                continue
            raw, received = self._listed[key]
            emails.append(self._email(key, raw, received))
        return Fetched(emails=emails, failed=dict(failed))

    def _email(self, key: str, raw: bytes, received: datetime) -> Email:
        original = unwrap_forward(raw)
        if not original.forwarded:  # the person wrote to Tasklift themselves: an email like any other
            return email_from_rfc822(provider=self.provider, message_id=key, raw=raw, received_at=received)
        # The forwarded email's own: the forwarding message's list and conversation headers say nothing of it.
        return Email(
            provider=self.provider,
            message_id=key,
            thread_id="",
            sender=original.sender,
            subject=original.subject,
            # When it was sent: the dates its words name ("by Friday") count from there.
            received_at=original.date or received,
            body_text=original.body_text,
            web_link="",
            internet_message_id=original.message_id,
            note=original.note,
        )
