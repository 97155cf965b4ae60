"""Cleaning an email's plain-text body before it goes into a prompt.

The promise: cleaning never cuts an ask. It removes quoted history and the sender's sign-off and signature
only where they are certain, and keeps the text when in doubt.

- **Languages, per email.** The sign-off and signature rules are those of the email's own languages, never
  all at once: short patterns of one language match ordinary lines of another (Danish "Tak" in "Take",
  Swedish "/Name" in a path). The caller may pass them (say, from the person's settings); otherwise
  py3langid ranks the rules' languages on the text outside ">" quotes. Confident (top language ≥ 0.9) gives
  that language; else, as short emails mis-detect, the top three with at least 0.1 each. English is always
  added. Quote headers are another matter (`quote_headers.py`): the sender's mail client writes them in its
  own language, so they are looked for in every language, and each must look like a header as a whole.
- **Quoted history.** HTML quotes are gone before the text gets here (`html_quotes.py`). In the text, the
  email is cut at the first quote header ("On <date> … wrote:", Outlook's "From:/Sent:/To:" block, an
  "-----Original Message-----" or forward line, Yandex's "<date>, <time>, "Name" <address>:"), except where
  the header is an attribution whose quote follows as ">" lines: there the header and the ">" lines go, and
  the person's lines between and below the quote stay (a bottom-posted or interleaved reply). A header with
  no ">" quote after it must be certain by itself, as it cuts everything below: with an address or a time
  in it, or naming the reader ("On Nov 26, 2013 you wrote:", a whole line). With nothing of the person's
  above the first header, the email is a bare forward: the forwarded text is the message.
- **Sign-off.** A sign-off ("Best regards", "Mit freundlichen Grüßen", …) counts only alone on its line
  (optionally followed by a name of at most three words), and "Thanks, and please send …" or "Best, I think
  we should meet Tuesday" is text, not a sign-off. It ends what the person wrote when every line after it is
  short, contact-like or a legal footer. A reply that delivers something often says so below the sign-off
  ("Thanks!" then "P.S. Booked.", "Done: the report." or "Sent it over."): a postscript (P.S., PS, PD, NB,
  … in any language), a sentence however short, an item or an ask there is the person's, so the text runs
  to the last such line, and only a signature that looks like one (a name, a title, contact lines, a legal
  footer; no other lowercase word) is cut below it.
- **Signature.** A "--" line or a "Sent from my …" line starts the signature, by convention.
- **Keep-guard.** The visible text is the newest message outside ">" quotes (what a mail client shows
  before "…"): quoted history is earlier mail, whose asks were read when it arrived. A sign-off or signature
  cut is undone when it would drop more than a quarter of the visible text's non-space characters and the
  lines it drops below the cut read as an ask (a question mark, a "please"-like word in one of the
  languages, or a line starting with a common imperative verb), a legal footer's "please notify the
  sender" aside.

The rules are ours, each with its fixture (tests/fixtures/mail/, tests/integrations/test_clean_*.py): the
libraries fall short of the languages and of the promise. mail-parser-reply, where the rules began, matches
sign-offs at any line start and cuts to the end of the email, removes sentences that mention "mail" as
disclaimers, needs Polish headers on one line and misses Gmail's Spanish, Dutch and Polish "wrote:" lines;
quotequail (0.5) knows the "wrote:" lines and Outlook fields of English, German, French, Spanish, Swedish,
Portuguese and Russian, but not Italian, Dutch, Polish, Finnish, Hungarian or Japanese, and cuts at the
first of them, bottom-posted replies included; talon has not been released since 2017. Put in place of
`_newest_message` (the rest of this module kept) for issue 22, mail-parser-reply 1.36, email-reply-parser
0.5.12, quotequail 0.5.4 and talon 1.4.4 left quote headers or quoted lines in 53 to 77 of the 128 reply
shapes of tests/fixtures/mail/ and in 12 to 18 of the 52 crisp-oss replies there, and failed 75 to 102
of the 198 cleaning tests that stood before that issue. For HTML, a library does the work: the clients mark
their quotes in the markup, and selectolax finds them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from integrations.mail.languages import ASK, FOOTER, LANGUAGES, POSTSCRIPT, YOU_WROTE
from integrations.mail.quote_headers import Header, header_at

ELLIPSIS = "…"

# The patterns run over the text line by line; bounding the input bounds their time.
_PARSE_LIMIT_FACTOR = 4
_PARSE_LIMIT_MIN = 20_000

_DETECT_CHARS = 2_000
_CONFIDENT = 0.9
_PLAUSIBLE = 0.1
_KEEP_IF_DROPPING_MORE_THAN = 0.25
_NAME_MAX_WORDS = 3
_SIGNATURE_LINE_MAX_WORDS = 5
_SIGNATURE_LINE_MAX_CHARS = 50
_FOOTER_MIN_WORDS = 8
_ABBREVIATION_MAX_LETTERS = 3  # "Inc.", "Co.", "Jr.", "Dan." end no sentence; "Done." and "Booked." do

# Lowercase words that names, titles and companies hold ("Jan de Vries", "Head of Legal", "Smith and Sons"):
# any other lowercase word makes a line read as a sentence, not as a signature's.
_NAME_PARTICLES = frozenset(
    {"of", "and", "for", "at", "to"}  # English
    | {"de", "du", "da", "di", "le", "la", "les", "des", "del", "dos", "das", "do", "y", "e", "i", "et"}  # Romance
    | {"van", "von", "der", "den", "und", "och", "z", "és"}  # Dutch, German, Swedish, Polish, Hungarian
)


_CONTACT = re.compile(r"@|https?://|www\.|\|| \d{4,}|\+?\d[\d ().-]{6,}\d")

_SPACES = re.compile(r"[ \t\f\v\u00a0\u200b]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_RULE_LINE = re.compile(r"(?:[-_=*~━─] ?)+")  # html2text draws <hr> as "* * *"
_SENTENCE_END = ("!", "。", "！")  # noqa: RUF001  (the full-width one ends Japanese sentences)
# A list item ("- the budget", "2) call Bob") or a labelled one ("Done: the report", "Open: the invoice").
_ITEM = re.compile(r"(?:[-*•\u2013]|\d{1,2}[.)]|[^\W\d_][\w' -]{0,24}:)\s+(.+)")
_YOU_WROTE = re.compile(rf"(?=.*\d){YOU_WROTE}\s*:")


def clean_body(text: str, *, max_chars: int, languages: Iterable[str] | None = None) -> str:
    """The newest part of an email body: no quoted replies or signature, tidy whitespace, at most `max_chars`.

    `languages` (ISO 639-1 codes) picks the rules; without it they come from the text itself.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text[: max(max_chars * _PARSE_LIMIT_FACTOR, _PARSE_LIMIT_MIN)]
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    # One blank line for a run of them (html2text leaves several between paragraphs), so that the blank
    # lines between a quote header's parts are counted alike in plain text and HTML.
    lines = [line for index, line in enumerate(lines) if line or not index or lines[index - 1]]
    chosen = tuple(languages) if languages is not None else detect_languages(text)
    rules = _rules(tuple(sorted({"en", *(code for code in chosen if code in LANGUAGES)})))
    visible = [line for line in _newest_message(lines) if not line.startswith(">")]
    kept = _without_signature(visible, rules)
    while kept and (not kept[-1] or _RULE_LINE.fullmatch(kept[-1])):
        kept.pop()
    return _bound(_BLANK_LINES.sub("\n\n", "\n".join(kept)).strip(), max_chars)


