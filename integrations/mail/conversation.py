"""Which conversation an email belongs to, and whom it was sent to, from its headers.

One conversation is one key whatever the mailbox or provider it is seen through: the Message-ID of its first
message, as every reply names it (RFC 5322 §3.6.4: References starts with the root, In-Reply-To names the
message answered). Provider thread ids (Gmail `threadId`, Graph `conversationId`) are per mailbox, so they
are only the fallback of mail that carries no Message-ID at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.utils import getaddresses

from integrations.mail.mime import message_id_key

# Bounds on what one email may make us hold: a header may be megabytes.
MAX_REFERENCES = 20  # the root, then the newest ones (RFC 5322 lets clients drop the middle too)
MAX_RECIPIENTS = 50  # per To or Cc list
MAX_NAME_CHARS = 200
MAX_ADDRESS_CHARS = 320
MAX_KEY_CHARS = 512
_HEADER_READ_CHARS = 20_000  # of a References, To or Cc header: the root and 50 addresses fit well within

_MESSAGE_ID = re.compile(r"<([^<>\s]+)>")


@dataclass(frozen=True)
class Recipient:
    """One address an email was sent to, with the display name given to it ("" when none)."""

    name: str
    address: str  # lower-cased

    def __str__(self) -> str:
        return f"{self.name} <{self.address}>" if self.name and self.name.lower() != self.address else self.address


def message_ids(value: str) -> list[str]:
    """The Message-IDs a References or In-Reply-To header names, in order, without angle brackets. A header
    without any `<…>` (some clients) is read as ids separated by spaces."""
    text = value[:_HEADER_READ_CHARS]
    found = _MESSAGE_ID.findall(text) or text.split()
    return [key for key in (message_id_key(found_id) for found_id in found) if key]


def references(value: str) -> tuple[str, ...]:
    """The References header's ids, bounded: the first (the conversation's root) and the newest ones."""
    ids = list(dict.fromkeys(message_ids(value)))
    if len(ids) > MAX_REFERENCES:
        ids = [ids[0], *ids[-(MAX_REFERENCES - 1) :]]
    return tuple(ids)


def in_reply_to(value: str) -> str:
    """The message an In-Reply-To header answers ("" when none is named)."""
    return next(iter(message_ids(value)), "")


def recipients(value: str) -> tuple[Recipient, ...]:
    """The addresses of a To or Cc header (decoded), with their names, bounded; repeats and entries without
    an address dropped."""
    return recipient_list(getaddresses([value[:_HEADER_READ_CHARS]]))


@dataclass(frozen=True)
class ConversationHeaders:
    """What an email's headers say of its conversation and its recipients."""

    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    to: tuple[Recipient, ...] = ()
    cc: tuple[Recipient, ...] = ()


def conversation_headers(headers: Iterable[tuple[str, str]]) -> ConversationHeaders:
    """In-Reply-To, References, To and Cc from (name, value) header pairs (the first of each name counts)."""
    wanted = {"in-reply-to": "", "references": "", "to": "", "cc": ""}
    seen: set[str] = set()
    for name, value in headers:
        name = name.lower()
        if name in wanted and name not in seen:
            seen.add(name)
            wanted[name] = value
    return ConversationHeaders(
        in_reply_to=in_reply_to(wanted["in-reply-to"]),
        references=references(wanted["references"]),
        to=recipients(wanted["to"]),
        cc=recipients(wanted["cc"]),
    )


def recipient_list(pairs: list[tuple[str, str]]) -> tuple[Recipient, ...]:
    """(name, address) pairs as Recipients, bounded, without repeats or empty addresses."""
    found: dict[str, Recipient] = {}
    for name, address in pairs:
        address = " ".join(str(address).split()).lower()[:MAX_ADDRESS_CHARS]
        if "@" not in address or address in found:
            continue
        found[address] = Recipient(" ".join(_decoded(str(name)).split())[:MAX_NAME_CHARS], address)
        if len(found) == MAX_RECIPIENTS:
            break
    return tuple(found.values())


def conversation_key(
    *, provider: str, thread_id: str, internet_message_id: str, in_reply_to: str, references: tuple[str, ...]
) -> str:
    """The conversation's key: its root Message-ID (first of References, else In-Reply-To, else the email's
    own Message-ID), so that a reply and its original, in any mailbox of any provider, share it; without
    any Message-ID, the provider's thread id ("gmail:<threadId>", "outlook:<conversationId>")."""
    root = next(iter(references), "") or in_reply_to or internet_message_id
    if root:
        return root[:MAX_KEY_CHARS]
    return f"{provider}:{thread_id}"[:MAX_KEY_CHARS] if thread_id else ""


def _decoded(name: str) -> str:
    """A display name with its RFC 2047 words decoded (Gmail gives headers as the mail has them)."""
    if "=?" not in name:
        return name
    try:
        return str(make_header(decode_header(name[: MAX_NAME_CHARS * 4])))
    except (LookupError, UnicodeError, ValueError):
        return name
