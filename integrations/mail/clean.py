"""Cleaning an email's plain-text body before it goes into a prompt.

The promise: cleaning never cuts an ask. It removes quoted history and the sender's sign-off and signature
only where they are certain, and keeps the text when in doubt.

- **Languages, per email.** The rules below are those of the email's own languages, never all at once: short
  patterns of one language match ordinary lines of another (Danish "Tak" in "Take", Swedish "/Name" in a
  path). The caller may pass them (say, from the person's settings); otherwise py3langid ranks the rules'
  languages on the text outside ">" quotes. Confident (top language ≥ 0.9) gives that language; else, as
  short emails mis-detect, the top three with at least 0.1 each. English is always added. A quote header is
  written by the sender's mail client, whose language may differ from the text's: a header line is also
  tried with the rules of its own detected language.
- **Quote header.** The email is cut at the first quote header, which must look like one: a whole
  "On <date> … wrote:" line (one or two lines, with a digit in it), or at least two consecutive Outlook
  header lines ("From:", "Sent:", …) of which one is the "From" field, or an "-----Original Message-----"
  line followed by a "From" field. A single "Data:" line is never a header.
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

The rules began as mail-parser-reply's, which are no longer used: its sign-offs match at any line start and
cut to the end of the email, its disclaimers remove sentences that mention "mail", its Polish header needs a
single line, and its Spanish, Dutch and Polish "wrote:" lines miss Gmail's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class _Language:
    wrote: str  # the "On <date>, <name> wrote:" line of Gmail, Apple Mail, Thunderbird
    fields: tuple[str, ...]  # Outlook's header block, the "From" field first
    signoffs: tuple[str, ...]
    sent_from: str  # a phone's signature line


_LANGUAGES: dict[str, _Language] = {
    "en": _Language(
        r"On\b.+\bwrote:",
        ("From", "Sent", "To", "Cc", "Subject", "Date"),
        (
            r"Thanks(?: again| a lot| so much)?",
            "Thank you",
            "Many thanks",
            "Cheers",
            "Best",
            "Regards",
            r"(?:Best|Kind|Warm|Warmest|Many) regards",
            "Best wishes",
            "All the best",
            r"(?:Yours )?sincerely",
            "Yours truly",
            "Talk soon",
            "Thx",
            "BR",
        ),
        r"Sent from my|Get Outlook for",
    ),
    "de": _Language(
        r"Am\b.+\bschrieb\b.*:",
        ("Von", "Gesendet", "An", "Cc", "Betreff", "Datum"),
        (
            r"Mit freundlichen Gr(?:ü|ue)(?:ß|ss)en",
            r"(?:Freundliche|Viele|Beste|Liebe|Herzliche) Gr(?:ü|ue)(?:ß|ss)e",
            r"Gr(?:ü|ue)(?:ß|ss)e",
            r"Gru(?:ß|ss)",
            "MfG",
            "LG",
            "VG",
            "Danke",
            "Vielen Dank",
        ),
        r"Gesendet von meinem|Von meinem \w+ gesendet",
    ),
    "fr": _Language(
        r"Le\b.+\ba écrit\s*:",
        ("De", "Envoyé", "À", "A", "Cc", "Objet", "Date"),
        (
            r"(?:Bien )?cordialement",
            "Bien à vous",
            r"(?:Meilleures )?salutations",
            r"Merci(?: beaucoup)?",
            "Bonne journée",
            "Amicalement",
            "Bises",
        ),
        r"Envoyé de mon|Envoyé depuis",
    ),
    "es": _Language(
        r"El\b.+\bescribió\s*:",
        ("De", "Enviado", "Para", "CC", "Asunto", "Fecha"),
        (r"(?:Un )?saludos?(?: cordiales)?", "Atentamente", "Cordialmente", r"(?:Muchas )?gracias", "Un abrazo"),
        r"Enviado desde mi",
    ),
    "it": _Language(
        r"Il\b.+\bha scritto\s*:",
        ("Da", "Inviato", "A", "Cc", "Oggetto", "Data"),
        (r"(?:Cordiali|Distinti) saluti", "Saluti", "Un saluto", r"Grazie(?: mille)?", "A presto"),
        r"Inviato da",
    ),
    "pt": _Language(
        r"Em\b.+\bescreveu\s*:",
        ("De", "Enviado", "Enviada", "Para", "Cc", "Assunto", "Data"),
        (
            "Atenciosamente",
            r"(?:Melhores )?cumprimentos",
            r"Abraços?",
            r"Obrigad[oa]",
            "Muito obrigad[oa]",
            "Saudações",
            "Att",
        ),
        r"Enviado do meu",
    ),
    "nl": _Language(
        r"Op\b.+\bschreef\b.*:",
        ("Van", "Verzonden", "Aan", "Cc", "Onderwerp", "Datum"),
        (
            r"(?:Met )?vriendelijke groet(?:en)?",
            r"(?:Hartelijke )?groet(?:en)?",
            "Bedankt",
            "Dank je",
            "Dank u",
            "Mvg",
            "Gr",
        ),
        r"Verzonden vanaf mijn|Verstuurd vanaf mijn",
    ),
    "pl": _Language(
        r"(?:Dnia\b.+|.*\d.*)\b(?:napisał\(a\)|napisał|napisała|nadesłał)\s*:",
        ("Od", "Wysłano", "Do", "DW", "Temat", "Data"),
        (r"(?:Serdecznie )?pozdrawiam", r"Z powa(?:ż|z)aniem", "Pozdrowienia", "Dziękuję", "Dzięki", "Pozdr"),
        r"Wysłano z",
    ),
    "sv": _Language(
        r"(?:Den\b.+|.*\d.*)\bskrev\b.*:",
        ("Från", "Skickat", "Till", "Kopia", "Ämne", "Datum"),
        (r"(?:Med )?vänliga hälsningar", r"(?:Bästa )?hälsningar", "Mvh", r"Tack(?: så mycket)?", r"/\w+"),
        r"Skickat från min",
    ),
    "fi": _Language(
        r".*\d.*\bkirjoitti\b.*:",
        ("Lähettäjä", "Lähetetty", "Vastaanottaja", "Kopio", "Aihe", "Päivämäärä"),
        (r"(?:Ystävällisin|Parhain) terveisin", "Terveisin", r"Kiitos(?: paljon)?", "Tervehtien", r"Yst\. terv\."),
        r"Lähetetty \w+sta",
    ),
    "hu": _Language(
        r".*\d.*\bírta\b.*:",
        ("Feladó", "Küldve", "Címzett", "Másolat", "Tárgy", "Dátum"),
        (r"(?:Baráti )?üdvözlettel", "Tisztelettel", "Köszönöm", "Köszönettel", "Üdv", "Üdvözlet"),
        r"\S+ küldve",
    ),
    "ja": _Language(
        r"\d{4}年\d{1,2}月\d{1,2}日.*:",
        ("差出人", "送信日時", "宛先", "CC", "件名", "日付"),
        (r"(?:以上、)?(?:よろしく|宜しく)お願い(?:いた|致)?します", "ありがとうございます"),
        r"\S+から送信",
    ),
}

# Gmail, Outlook and Apple Mail mark a forward or an old-style reply with a dashed line in the client's
# language; it counts only when a "From" field follows.
_SEPARATOR = re.compile(r"-{3,} ?[^-\n]{3,40} ?-{3,}|Begin forwarded message:|_{10,}")

# A question, a "please" in one of the languages, or a line that starts with a common imperative. The
# "please" of the Japanese sign-off (よろしくお願いします) is not an ask.
_ASK = re.compile(
    r"[?\uff1f]|ください|(?<!よろしく)(?<!宜しく)お願い"
    r"|\b(?:please|pls|kindly|let me know|make sure|don'?t forget|bitte|merci de|veuillez|s'il (?:te|vous) pla[iî]t|"
    r"por favor|per favore|alsjeblieft|alstublieft|gelieve|proszę|prosimy|snälla|vänligen|ole hyvä|kérem|kérlek|"
    r"légy szíves)\b"
    r"|(?:^|[.!]\s+)(?:send|take|call|check|review|sign|confirm|book|pay|let|remember|forward|reply|update|"
    r"approve|schedule|share|fill|complete|submit|prepare|bring|arrange|order|print|schick|sende|ruf|"
    r"envoie[zs]?|appelle[zs]?|envía|manda|invia|envie|stuur|bel|wyślij|skicka|ring|lähetä|soita|küldd?)\b",
    re.IGNORECASE | re.MULTILINE,
)
_CONTACT = re.compile(r"@|https?://|www\.|\|| \d{4,}|\+?\d[\d ().-]{6,}\d")

_SPACES = re.compile(r"[ \t\f\v\u00a0\u200b]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_RULE_LINE = re.compile(r"[-_=*~━─]+")


def clean_body(text: str, *, max_chars: int, languages: Iterable[str] | None = None) -> str:
    """The newest part of an email body: no quoted replies or signature, tidy whitespace, at most `max_chars`.

    `languages` (ISO 639-1 codes) picks the rules; without it they come from the text itself.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text[: max(max_chars * _PARSE_LIMIT_FACTOR, _PARSE_LIMIT_MIN)]
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    chosen = tuple(languages) if languages is not None else detect_languages(text)
    rules = _rules(tuple(sorted({"en", *(code for code in chosen if code in _LANGUAGES)})))
    visible = [line for line in _newest_message(lines, rules) if not line.startswith(">")]
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


