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
  no ">" quote after it must be certain by itself, as it cuts everything below. With nothing of the person's
  above the first header, the email is a bare forward: the forwarded text is the message.
- **Sign-off.** A sign-off ("Best regards", "Mit freundlichen Grüßen", …) counts only alone on its line
  (optionally followed by a name of at most three words) and only when it ends what the person wrote:
  every line after it is short or contact-like, and none reads as an ask. "Thanks, and please send …" or
  "Best, I think we should meet Tuesday" is text, not a sign-off.
- **Signature.** A "--" line or a "Sent from my …" line starts the signature, by convention.
- **Keep-guard.** The visible text is the newest message outside ">" quotes (what a mail client shows
  before "…"): quoted history is earlier mail, whose asks were read when it arrived. A sign-off or signature
  cut is undone when it would drop more than a quarter of the visible text's non-space characters and the
  lines it drops below the cut read as an ask (a question mark, a "please"-like word in one of the
  languages, or a line starting with a common imperative verb).

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

from integrations.mail.languages import ASK, LANGUAGES
from integrations.mail.quote_headers import header_at

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


_CONTACT = re.compile(r"@|https?://|www\.|\|| \d{4,}|\+?\d[\d ().-]{6,}\d")

_SPACES = re.compile(r"[ \t\f\v\u00a0\u200b]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_RULE_LINE = re.compile(r"(?:[-_=*~━─] ?)+")  # html2text draws <hr> as "* * *"


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
        header = header_at(lines, index)
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


# Sign-offs and signatures ------------------------------------------------------------------------------------


def _without_signature(lines: list[str], rules: _Rules) -> list[str]:
    for index, line in enumerate(lines):
        if not line or not any(lines[:index]):
            continue
        tail = lines[index + 1 :]
        ends_text = line in ("--", "__") or bool(rules.sent_from.fullmatch(line) and not ASK.search(line))
        if not ends_text and _is_signoff(line, rules):
            ends_text = all(_signature_like(other) for other in tail)
        if ends_text:
            return lines if _cut_loses_an_ask(lines, index) else lines[:index]
    return lines


def _is_signoff(line: str, rules: _Rules) -> bool:
    match = rules.signoff.match(line)
    if not match or ASK.search(line):
        return False
    # At most a name may follow on the same line ("Thanks, Alice Smith"), never the start of a sentence.
    name = line[match.end() :].strip(" ,.!:。-").split()
    return len(name) <= _NAME_MAX_WORDS and all(word[0].isupper() for word in name)


def _signature_like(line: str) -> bool:
    if not line:
        return True
    if ASK.search(line):
        return False
    short = len(line.split()) <= _SIGNATURE_LINE_MAX_WORDS and len(line) <= _SIGNATURE_LINE_MAX_CHARS
    return short or bool(_CONTACT.search(line))


def _cut_loses_an_ask(lines: list[str], index: int) -> bool:
    """The keep-guard: the cut drops a large share of the visible text, and what it drops reads as an ask."""
    dropped = "\n".join(lines[index + 1 :])
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
