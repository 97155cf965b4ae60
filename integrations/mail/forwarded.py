"""A forwarded email read as the email it forwards: the original's sender, date, subject and body, and the note
the person wrote above it ("remind me Friday").

- **Inline** (Gmail, Outlook, Apple Mail, Thunderbird): the first forward header in the text
  (`quote_headers.header_at`): a dashed "Forwarded message" line or Apple Mail's "Begin forwarded message:" in
  any language, or Outlook's underscores, each followed by a header block; or Outlook's header block alone.
  What stands above is the note, the block's fields are the original's, what follows is its body. An
  attribution ("On … wrote:") starts a reply's quote, not a forward: no header block follows it. Apple Mail
  quotes what it forwards with ">"; a quote that starts with a forward header is read one level less deep.
- **Attached** (`message/rfc822`: Outlook's "Forward as attachment", Apple Mail, Thunderbird): looked for when
  the text has no inline forward, as an inline forward carries the original's own attachments. The attached
  message is the original; the outer text is the note.
- A forward of a forward (the forwarded email's subject starts with "Fwd:", "FW:", "WG:", "TR:" or "RV:") is
  unwrapped to its innermost original; the note stays the outermost person's. An original without such a subject
  keeps what it quotes: Outlook's reply header reads like its forward header.

The text searched is the plain alternative, else the HTML one turned into text with its quotes: mime's
`html_to_text` cuts at Outlook's header marker, which in a forward is the forwarded email itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from email import message_from_bytes
from email.message import EmailMessage, Message
from email.policy import default as default_policy

import html2text

from integrations.mail.languages import QUOTE_HEADERS
from integrations.mail.mime import MailText, parse_rfc822
from integrations.mail.quote_headers import header_at


@dataclass(frozen=True)
class Forwarded:
    sender: str  # the original's From, "Name <address>" as written (the outer From when nothing was forwarded)
    subject: str  # the original's Subject (when nothing was forwarded: the outer subject)
    date: datetime | None  # the original's date, timezone-aware (UTC when the text gives no zone); None if unreadable
    body_text: str  # the original's body as plain text
    note: str  # what the person wrote above the forward, stripped ("" when none)
    message_id: str  # the original's Message-ID without <> (only an attached message has one), else ""
    forwarded: bool  # whether a forwarded message was found


# The header block's fields that are read, by name, in the languages of `languages.QUOTE_HEADERS` (whose blocks
# `header_at` finds). Gmail names the sender in the client's language and the date and subject in English.
_FIELD_KINDS = {
    **{name.casefold(): "from" for language in QUOTE_HEADERS.values() for name in language.from_fields},
    **dict.fromkeys(
        (
            *("sent", "date", "gesendet", "datum", "envoyé", "envoyé le", "message du", "enviado", "enviado el"),
            *("fecha", "inviato", "data", "enviado em", "enviada em", "enviada", "verzonden", "wysłano", "skickat"),
            *("lähetetty", "päivämäärä", "elküldve", "küldve", "dátum", "送信日時", "日付", "sendt", "dato"),
            *("отправлено", "дата"),
        ),
        "date",
    ),
    **dict.fromkeys(
        (
            *("subject", "betreff", "objet", "sujet", "asunto", "oggetto", "assunto", "onderwerp", "temat", "ämne"),
            *("aihe", "tárgy", "件名", "emne", "тема"),
        ),
        "subject",
    ),
}
# A field line: a name of words ("On 1 Dec 2026 at 9:14 … wrote:" is not one), which html2text may leave in
# Outlook's bold; French puts a space before the colon, Japanese may use a full-width one, Thunderbird a tab after.
_FIELD = re.compile(r"[*_]*((?:[^\W\d_]|[ .'-]){1,30}?)[*_]*\s?[:\uff1a]\s*(.*)")
# Links written into an address: html2text's "[a@b](mailto:a@b)", Outlook's plain "a@b<mailto:a@b>", older
# Outlook's "Name [mailto:a@b]".
_MARKDOWN_MAILTO = re.compile(r"\[([^\]]*)\]\(mailto:[^)]*\)")
_OUTLOOK_MAILTO = re.compile(r"<mailto:[^<>]*>")
_BRACKETED_MAILTO = re.compile(r"\[mailto:([^\]]*)\]")
_FORWARD_PREFIX = re.compile(r"^(?:\s*(?:fwd?|wg|tr|rv)\s*:)+\s*", re.IGNORECASE)
# What html2text writes as Markdown and plain text would not: an escape before a dash at a line's start
# ("\---------- Forwarded message"), "* * *" for a rule.
_MARKDOWN_ESCAPE = re.compile(r"^(\s*\d*)\\([-+.])", re.MULTILINE)
_RULE = re.compile(r"^\s*\* \* \*\s*$", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n{3,}")  # HTML's empty paragraphs and breaks
_QUOTE_MARK = re.compile(r"^\s*> ?")


def unwrap_forward(raw: bytes) -> Forwarded:
    """The email that `raw` forwards, with the note above it; `raw` itself (`forwarded=False`) when it forwards
    nothing."""
    outer = parse_rfc822(raw)
    found = _forward_in(raw, outer)
    if found is not None:
        return found
    return Forwarded(outer.sender, outer.subject, outer.date, outer.body_text, "", "", forwarded=False)


def _forward_in(raw: bytes, outer: MailText) -> Forwarded | None:
    message = message_from_bytes(raw, policy=default_policy)
    inline = _inline(_lines(_text_with_quotes(message, outer)))
    if inline is not None:
        return _inline_forwarded(inline, outer.subject)
    attached = _attached(message)
    if attached is None:
        return None
    original = parse_rfc822(attached)
    deeper = _forward_in(attached, original) if _FORWARD_PREFIX.match(original.subject) else None
    if deeper is not None:
        return replace(deeper, note=outer.body_text)
    return Forwarded(
        original.sender,
        original.subject,
        original.date,
        original.body_text,
        outer.body_text,
        original.message_id,
        forwarded=True,
    )


def _text_with_quotes(message: EmailMessage, outer: MailText) -> str:
    """The body as text: the plain alternative as mime reads it, else the HTML one with its quotes."""
    if message.get_body(preferencelist=("plain",)) is not None:
        return outer.body_text
    html = message.get_body(preferencelist=("html",))
    if html is None:
        return ""
    try:
        return _html_text(str(html.get_content()))
    except (LookupError, UnicodeError):  # a charset the stdlib cannot decode: mime's text is the best there is
        return outer.body_text


def _html_text(html: str) -> str:
    """mime's `html_to_text` without cutting the quotes."""
    converter = html2text.HTML2Text()
    converter.body_width = 0
    converter.ignore_images = True
    converter.ignore_emphasis = True
    converter.inline_links = True
    converter.skip_internal_links = True
    converter.unicode_snob = True
    text = _RULE.sub("", _MARKDOWN_ESCAPE.sub(r"\1\2", str(converter.handle(html)))).replace("\xa0", " ")
    return _BLANK_LINES.sub("\n\n", "\n".join(line.rstrip() for line in text.split("\n"))).strip()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.replace("\r\n", "\n").replace("\ufeff", "").split("\n")]