def detect_languages(text: str) -> tuple[str, ...]:
    """The languages whose rules apply to `text`, best first (see the module docstring)."""
    sample = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))[:_DETECT_CHARS]
    ranked = _identifier().rank(sample)
    if ranked[0][1] >= _CONFIDENT:
        return (ranked[0][0],)
    return tuple(code for code, probability in ranked[:3] if probability >= _PLAUSIBLE)


def clean_warm_up() -> None:
    """Load what cleaning loads on first use (the language model takes a second or more), so that a
    worker pays it when it starts, not the first run it takes (config/celery.py)."""
    _identifier()
    _rules(("en",))


@functools.cache
def _identifier():  # type: ignore[no-untyped-def]  # py3langid has no type hints
    # Imported and loaded on first use (or by clean_warm_up): the model takes a second or more to load.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


@dataclass(frozen=True)
class _Rules:
    signoff: re.Pattern[str]
    sent_from: re.Pattern[str]


@functools.cache
def _rules(codes: tuple[str, ...]) -> _Rules:
    chosen = [LANGUAGES[code] for code in codes]
    # Longest first, so that "Best regards" is tried before "Best".
    signoffs = "|".join(
        f"(?:{pattern})"
        for pattern in sorted((s for language in chosen for s in language.signoffs), key=len, reverse=True)
    )
    sent_from = "|".join(f"(?:{language.sent_from})" for language in chosen)
    return _Rules(
        signoff=re.compile(rf"(?:{signoffs})(?!\w)", re.IGNORECASE),
        sent_from=re.compile(rf"(?:{sent_from})\b.{{0,60}}", re.IGNORECASE),
    )