@functools.cache
def _identifier():  # type: ignore[no-untyped-def]  # py3langid has no type hints
    # Imported and loaded on first use: the model takes about a second to load.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(_LANGUAGES))
    return identifier


@dataclass(frozen=True)
class _Rules:
    wrote: re.Pattern[str]
    field: re.Pattern[str]
    from_field: re.Pattern[str]
    signoff: re.Pattern[str]
    sent_from: re.Pattern[str]


@functools.cache
def _rules(codes: tuple[str, ...]) -> _Rules:
    chosen = [_LANGUAGES[code] for code in codes]

    def either(patterns: Iterable[str]) -> str:
        return "|".join(f"(?:{pattern})" for pattern in patterns)

    def fields(names: Iterable[str]) -> re.Pattern[str]:
        # html2text renders Outlook's bold field names as **From:**
        return re.compile(rf"[*_]*(?:{either(names)})[*_]* ?:", re.IGNORECASE)

    # Longest first, so that "Best regards" is tried before "Best".
    signoffs = either(sorted((s for language in chosen for s in language.signoffs), key=len, reverse=True))
    return _Rules(
        wrote=re.compile(rf"(?=.*\d)(?:{either(language.wrote for language in chosen)})", re.IGNORECASE),
        field=fields(name for language in chosen for name in language.fields),
        from_field=fields(language.fields[0] for language in chosen),
        signoff=re.compile(rf"(?:{signoffs})(?!\w)", re.IGNORECASE),
        sent_from=re.compile(rf"(?:{either(language.sent_from for language in chosen)})\b.{{0,60}}", re.IGNORECASE),
    )


