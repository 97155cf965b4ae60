"""Mail written by the sandbox itself: what a mailbox's owner sends, and a reply someone sends in a thread.

Both are plain RFC 822 messages, delivered through the same paths as any other mail, so Gmail and Graph show
them with exactly the headers written here. A reply carries what a mail client writes (RFC 5322 §3.6.4):
`In-Reply-To` is the Message-ID of the message answered, `References` that message's References (or, without
them, its In-Reply-To) followed by its Message-ID, and the subject gains one "Re: " unless it has a reply
prefix already.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.utils import format_datetime

# Reply and forward prefixes in the languages the benchmark writes (English, German, Danish/Swedish/Norwegian,
# Dutch, French, Spanish/Portuguese, Italian), optionally counted ("Re[2]:"), repeated ("Re: Fwd: ").
_PREFIXES = re.compile(r"^\s*(?:(?:re|fwd?|aw|wg|sv|vs|antw|tr|rv|r|rif|res|enc)\s*(?:\[\d+\])?\s*:\s*)+", re.I)
_REPLY_PREFIX = re.compile(r"^\s*(?:re|aw|sv|antw|rv|r|rif|res)\s*(?:\[\d+\])?\s*:", re.I)


def subject_key(subject: str) -> str:
    """The subject (RFC 2047 words decoded) without its reply and forward prefixes, case-folded: what Gmail
    compares when it threads."""
    with contextlib.suppress(LookupError, ValueError, UnicodeError):  # undecodable: compare it as written
        subject = str(make_header(decode_header(subject)))
    return " ".join(_PREFIXES.sub("", subject).split()).casefold()


def reply_subject(subject: str) -> str:
    return subject if _REPLY_PREFIX.match(subject) else f"Re: {subject}"


def message_id(domain: str) -> str:
    return f"<{uuid.uuid4().hex}@{domain}>"


@dataclass(frozen=True)
class Original:
    """What a reply needs of the message it answers."""

    message_id: str
    references: list[str]
    subject: str

    @classmethod
    def of(cls, raw: bytes) -> Original:
        parsed = email.message_from_bytes(raw, policy=email.policy.compat32)
        return cls.from_headers(
            message_id=str(parsed.get("Message-ID", "")),
            references=str(parsed.get("References", "")),
            in_reply_to=str(parsed.get("In-Reply-To", "")),
            subject=str(parsed.get("Subject", "")),
        )

    @classmethod
    def from_headers(cls, *, message_id: str, references: str, in_reply_to: str, subject: str) -> Original:
        chain = references.split() or in_reply_to.split()[:1]
        return cls(message_id.strip(), chain, subject)

    def chain(self) -> list[str]:
        """The References of a reply to this message."""
        return [*self.references, self.message_id] if self.message_id else list(self.references)


def compose(
    *,
    sender: str,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    date: datetime,
    message_id: str,
    answers: Original | None = None,
) -> bytes:
    """An RFC 822 text message with these headers; a reply to `answers` when given."""
    mail = EmailMessage(policy=email.policy.SMTP)
    mail["From"] = sender
    mail["To"] = ", ".join(to)
    if cc:
        mail["Cc"] = ", ".join(cc)
    mail["Subject"] = subject
    mail["Date"] = format_datetime(date.astimezone(UTC))
    mail["Message-ID"] = message_id
    if answers is not None and answers.message_id:
        mail["In-Reply-To"] = answers.message_id
        mail["References"] = " ".join(answers.chain())
    mail.set_content(body)
    return bytes(mail)