# Quote headers ----------------------------------------------------------------------------------------------


def _newest_message(lines: list[str]) -> list[str]:
    """The person's own lines: those above the first quote header, and those between and below the ">"
    quotes of marked headers (a bottom-posted or interleaved reply). For a bare forward (nothing of the
    person's above the header), the forwarded text up to the next header."""
    kept: list[str] = []
    start = index = 0
    while index < len(lines):
        header = header_at(lines, index) or _you_wrote_at(lines, index)
        if header is None:
            index += 1
            continue
        part = kept + lines[start:index]
        if header.marked:
            kept = part
        elif any(line and not line.startswith(">") and not _RULE_LINE.fullmatch(line) for line in part):
            return part
        else:
            kept = []
        start = index = index + header.size
    return kept + lines[start:]


def _you_wrote_at(lines: list[str], index: int) -> Header | None:
    """An "On Nov 26, 2013 you wrote:" line with no ">" quote after it (`languages.YOU_WROTE`). It is certain
    by itself, with no address or time, where "On 3 March 2026 we wrote:" is not: "you" is the reader, so what
    follows is the reader's earlier message. (It belongs in `quote_headers.header_at`, once that file is free.)"""
    line = lines[index]
    if line.startswith(">") or not _YOU_WROTE.fullmatch(line) or ASK.search(line):
        return None
    return Header(1, False)


# Sign-offs and signatures ------------------------------------------------------------------------------------


def _without_signature(lines: list[str], rules: _Rules) -> list[str]:
    below = _below_sign_offs(lines, rules)
    for index, line in enumerate(lines):
        if not line or not any(lines[:index]):
            continue
        cut: int | None = None
        if line in ("--", "__") or (rules.sent_from.fullmatch(line) and not ASK.search(line)):
            cut = index
        elif _is_signoff(line, rules):
            cut = _end_after_sign_off(index, below)
        if cut is not None:
            return lines if _cut_loses_an_ask(lines, cut, below.footer) else lines[:cut]
    return lines


@dataclass(frozen=True)
class _Below:
    """What the lines below a sign-off are, worked out once per email: a sign-off word may stand on many."""

    footer: frozenset[int]  # the lines of legal footers
    last_own: int  # the person's last line below a sign-off (`_reads_as_the_persons`); -1 for none
    signature_like_from: int  # from here on, every line is short, contact-like or a footer's
    signature_from: int  # from here on, every line looks like a signature (`_looks_like_a_signature`) or a footer's


def _below_sign_offs(lines: list[str], rules: _Rules) -> _Below:
    footer = _footer_lines(lines)
    own = [position for position in range(len(lines)) if _reads_as_the_persons(lines, position, footer, rules)]
    return _Below(
        footer=footer,
        last_own=own[-1] if own else -1,
        signature_like_from=_all_true_from(
            [position in footer or _signature_like(line) for position, line in enumerate(lines)]
        ),
        signature_from=_all_true_from(
            [position in footer or _looks_like_a_signature(line, rules) for position, line in enumerate(lines)]
        ),
    )


def _all_true_from(flags: list[bool]) -> int:
    start = len(flags)
    while start and flags[start - 1]:
        start -= 1
    return start


def _end_after_sign_off(index: int, below: _Below) -> int | None:
    """Where the person's text ends, a sign-off being at `index`; None when the sign-off ends nothing.

    With only a signature after it, the text ends at the sign-off. A line of the person's may follow it (a
    P.S., a short sentence such as "Booked." or "Done: the report.", an item, an ask): replies that deliver
    something write it there, and it was cut with the signature. Then the sign-off and everything down to the
    person's last line stay, and only what looks like a signature below that goes: a name, a title, contact
    lines, a footer. A short line is not enough there, as below the person's own line it may be theirs too.
    """
    if below.last_own <= index:
        return index if below.signature_like_from <= index + 1 else None
    end = below.last_own + 1
    return end if below.signature_from <= end else None


