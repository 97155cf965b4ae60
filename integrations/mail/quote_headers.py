"""Where quoted history starts in a plain-text body: the quote headers mail clients write.

A quote header is found in every language of `languages.QUOTE_HEADERS` at once, whatever the email's own
language: the header is written by the sender's mail client, whose language often differs from the text's,
and a header must look like one as a whole, which ordinary lines of any language do not.

What follows a header is cut as earlier mail, so a header must say so on its own where no ">" quote follows:
a person's "On 3 March 2026 we wrote:" above a list is their text.

- **Attribution**: a whole "On <date>, <name> wrote:" line, or up to three (Gmail wraps it, sometimes after
  an opening "<", and mail turned from HTML breaks it before the address and again before "wrote:"), with
  a digit in it. When the quote follows as ">" lines the header is *marked*: the quote is certain, so the
  colon is optional and any line with a digit ending in a "wrote" verb or an address counts, and the
  person's own lines after the quote (a bottom-posted or interleaved reply) are kept. Unmarked, the
  attribution must hold an address or a time besides, and without its colon an address and the verb last.
  Yandex, Mail.ru and Gmail in some languages write no verb: a date, a time, then a name and its
  "<address>:" count as well.
- **Header block** (Outlook, forwards): at least two field lines ("From:", "Sent:", …) of which one is a
  "From" field whose value does not start with a digit ("Od: 1 grudnia" is a date) and which holds an
  address, or at least three fields. Blank lines (HTML paragraphs turned into text) and a wrapped address
  may stand between the fields.
- **Separator**: a dashed line naming the earlier message in any language ("-----Original Message-----",
  "----- Original Message -----", "-------- Oprindelig besked --------", any case) or holding an unmarked
  attribution (Zoho's "---- On <date> <address> wrote ----"); another dashed line ("---- Notes ----") or
  Outlook's underscores only when a field line follows; Apple Mail's "Begin forwarded message:" in one of
  the languages, followed by a header block.

Lines starting with ">" are quoted already and never a header.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from integrations.mail.languages import ASK, QUOTE_HEADERS, WROTE_VERBS

_MAX_GAP = 2  # blank or continuation lines between two fields of one header block
_MIN_FIELDS_WITHOUT_ADDRESS = 3
_MAX_ATTRIBUTION_CHARS = 300
_MAX_ATTRIBUTION_LINES = 3


def _either(patterns: Sequence[str]) -> str:
    return "|".join(f"(?:{pattern})" for pattern in sorted(patterns, key=len, reverse=True))


_WROTE_PATTERNS = _either([p for language in QUOTE_HEADERS.values() for p in language.wrote])
_WROTE = re.compile(rf"(?=.*\d)(?:{_WROTE_PATTERNS})\s*:", re.IGNORECASE)
_LOOSE_WROTE = re.compile(
    rf"(?=.*\d)(?:(?:{_WROTE_PATTERNS})|[^?]*\b(?:{WROTE_VERBS})\b[^?]{{0,80}}|[^?]*<[^<>\s]+@[^<>\s]+>\)?)\s*:?",
    re.IGNORECASE,
)
_WROTE_NO_COLON = re.compile(rf"(?=.*\d)(?:{_WROTE_PATTERNS})", re.IGNORECASE)
_VERB_LAST = re.compile(rf"\b(?:{WROTE_VERBS})$", re.IGNORECASE)
_TIME = re.compile(r"(?<![\d.:])\d{1,2}[:.]\d{2}(?![\d.])")
_ADDRESS = re.compile(r"@|mailto:", re.IGNORECASE)
# Yandex's "30.09.2017, 18.30, "Name" <address>:", Mail.ru's "<date>, 3:32 PM +0300 from <address> <address>:",
# Gmail's "2017-11-24 16:32 GMT+01:00 Name <address>:" and its Russian "<weekday>, 30 <month>. 2025 <year> в 15:19,
# Name <address>:". Each starts with its date, its time or a weekday: "Meeting on 24.11.2026 at 10:00 with
# Carol <carol@example.com>:" is the person's.
_DATED_ADDRESS = re.compile(
    r"(?=\d|[^\W\d]{1,12}\.?,)(?=.*\b(?:19|20)\d{2}\b)(?=.*\d{1,2}[:.]\d{2}).*<[^<>\s]+@[^<>\s]+>\s*:"
)


def _field(names: Sequence[str]) -> re.Pattern[str]:
    # html2text renders Outlook's bold field names as **From:** unless told not to; French puts a space
    # before the colon, Japanese may use a full-width one.
    return re.compile(rf"[*_]*(?:{_either(names)})[*_]*\s?[:\uff1a]\s*", re.IGNORECASE)


_FROM_FIELD = _field([name for language in QUOTE_HEADERS.values() for name in language.from_fields])
_ANY_FIELD = _field([name for language in QUOTE_HEADERS.values() for name in (*language.from_fields, *language.fields)])
_SEPARATOR = re.compile(r"-{3,} ?[^-\n]{3,40} ?-{3,}|_{10,}")
_NAMED_SEPARATOR = re.compile(
    rf"-{{2,}} ?(?:{_either([p for language in QUOTE_HEADERS.values() for p in language.separators])}) ?-{{2,}}",
    re.IGNORECASE,
)
_DASHED = re.compile(r"-{2,} ?(.+?) ?-{2,}")
_FORWARDED = re.compile(
    rf"(?:{_either([p for language in QUOTE_HEADERS.values() for p in language.forwarded])})\s*:", re.IGNORECASE
)
# A line that ends a sentence is the person's, not a header's first part; "23." in "So., 23.\nJuni 2024" is a date.
_SENTENCE_END = re.compile(r"(?:(?<!\d)\.|[!?。！？])$")  # noqa: RUF001  (the full-width ones end Japanese sentences)
_OPEN_END = re.compile(r"[<(\[]$")  # a header wrapped inside its address: what follows cannot stand alone
_CONTINUATION = re.compile(r"[<\[(]?\S+@\S+[>\])]?;?|<[^<>]*>?")


@dataclass(frozen=True)
class Header:
    size: int  # how many lines, from where it starts
    marked: bool  # an attribution whose quote follows as ">" lines: the person's lines after it are theirs


def header_at(lines: Sequence[str], index: int) -> Header | None:
    """The quote header starting at `lines[index]` (stripped lines), or None."""
    line = lines[index]
    if not line or line.startswith(">"):
        return None
    if _NAMED_SEPARATOR.fullmatch(line):
        return Header(1, False)
    dashed = _DASHED.fullmatch(line)
    if dashed and _unmarked_attribution(dashed.group(1)):
        return Header(1, False)
    following = _next_text_line(lines, index + 1)
    if _SEPARATOR.fullmatch(line):
        return Header(1, False) if following is not None and _ANY_FIELD.match(lines[following]) else None
    if _FORWARDED.fullmatch(line):
        return Header(1, False) if following is not None and _block_size(lines, following) else None
    size = _block_size(lines, index)
    if size:
        return Header(size, False)
    return _attribution(lines, index)


def is_attribution(text: str) -> bool:
    """Whether `text` (a quote's attribution in HTML, the quote itself marked by the markup) reads as one."""
    line = " ".join(text.split())
    return len(line) <= _MAX_ATTRIBUTION_CHARS and bool(_LOOSE_WROTE.fullmatch(line)) and not ASK.search(line)


def is_header_block(text: str) -> bool:
    """Whether `text`, an element's text with its line breaks, is a header block (Outlook's, in HTML)."""
    lines = [" ".join(line.split()) for line in text.split("\n")]
    lines = [line for line in lines if line]
    return bool(lines) and _block_size(lines, 0) > 0


def _next_text_line(lines: Sequence[str], start: int) -> int | None:
    for index in range(start, min(start + 1 + _MAX_GAP, len(lines))):
        if lines[index]:
            return index
    return None


def _attribution(lines: Sequence[str], index: int, *, first_line_may_stand_alone: bool = True) -> Header | None:
    for size in range(1, _MAX_ATTRIBUTION_LINES + 1):
        if index + size > len(lines) or not all(lines[index : index + size]):
            return None
        if size > 1 and _SENTENCE_END.search(lines[index + size - 2]):
            return None  # the line above a header is the person's, not the header's first part
        if (
            size == 2
            and first_line_may_stand_alone
            and not _OPEN_END.search(lines[index])
            and _attribution(lines, index + 1, first_line_may_stand_alone=False)
        ):
            return None  # the header starts on the next line; this one is the person's
        line = " ".join(lines[index : index + size])
        after = _next_text_line(lines, index + size)
        marked = after is not None and lines[after].startswith(">")
        if (marked and (_WROTE.fullmatch(line) or is_attribution(line))) or _unmarked_attribution(line):
            return Header(size, marked)
    return None


def _unmarked_attribution(line: str) -> bool:
    """Whether `line` is an attribution even with no ">" quote after it (see the module docstring)."""
    # The cheap tests first: the patterns of every language at once are slow on a long list of short lines.
    if len(line) > _MAX_ATTRIBUTION_CHARS:
        return False
    address = bool(_ADDRESS.search(line))
    if line.endswith(":"):
        found = ((address or _TIME.search(line)) and _WROTE.fullmatch(line)) or (
            address and _DATED_ADDRESS.fullmatch(line)
        )
    else:
        found = address and _VERB_LAST.search(line) and _WROTE_NO_COLON.fullmatch(line)
    return bool(found) and not ASK.search(line)


def _block_size(lines: Sequence[str], index: int) -> int:
    """How many lines from `index` form a header block (see the module docstring); 0 when none starts there."""
    fields: list[str] = []
    end = index
    gap = 0
    position = index
    while position < len(lines) and gap <= _MAX_GAP:
        line = lines[position]
        if _ANY_FIELD.match(line) and not line.startswith(">"):
            fields.append(line)
            end = position + 1
            gap = 0
        elif fields and line and _CONTINUATION.fullmatch(line) and gap == 0:
            fields[-1] += f" {line}"  # an address wrapped onto its own line
            end = position + 1
        elif fields and not line:
            gap += 1
        else:
            break
        position += 1
    senders = [field[match.end() :] for field in fields if (match := _FROM_FIELD.match(field))]
    if len(fields) < 2 or not senders or senders[0][:1].isdigit():
        return 0
    if not _ADDRESS.search(senders[0]) and len(fields) < _MIN_FIELDS_WITHOUT_ADDRESS:
        return 0
    return end - index
