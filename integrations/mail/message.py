"""The normalised email: what every provider's mail becomes, and all that the rest of Tasklift reads of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from integrations.mail.conversation import Recipient, conversation_key


@dataclass(frozen=True)
class Email:
    """One fetched email, with its body already turned into plain text (not yet cleaned of quotes)."""

    provider: str  # "gmail" | "outlook"
    message_id: str  # the provider's id; never shown to the LLM
    thread_id: str  # the provider's thread key (Gmail threadId, Graph conversationId): per mailbox
    sender: str  # "Name <address>" as in the From header
    subject: str
    received_at: datetime  # timezone-aware
    body_text: str
    web_link: str  # opens the message in the provider's web client
    # The RFC 5322 Message-ID, without its angle brackets: the same message reaching two mailboxes has the
    # same one (empty when the message has none).
    internet_message_id: str = ""
    # The headers that say whether the mail is list, bulk or automatic mail (`integrations.mail.bulk`:
    # List-Unsubscribe, List-Id, Precedence, Auto-Submitted), by lower-cased name, bounded; only those.
    list_headers: dict[str, str] = field(default_factory=dict, hash=False)
    # How the provider sorted the mail: Gmail's category ("personal", "updates", "promotions", "social",
    # "forums"), Outlook's inference ("focused", "other"); "" when it gave none.
    provider_category: str = ""
    # The message it answers and the conversation's earlier messages (Message-IDs without brackets; the
    # References bounded: `integrations.mail.conversation`).
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    # Whom it was sent to, bounded (`conversation.MAX_RECIPIENTS` each).
    to: tuple[Recipient, ...] = ()
    cc: tuple[Recipient, ...] = ()
    # Which of the mailbox's folders it was read from: what entered the inbox (asks of the reader, answers to
    # what they wait for), or what its owner sent (their promises, their asks of others). Set by the reader
    # of the run from the cursor it was listed by.
    folder: Literal["inbox", "sent"] = "inbox"
    # Forwarded to the person's forward-to address: what they wrote above the forward ("remind me Friday"),
    # read as their instruction about it; "" for every other email.
    note: str = ""

    @property
    def conversation_key(self) -> str:
        """One key per conversation, the same through every mailbox and provider (`conversation_key`)."""
        return conversation_key(
            provider=self.provider,
            thread_id=self.thread_id,
            internet_message_id=self.internet_message_id,
            in_reply_to=self.in_reply_to,
            references=self.references,
        )


def email_from_rfc822(*, provider: str, message_id: str, raw: bytes, received_at: datetime) -> Email:
    """The Email of a raw RFC 822 message (IMAP's `BODY[]`, a stored forward): its text, and the headers that say
    whether it is bulk mail and which conversation it belongs to. No web client links to it."""
    from email import message_from_bytes
    from email.policy import compat32

    from integrations.mail.bulk import bulk_headers
    from integrations.mail.conversation import conversation_headers
    from integrations.mail.mime import parse_rfc822

    text = parse_rfc822(raw)
    headers = [(k, str(v)) for k, v in message_from_bytes(raw, policy=compat32).items()]
    conversation = conversation_headers(headers)
    return Email(
        provider=provider,
        message_id=message_id,
        thread_id="",
        sender=text.sender,
        subject=text.subject,
        received_at=received_at,
        body_text=text.body_text,
        web_link="",
        internet_message_id=text.message_id,
        list_headers=bulk_headers(headers),
        in_reply_to=conversation.in_reply_to,
        references=conversation.references,
        to=conversation.to,
        cc=conversation.cc,
    )