def _is_signoff(line: str, rules: _Rules) -> bool:
    match = rules.signoff.match(line)
    if not match or ASK.search(line):
        return False
    # At most a name may follow on the same line ("Thanks, Alice Smith"), never the start of a sentence.
    name = line[match.end() :].strip(" ,.!:。-").split()
    return len(name) <= _NAME_MAX_WORDS and all(word[0].isupper() for word in name)


def _reads_as_the_persons(lines: list[str], position: int, footer: frozenset[int], rules: _Rules) -> bool:
    """A line below a sign-off that the person wrote: a postscript, or, outside a footer, an ask, a sentence
    or an item. Another sign-off ("Cheers!") is not one."""
    line = lines[position]
    if not line:
        return False
    if POSTSCRIPT.match(line):
        return True
    if position in footer or _is_signoff(line, rules):
        return False
    return bool(ASK.search(line)) or _reads_as_a_sentence(line) or _names_an_item(line)


def _reads_as_a_sentence(line: str) -> bool:
    """A sentence, however short ("Booked.", "Sent it over.", "Erledigt!"), not a name's or a company's line
    that ends with a dot ("D.", "Acme Corp.", "Jan de Vries Jr.")."""
    if line.endswith(_SENTENCE_END):
        return True
    if not line.endswith("."):
        return False
    words = line[:-1].split()
    if not words or not words[-1].isalpha():  # "J.R.", "Sp. z o.o.", "+1 555 0100."
        return False
    if len(words) == 1:
        return len(words[0]) > _ABBREVIATION_MAX_LETTERS
    return any(_is_lowercase_word(word) for word in words[1:])


def _names_an_item(line: str) -> bool:
    item = _ITEM.fullmatch(line)
    if item is None or _CONTACT.search(line):
        return False
    return any(_is_lowercase_word(word) for word in item[1].split())


def _is_lowercase_word(word: str) -> bool:
    word = word.strip(",;:()\"'")
    return word.isalpha() and word[0].islower() and word not in _NAME_PARTICLES


def _signature_like(line: str) -> bool:
    """A line of a signature, where nothing of the person's follows the sign-off: short, or contact-like."""
    if not line:
        return True
    if ASK.search(line):
        return False
    short = len(line.split()) <= _SIGNATURE_LINE_MAX_WORDS and len(line) <= _SIGNATURE_LINE_MAX_CHARS
    return short or bool(_CONTACT.search(line))


def _looks_like_a_signature(line: str, rules: _Rules) -> bool:
    """A line of a signature, where the person's own lines stand above it: blank, a sign-off, a phone's line,
    a contact line, or a name, title, company or address (no lowercase word but a name's: "D. Giron", "Head of
    Legal", "佐藤")."""
    if not line or _is_signoff(line, rules) or rules.sent_from.fullmatch(line) or _CONTACT.search(line):
        return True
    return len(line) <= _SIGNATURE_LINE_MAX_CHARS and not any(_is_lowercase_word(word) for word in line.split())


def _footer_lines(lines: list[str]) -> frozenset[int]:
    """The lines of legal footers (`languages.FOOTER`): each paragraph that reads as one, all its lines."""
    footer: set[int] = set()
    start = 0
    for end in [*(index for index, line in enumerate(lines) if not line), len(lines)]:
        paragraph = " ".join(lines[start:end])
        if len(paragraph.split()) >= _FOOTER_MIN_WORDS and FOOTER.match(paragraph):
            footer.update(range(start, end))
        start = end + 1
    return frozenset(footer)


def _cut_loses_an_ask(lines: list[str], index: int, footer: frozenset[int]) -> bool:
    """The keep-guard: the cut drops a large share of the visible text, and what it drops reads as an ask
    (a footer's "please notify the sender" is no ask of the person's)."""
    dropped = "\n".join(line for position, line in enumerate(lines) if position >= index and position not in footer)
    visible_chars = sum(len("".join(line.split())) for line in lines)
    dropped_chars = sum(len("".join(line.split())) for line in lines[index:])
    return dropped_chars > _KEEP_IF_DROPPING_MORE_THAN * visible_chars and bool(ASK.search(dropped))


def _bound(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - len(ELLIPSIS)]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > 0:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