# Quote headers ----------------------------------------------------------------------------------------------


def _newest_message(lines: list[str], rules: _Rules) -> list[str]:
    """The lines above the first quote header; for a bare forward, the forwarded text up to the next one."""
    start = 0
    index = 0
    while index < len(lines):
        size = _header_size(lines, index, rules)
        if not size:
            index += 1
            continue
        part = lines[start:index]
        if any(line and not line.startswith(">") for line in part):
            return part
        start = index = index + size
    return lines[start:]


def _header_size(lines: Sequence[str], index: int, rules: _Rules) -> int:
    """How many lines from `index` on form a quote header; 0 when none starts there."""
    size = _header_size_in(lines, index, rules)
    if size or ":" not in lines[index]:
        return size
    # An English reply from a German Gmail: the header's own language, detected on its lines alone.
    own_language = _identifier().classify(" ".join(lines[index : index + 3]))[0]
    return _header_size_in(lines, index, _rules(("en", own_language)))


def _header_size_in(lines: Sequence[str], index: int, rules: _Rules) -> int:
    line = lines[index]
    if not line:
        return 0
    if _SEPARATOR.fullmatch(line):
        following = next((other for other in lines[index + 1 : index + 3] if other), "")
        return 1 if rules.from_field.match(following) else 0
    if rules.wrote.fullmatch(line):
        return 1
    if index + 1 < len(lines) and rules.wrote.fullmatch(f"{line} {lines[index + 1]}"):
        return 2
    size = 0
    while index + size < len(lines) and rules.field.match(lines[index + size]):
        size += 1
    block = lines[index : index + size]
    return size if size >= 2 and any(rules.from_field.match(field) for field in block) else 0


# Sign-offs and signatures ------------------------------------------------------------------------------------


def _without_signature(lines: list[str], rules: _Rules) -> list[str]:
    for index, line in enumerate(lines):
        if not line or not any(lines[:index]):
            continue
        tail = lines[index + 1 :]
        ends_text = line in ("--", "__") or bool(rules.sent_from.fullmatch(line) and not _ASK.search(line))
        if not ends_text and _is_signoff(line, rules):
            ends_text = all(_signature_like(other) for other in tail)
        if ends_text:
            return lines if _cut_loses_an_ask(lines, index) else lines[:index]
    return lines


def _is_signoff(line: str, rules: _Rules) -> bool:
    match = rules.signoff.match(line)
    if not match or _ASK.search(line):
        return False
    # At most a name may follow on the same line ("Thanks, Alice Smith"), never the start of a sentence.
    name = line[match.end() :].strip(" ,.!:。-").split()
    return len(name) <= _NAME_MAX_WORDS and all(word[0].isupper() for word in name)


def _signature_like(line: str) -> bool:
    if not line:
        return True
    if _ASK.search(line):
        return False
    short = len(line.split()) <= _SIGNATURE_LINE_MAX_WORDS and len(line) <= _SIGNATURE_LINE_MAX_CHARS
    return short or bool(_CONTACT.search(line))


def _cut_loses_an_ask(lines: list[str], index: int) -> bool:
    """The keep-guard: the cut drops a large share of the visible text, and what it drops reads as an ask."""
    dropped = "\n".join(lines[index + 1 :])
    visible_chars = sum(len("".join(line.split())) for line in lines)
    dropped_chars = sum(len("".join(line.split())) for line in lines[index:])
    return dropped_chars > _KEEP_IF_DROPPING_MORE_THAN * visible_chars and bool(_ASK.search(dropped))


def _bound(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - len(ELLIPSIS)]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > 0:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