def _attached(message: EmailMessage) -> bytes | None:
    for part in message.walk():
        if part.get_content_type() == "message/rfc822" and isinstance(inner := part.get_payload(0), Message):
            return inner.as_bytes()
    return None


@dataclass(frozen=True)
class _Inline:
    note: str
    fields: dict[str, str]  # "from", "date", "subject": the original's, as written
    body: list[str]


def _inline(lines: Sequence[str]) -> _Inline | None:
    """The innermost inline forward in `lines`, with the outermost note."""
    found = _first_inline(lines)
    if found is None:
        return None
    innermost = found
    while _FORWARD_PREFIX.match(innermost.fields.get("subject", "")) and (deeper := _first_inline(innermost.body)):
        innermost = deeper
    return replace(innermost, note=found.note)


def _first_inline(lines: Sequence[str]) -> _Inline | None:
    stripped = [line.strip() for line in lines]
    for index, line in enumerate(stripped):
        if not line.startswith(">"):
            block = _block_after(stripped, index)
            if block is not None:
                return _read(lines[:index], stripped, block, lines)
        elif index == 0 or not stripped[index - 1].startswith(">"):  # a quote starts: Apple Mail's forward?
            end = next((i for i in range(index, len(lines)) if not stripped[i].startswith(">")), len(lines))
            unquoted = [_QUOTE_MARK.sub("", line) for line in lines[index:end]]
            unquoted_stripped = [line.strip() for line in unquoted]
            block = _block_after(unquoted_stripped, 0)
            if block is not None:
                return _read(lines[:index], unquoted_stripped, block, [*unquoted, *lines[end:]])
    return None


def _block_after(stripped: Sequence[str], index: int) -> range | None:
    """The header block of the forward header at `stripped[index]`: the header itself when it is Outlook's block,
    else the block right after it."""
    header = header_at(stripped, index)
    if header is None:
        return None
    field = _FIELD.fullmatch(stripped[index])
    if field is not None and field.group(2):  # "Begin forwarded message:" has no value
        return range(index, index + header.size)
    start = next((i for i in range(index + 1, min(index + 4, len(stripped))) if stripped[i]), None)
    if start is None or not _FIELD.fullmatch(stripped[start]):
        return None
    block = header_at(stripped, start)
    return range(start, start + block.size) if block is not None else None


def _read(above: Sequence[str], stripped: Sequence[str], block: range, lines: Sequence[str]) -> _Inline:
    """The forward whose header block is `stripped[block]`, its body the `lines` after it."""
    fields: dict[str, str] = {}
    kind: str | None = None
    for line in stripped[block.start : block.stop]:
        field = _FIELD.fullmatch(line)
        if field is not None:
            kind = _FIELD_KINDS.get(field.group(1).strip().casefold())  # None for To, Cc and the like
            if kind is not None:
                fields.setdefault(kind, field.group(2))
        elif line and kind is not None:
            fields[kind] += f" {line}"  # an address wrapped onto its own line
    return _Inline("\n".join(above).strip(), fields, list(lines[block.stop :]))


def _inline_forwarded(inline: _Inline, outer_subject: str) -> Forwarded:
    return Forwarded(
        sender=_address(inline.fields.get("from", "")),
        subject=inline.fields.get("subject", "").strip() or _FORWARD_PREFIX.sub("", outer_subject),
        date=_date(inline.fields.get("date", "")),
        body_text="\n".join(inline.body).strip(),
        note=inline.note,
        message_id="",
        forwarded=True,
    )


def _address(value: str) -> str:
    value = _BRACKETED_MAILTO.sub(r"<\1>", _OUTLOOK_MAILTO.sub("", _MARKDOWN_MAILTO.sub(r"\1", value)))
    return " ".join(value.split())


def _date(value: str) -> datetime | None:
    """A header block's date, as its client wrote it in its language ("Tue, Dec 1, 2026 at 9:14 AM",
    "1. Dezember 2026 um 09:14:00 MEZ")."""
    if not value.strip():
        return None
    from dateparser import parse  # about a second to import and to warm: only when a forward has a date

    return parse(value, languages=list(QUOTE_HEADERS), settings={"RETURN_AS_TIMEZONE_AWARE": True, "TIMEZONE": "UTC"})
