"""From a raw RFC 822 message or a Gmail `full` payload to what Tasklift reads: sender, subject, date, text.

The body is the text/plain alternative when there is one, else the HTML one turned into text.
Attachments are never read. Charsets and transfer encodings are undone by the stdlib `email` package.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes
from email.message import EmailMessage, Message
from email.policy import default as default_policy
from email.utils import parsedate_to_datetime
from typing import Any

import html2text

from integrations.mail.html_quotes import without_quoted_html


@dataclass(frozen=True)
class MailText:
    sender: str  # the From header, decoded: "Name <address>"
    subject: str
    date: datetime | None  # from the Date header, timezone-aware; None if missing or unreadable
    body_text: str
    message_id: str = ""  # the Message-ID header, without its angle brackets


def message_id_key(value: str) -> str:
    """A Message-ID as a key: without spaces and angle brackets (`<a@b>` and `a@b` are one message)."""
    return value.strip().strip("<>").strip()[:500]


def decode_base64url(data: str) -> bytes:
    """Gmail's base64url, with or without its padding (Gmail sends both)."""
    cleaned = "".join(data.split())
    try:
        return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))
    except (binascii.Error, ValueError):
        return b""


# html2text writes Markdown and escapes what would read as Markdown at a line's start ("1." "-" "+"); the text
# is read as plain text, where "\---------- Forwarded message" would hide a quote header.
_MARKDOWN_ESCAPE = re.compile(r"^(\s*\d*)\\([-+.])", re.MULTILINE)


def html_to_text(html: str) -> str:
    """Readable text of an HTML email, without the quotes its mail client marked (`html_quotes`): links kept
    inline (not as footnotes), images and emphasis dropped."""
    converter = html2text.HTML2Text()
    converter.body_width = 0  # no hard wrapping; the reader decides
    converter.ignore_images = True
    converter.ignore_emphasis = True
    converter.inline_links = True
    converter.skip_internal_links = True
    converter.unicode_snob = True
    text = str(converter.handle(without_quoted_html(html)))
    return _MARKDOWN_ESCAPE.sub(r"\1\2", text).replace("\xa0", " ").strip()


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name: UTF-8 is the likeliest truth
        return data.decode("utf-8", errors="replace")


def parse_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


# Raw RFC 822 -----------------------------------------------------------------------------------------
def _part_text(part: Message) -> str:
    if isinstance(part, EmailMessage):
        try:
            content = part.get_content()
            if isinstance(content, str):
                return content
        except (LookupError, UnicodeError, AssertionError, KeyError):
            pass
    payload = part.get_payload(decode=True)
    return _decode(payload if isinstance(payload, bytes) else b"", part.get_content_charset())


def _header(message: Message, name: str) -> str:
    try:
        return str(message.get(name, "") or "").strip()
    except Exception:  # a header the modern parser cannot decode: fall back to its raw text
        return next((str(v) for k, v in message.raw_items() if k.lower() == name.lower()), "").strip()


def parse_rfc822(raw: bytes) -> MailText:
    message = message_from_bytes(raw, policy=default_policy)
    body = ""
    if isinstance(message, EmailMessage):
        plain = message.get_body(preferencelist=("plain",))
        html = None if plain is not None else message.get_body(preferencelist=("html",))
        if plain is not None:
            body = _part_text(plain)
        elif html is not None:
            body = html_to_text(_part_text(html))
    return MailText(
        sender=_header(message, "From"),
        subject=_header(message, "Subject"),
        date=parse_date(_header(message, "Date")),
        body_text=body.strip(),
        message_id=message_id_key(_header(message, "Message-ID")),
    )


# Gmail `full` payload --------------------------------------------------------------------------------
def _payload_headers(part: dict[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for header in part.get("headers") or []:
        headers.setdefault(str(header.get("name", "")).lower(), str(header.get("value", "")))
    return headers


def _leaves(part: dict[str, Any]) -> list[dict[str, Any]]:
    children = part.get("parts") or []
    if not children:
        return [part]
    return [leaf for child in children for leaf in _leaves(child)]


def _payload_leaf_text(part: dict[str, Any]) -> str:
    content_type = Message()
    content_type["Content-Type"] = _payload_headers(part).get("content-type", part.get("mimeType", "text/plain"))
    data = decode_base64url(str((part.get("body") or {}).get("data", "")))
    return _decode(data, content_type.get_content_charset())


def _body_leaves(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The text parts that may be the body, best first: not declared an attachment (a `filename` alone,
    such as a Content-Type `name`, does not make a text part an attachment); those without a file name
    first, plain before HTML."""
    texts = [
        leaf
        for leaf in _leaves(payload)
        if leaf.get("mimeType") in ("text/plain", "text/html")
        and "attachment" not in _payload_headers(leaf).get("content-disposition", "").lower()
        and ((leaf.get("body") or {}).get("data") or (leaf.get("body") or {}).get("attachmentId"))  # not empty
    ]
    return sorted(texts, key=lambda leaf: (bool(leaf.get("filename")), leaf.get("mimeType") != "text/plain"))


def gmail_body_attachment_id(payload: dict[str, Any]) -> str | None:
    """The attachmentId of the body, when Gmail sent it apart (a text part with a file name) and no part
    carries the body inline: the caller fetches it with messages.attachments.get."""
    leaves = _body_leaves(payload)
    if not leaves or (leaves[0].get("body") or {}).get("data"):
        return None
    return (leaves[0].get("body") or {}).get("attachmentId") or None


def parse_gmail_payload(payload: dict[str, Any], *, body_data: str | None = None) -> MailText:
    """Read a Gmail `Message.payload` of format=full (body parts carry base64url `data`). `body_data` is
    the body's data when Gmail sent it apart (see gmail_body_attachment_id)."""
    headers = _payload_headers(payload)
    leaves = _body_leaves(payload)
    body = ""
    if leaves:
        best = leaves[0]
        if body_data is not None and not (best.get("body") or {}).get("data"):
            best = {**best, "body": {"data": body_data}}
        text = _payload_leaf_text(best)
        body = text if best.get("mimeType") == "text/plain" else html_to_text(text)
    return MailText(
        sender=_decode_header(headers.get("from", "")),
        subject=_decode_header(headers.get("subject", "")),
        date=parse_date(headers.get("date")),
        body_text=body.strip(),
        message_id=message_id_key(headers.get("message-id", "")),
    )


def _decode_header(value: str) -> str:
    """Gmail usually decodes RFC 2047 words itself; undo any it left."""
    if "=?" not in value:
        return value.strip()
    message = message_from_bytes(f"X: {value}\n\n".encode(errors="replace"), policy=default_policy)
    return _header(message, "X")
