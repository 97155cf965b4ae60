"""The sandbox's stand-in for Gemini's judgement: a small, deterministic reader of task prompts.

It reads the `<email id="...">` blocks of a prompt and decides each email's tasks (asks in mail the reader
received; commitments and waiting items in mail they sent) and what it does to the open items its block
was given (delivered, or a new due date), by the rules in sandbox/READER.md. The rules are deliberately
simple so that demo mail can be written to produce known tasks, and so that a test can predict the answer
exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

ECHO_JSON = "SANDBOX-ECHO-JSON:"
ECHO_TEXT = "SANDBOX-ECHO-TEXT:"
MAX_TASKS = 3
MAX_TITLE_CHARS = 120

_BLOCK = re.compile(r'<email\s+id="([^"]*)"\s*>\n?(.*?)</email>', re.DOTALL)
_HEADER = re.compile(r"^(From|To|Cc|Subject|Date):[ \t]*(.*)$")
SENT_MARK = "Sent by the reader"  # as extraction/prompt.py writes it
_ITEM = re.compile(r'^Item (item_\d+) \((ask|commitment|waiting)\): (.*?) \| "(.*)"$')
_READER = re.compile(r"^Reader:[ \t]*(.*)$", re.MULTILINE)
# "Sam, can you…", "Sam Lee: please…": a sentence opening on a name (one to three words) and a comma or colon.
_ADDRESSEE = re.compile(r"^([^\W\d_][\w.'-]*(?: [^\W\d_][\w.'-]*){0,2})\s*[,:]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

_NO_TASK_PHRASES = ("unsubscribe", "no action is required", "no action needed", "this is an automated", "do not reply")
_NO_TASK_SUBJECT = ("receipt",)

_ASK_PHRASES = (
    "please",
    "could you",
    "can you",
    "would you",
    "kindly",
    "action required",
    "don't forget to",
    "remember to",
    "make sure",
    "need you to",
    "is due",
    "due by",
    "payment due",
    "merci de",
    "pourriez-vous",
    "s'il vous plaît",
    "s'il vous plait",
    "por favor",
    "podrías",
    "podrias",
    "bitte",
)
_COMMITMENT = re.compile(
    r"^(?:i'll|i will|i'm going to|i am going to|je vais|ich werde|voy a|jeg vil)\s+(.+)$", re.IGNORECASE | re.DOTALL
)
_ACKNOWLEDGEMENT = re.compile(r"^i'll (?:look at it|get back to you|check)(?!\w)", re.IGNORECASE)
_NEXT_WEEK = re.compile(r"\bnext week\b", re.IGNORECASE)
_DELIVERY_PHRASES = (
    "here is",
    "here are",
    "attached",
    "i've sent",
    "i have sent",
    "done",
    "booked",
    "paid",
    "ci-joint",
    "voici",
    "anbei",
    "hier ist",
    "adjunto",
    "aquí está",
    "aqui esta",
    "vedhæftet",
    "her er",
)
_SETTLING_PHRASES = (
    "never mind",
    "no longer needed",
    "cancelled",
    "canceled",
    "annulé",
    "abgesagt",
    "cancelado",
    "aflyst",
)
_PAID_PHRASES = ("payment received", "has been paid")
_NOT_ASK_PHRASES = ("no need to", "you don't need to", "you don't have to", "thanks for", "thank you for")
_HIGH_PHRASES = ("urgent", "asap", "as soon as possible", "immediately", "action required", "overdue")
_LOW_PHRASES = ("no rush", "when you get a chance", "whenever you can")

_GREETING = re.compile(
    r"^(?:hi|hello|hey|dear|good (?:morning|afternoon|evening)|bonjour|salut|hola|hallo|guten (?:morgen|tag))"
    r"\b[^,.!?:;]{0,40}[,!:]\s*",
    re.IGNORECASE,
)
_FILLERS = (
    "please",
    "could you",
    "can you",
    "would you",
    "kindly",
    "i need you to",
    "we need you to",
    "need you to",
    "also",
    "don't forget to",
    "remember to",
    "make sure to",
    "make sure you",
    "merci de",
    "pourriez-vous",
    "s'il vous plaît",
    "s'il vous plait",
    "por favor",
    "podrías",
    "podrias",
    "bitte",
)
_LEADING_FILLER = re.compile(
    r"^(?:" + "|".join(re.escape(f) for f in _FILLERS) + r")(?!\w)[\s,]*",
    re.IGNORECASE,
)
_TRAILING_PLEASE = re.compile(r"[\s,]*(?:please|s'il vous plaît|s'il vous plait|por favor|bitte)\s*([.!?]*)$", re.I)
_TRAILING_PUNCTUATION = " \t.,;:!?…"

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?", re.I)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+(\d{{4}})\b)?", re.I)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(r"\b(?:by|before|on|this|next)\s+(" + "|".join(_WEEKDAYS) + r")\b", re.I)
_TOMORROW = re.compile(r"\btomorrow\b", re.I)
_TODAY = re.compile(r"\b(?:today|tonight|end of (?:the )?day|eod)\b", re.I)
_END_OF_WEEK = re.compile(r"\bend of (?:the )?week\b", re.I)


@dataclass(frozen=True)
class ReaderEmail:
    email_id: str
    sender: str
    subject: str
    sent_on: date | None  # the calendar day of the Date line, in its own offset
    body: str
    to: str = ""  # the To and Cc lines as written
    cc: str = ""
    reader: tuple[str, ...] = ()  # the prompt's Reader line: the reader's own addresses, lower-cased
    sent: bool = False  # marked "Sent by the reader"
    items: tuple[ReaderItem, ...] = ()  # the open items of its conversation the block was given


@dataclass(frozen=True)
class ReaderItem:
    item_id: str
    kind: str  # "ask" | "commitment" | "waiting"
    title: str
    sentence: str


@dataclass(frozen=True)
class ReaderTask:
    title: str
    due_date: date | None
    priority: str  # "low" | "medium" | "high"
    sentence: str = ""  # the ask sentence, as the email wrote it
    kind: str = "ask"
    waiting_on: str = ""
    due_time: str | None = None  # "HH:MM", when the sentence states a time beside its date

    def as_dict(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "title": self.title,
            "due_date": self.due_date.isoformat() if self.due_date else None,
            "due_time": self.due_time if self.due_date else None,
            "priority": self.priority,
            "kind": self.kind,
            "waiting_on": self.waiting_on,
        }


@dataclass(frozen=True)
class ReaderChange:
    """What the email does to one open item: `delivered`, or `updated` with a new due date."""

    item_id: str
    outcome: str
    sentence: str
    due_date: date | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "outcome": self.outcome,
            "sentence": self.sentence,
            "due_date": self.due_date.isoformat() if self.due_date else None,
        }


@dataclass(frozen=True)
class ReaderAnswer:
    """The reader's answer: tasks per email id, or (for tests) a text to send back verbatim."""

    emails: list[tuple[str, list[ReaderTask]]]
    echo: str | None = None
    changes: dict[str, list[ReaderChange]] = field(default_factory=dict)  # by email id

    def as_dict(self) -> dict[str, Any]:
        return {
            "emails": [
                {
                    "email_id": eid,
                    "tasks": [t.as_dict() for t in tasks],
                    "items": [c.as_dict() for c in self.changes.get(eid, [])],
                }
                for eid, tasks in self.emails
            ]
        }

    def as_text(self) -> str:
        if self.echo is not None:
            return self.echo
        if not self.emails:
            return "I found no emails to read."
        lines = []
        for email_id, tasks in self.emails:
            if not tasks:
                lines.append(f"{email_id}: no tasks")
            for task in tasks:
                due = f", due {task.due_date.isoformat()}" if task.due_date else ""
                lines.append(f"{email_id}: {task.title} ({task.priority} priority{due})")
            for change in self.changes.get(email_id, []):
                due = f" {change.due_date.isoformat()}" if change.due_date else ""
                lines.append(f"{email_id}: {change.item_id} {change.outcome}{due}")
        return "\n".join(lines)


def read_prompt(prompt: str) -> ReaderAnswer:
    """Read every email block of `prompt` and decide its tasks."""
    echo = find_echo(prompt)
    if echo is not None:
        return ReaderAnswer(emails=[], echo=echo)
    emails = parse_emails(prompt)
    return ReaderAnswer(
        emails=[(email.email_id, tasks_for(email)) for email in emails],
        changes={email.email_id: found for email in emails if (found := changes_for(email))},
    )


def find_echo(prompt: str) -> str | None:
    """The text after the first SANDBOX-ECHO-JSON: / SANDBOX-ECHO-TEXT: marker, if the prompt has one."""
    found = [(prompt.find(marker), marker) for marker in (ECHO_JSON, ECHO_TEXT) if marker in prompt]
    if not found:
        return None
    position, marker = min(found)
    rest = prompt[position + len(marker) :]
    if marker == ECHO_JSON:
        stripped = rest.lstrip()
        try:
            _, end = json.JSONDecoder().raw_decode(stripped)
        except json.JSONDecodeError:
            pass
        else:
            return stripped[:end]
    return rest.split("\n", 1)[0].strip()


def parse_emails(prompt: str) -> list[ReaderEmail]:
    reader = reader_addresses(prompt)
    emails = []
    for match in _BLOCK.finditer(prompt):
        headers: dict[str, str] = {}
        items: list[ReaderItem] = []
        sent = False
        lines = match.group(2).split("\n")
        while lines:
            if header := _HEADER.match(lines[0]):
                headers[header.group(1)] = header.group(2).strip()
            elif item := _ITEM.match(lines[0]):
                items.append(ReaderItem(*item.groups()))
            elif lines[0] == SENT_MARK:
                sent = True
            else:
                break
            lines.pop(0)
        emails.append(
            ReaderEmail(
                email_id=match.group(1),
                sender=headers.get("From", ""),
                subject=headers.get("Subject", ""),
                sent_on=_parse_date_line(headers.get("Date", "")),
                body="\n".join(lines).strip(),
                to=headers.get("To", ""),
                cc=headers.get("Cc", ""),
                reader=reader,
                sent=sent,
                items=tuple(items),
            )
        )
    return emails


def reader_addresses(prompt: str) -> tuple[str, ...]:
    """The addresses of the prompt's Reader line (before the first email block, so no email writes it)."""
    head = prompt.split("<email", 1)[0]
    found = _READER.search(head)
    if not found:
        return ()
    return tuple(address.lower() for _, address in getaddresses([found.group(1)]) if "@" in address)


def asks_someone_else(sentence: str, email: ReaderEmail) -> bool:
    """Whether the ask opens on the name of someone on To or Cc who is not the reader ("Sam, can you book
    the room?" with Sam Lee <sam@…> on To and the reader elsewhere): theirs, not the reader's. The name
    matches a recipient's display name, its first word, or its address's local part, ignoring case; a name
    the reader's own entry also answers to stays the reader's."""
    opening = _ADDRESSEE.match(_normalise(sentence).strip())
    if not opening:
        return False
    name = opening.group(1).casefold()
    recipients = getaddresses([email.to, email.cc])
    others = [(n, a.lower()) for n, a in recipients if "@" in a and a.lower() not in email.reader]
    mine = [(n, a.lower()) for n, a in recipients if "@" in a and a.lower() in email.reader]
    return any(name in _names(*entry) for entry in others) and not any(name in _names(*entry) for entry in mine)


def _names(display: str, address: str) -> set[str]:
    """What a recipient is called by: its display name, the name's first word, its address's local part."""
    display = " ".join(display.split()).casefold()
    names = {address.split("@", 1)[0].casefold()}
    if display and display != address:
        names |= {display, display.split(" ", 1)[0]}
    return names


def sentences_of(email: ReaderEmail) -> list[str]:
    """The body's sentences as written (each task quotes its sentence verbatim), `>` lines left out."""
    lines = [line.strip() for line in email.body.split("\n")]
    return [s for line in lines if line and not line.startswith(">") for s in _SENTENCE_END.split(line) if s.strip()]


def tasks_for(email: ReaderEmail) -> list[ReaderTask]:
    """The tasks an email asks of its reader, or (mail the reader sent) the reader's commitments and what
    they wait for, by the rules in READER.md."""
    subject = _normalise(email.subject)
    sentences = sentences_of(email)
    everything = _normalise(subject + "\n" + "\n".join(sentences)).lower()
    if any(p in everything for p in _NO_TASK_PHRASES) or any(p in subject.lower() for p in _NO_TASK_SUBJECT):
        return []
    tasks: list[ReaderTask] = []
    seen: set[str] = set()
    for sentence in sentences:
        task = _sent_task(sentence, email) if email.sent else _ask(sentence, email)
        if task is None or not task.title or task.title.casefold() in seen:
            continue
        seen.add(task.title.casefold())
        tasks.append(task)
        if len(tasks) == MAX_TASKS:
            return tasks
    return tasks


def _ask(sentence: str, email: ReaderEmail) -> ReaderTask | None:
    if not is_ask(sentence) or asks_someone_else(sentence, email):
        return None
    due, priority = find_due_date(sentence, email.sent_on), find_priority(sentence, _normalise(email.subject))
    return ReaderTask(make_title(sentence), due, priority, sentence=sentence.strip(), due_time=find_due_time(sentence))


def _sent_task(sentence: str, email: ReaderEmail) -> ReaderTask | None:
    """In mail the reader sent: a promise is their commitment, an ask of someone a waiting item."""
    due, priority = find_due_date(sentence, email.sent_on), find_priority(sentence, _normalise(email.subject))
    promise = _COMMITMENT.match(_opening_removed(sentence))
    if promise and not is_acknowledgement(sentence):
        title = _capitalised(promise.group(1).strip(_TRAILING_PUNCTUATION))
        return ReaderTask(title, due, priority, sentence=sentence.strip(), kind="commitment")
    if is_ask(sentence):
        return ReaderTask(
            make_title(_opening_removed(sentence)),
            due,
            priority,
            sentence=sentence.strip(),
            kind="waiting",
            waiting_on=_asked(sentence, email),
        )
    return None


def _asked(sentence: str, email: ReaderEmail) -> str:
    """Whom an ask in sent mail waits on: the To recipient the sentence opens on by name, else the first."""
    to = [(name, address) for name, address in getaddresses([email.to]) if "@" in address]
    opening = _ADDRESSEE.match(_normalise(sentence).strip())
    if opening:
        named = opening.group(1).casefold()
        for name, address in to:
            if named in _names(name, address.lower()):
                return address.lower()
    return to[0][1].lower() if to else ""


def is_acknowledgement(sentence: str) -> bool:
    return _ACKNOWLEDGEMENT.match(_opening_removed(sentence)) is not None


def _opening_removed(sentence: str) -> str:
    """The sentence without a greeting ("Hi Sam,") or a name and a comma ("Sam, ") before it."""
    text = _GREETING.sub("", _normalise(sentence).strip())
    opening = _ADDRESSEE.match(text)
    if opening and not _COMMITMENT.match(text) and not _ACKNOWLEDGEMENT.match(text):
        text = text[opening.end() :].strip()
    return text


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


# What an email does to the open items of its conversation ------------------------------------------------
def changes_for(email: ReaderEmail) -> list[ReaderChange]:
    """Per open item the block was given, at most one change: delivered (a delivery phrase in the right
    direction, a settling phrase, a receipt) or updated (an acknowledgement naming a time), by READER.md."""
    if not email.items:
        return []
    changes: dict[str, ReaderChange] = {}
    receipt = "receipt" in email.subject.lower()
    for sentence in sentences_of(email):
        text = _normalise(sentence)
        if email.sent and is_acknowledgement(sentence):
            due = find_due_date(sentence, email.sent_on) or _next_week(text, email.sent_on)
            item = _which(sentence, email.items, given=email.items) if due else None
            if item is not None and item.item_id not in changes:
                changes[item.item_id] = ReaderChange(item.item_id, "updated", sentence.strip(), due)
            continue
        if _has_any(text, _SETTLING_PHRASES):
            candidates = list(email.items)
        elif _has_any(text, _PAID_PHRASES):
            candidates = [item for item in email.items if _is_payment(item)]
        elif _has_any(text, _DELIVERY_PHRASES):
            # Asks and promises are delivered by the reader's mail, what they wait for by mail they receive.
            delivers = ("ask", "commitment") if email.sent else ("waiting",)
            candidates = [item for item in email.items if item.kind in delivers]
        else:
            continue
        item = _which(sentence, [c for c in candidates if c.item_id not in changes], given=email.items)
        if item is not None:
            changes[item.item_id] = ReaderChange(item.item_id, "delivered", sentence.strip())
    if receipt:
        # A receipt settles what was to be paid, quoting its subject when no sentence says so.
        for item in email.items:
            if _is_payment(item) and item.item_id not in changes:
                changes[item.item_id] = ReaderChange(item.item_id, "delivered", email.subject.strip())
                break
    return [changes[item.item_id] for item in email.items if item.item_id in changes]


def _which(sentence: str, items: Sequence[ReaderItem], *, given: Sequence[ReaderItem]) -> ReaderItem | None:
    """Of `items` (those the sentence may change), the one whose title shares the most words of four letters
    or more with the sentence (the first of equals); with none shared, the email's only item (of those
    `given` to it) when it is one of `items`."""
    words = _long_words(sentence)
    best, shared = None, 0
    for item in items:
        count = len(words & _long_words(item.title))
        if count > shared:
            best, shared = item, count
    if best is None and len(given) == 1 and given[0] in items:
        return given[0]
    return best


def _long_words(text: str) -> set[str]:
    return {word for word in re.findall(r"\w+", _normalise(text).casefold()) if len(word) >= 4}


def _is_payment(item: ReaderItem) -> bool:
    return re.search(r"(?<!\w)(?:pay|invoice|due)", item.title, re.IGNORECASE) is not None


def _next_week(text: str, sent_on: date | None) -> date | None:
    """ "next week": the Monday after the email's day."""
    if sent_on is None or not _NEXT_WEEK.search(text):
        return None
    return sent_on + timedelta(days=7 - sent_on.weekday())


def is_ask(sentence: str) -> bool:
    text = _normalise(sentence)
    return _has_any(text, _ASK_PHRASES) and not _has_any(text, _NOT_ASK_PHRASES)


def make_title(sentence: str) -> str:
    title = _normalise(sentence).strip()
    title = _GREETING.sub("", title)
    while (stripped := _LEADING_FILLER.sub("", title)) != title:
        title = stripped
    title = _TRAILING_PLEASE.sub(r"\1", title).strip(_TRAILING_PUNCTUATION)
    if len(title) > MAX_TITLE_CHARS:
        cut = title[: MAX_TITLE_CHARS + 1]
        space = cut.rfind(" ")
        title = (cut[:space] if space > 0 else cut[:MAX_TITLE_CHARS]).rstrip(_TRAILING_PUNCTUATION)
    return title[:1].upper() + title[1:]


_CLOCK = re.compile(
    r"\b(?:at|by|before)\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b|\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b", re.I
)


def find_due_time(sentence: str) -> str | None:
    """The time of day a sentence states ("by 3pm", "at 10:30", "at 9 am"), as HH:MM; None when it states none."""
    match = _CLOCK.search(sentence)
    if match is None:
        return None
    hour, minute, half = (match[1], match[2], match[3]) if match[1] else (match[4], match[5], match[6])
    if not (half or minute):  # "at 3" alone: a number, not surely a time
        return None
    hour_of_day = int(hour) % 12 + (12 if (half or "").lower() == "pm" else 0) if half else int(hour)
    if hour_of_day > 23 or int(minute or 0) > 59:
        return None
    return f"{hour_of_day:02d}:{int(minute or 0):02d}"


def find_due_date(sentence: str, sent_on: date | None) -> date | None:
    """The due date a sentence states, relative to the day the email was sent; None when it states none."""
    if match := _ISO_DATE.search(sentence):
        return _make_date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    month_day = _MONTH_DAY.search(sentence)
    day_month = _DAY_MONTH.search(sentence)
    if month_day or day_month:
        if month_day and (not day_month or month_day.start() <= day_month.start()):
            month, day, year = _MONTHS[month_day.group(1).lower()], int(month_day.group(2)), month_day.group(3)
        else:
            assert day_month is not None
            day, month, year = int(day_month.group(1)), _MONTHS[day_month.group(2).lower()], day_month.group(3)
        if year:
            return _make_date(int(year), month, day)
        if sent_on is None:
            return None
        candidate = _make_date(sent_on.year, month, day)
        if candidate is not None and candidate < sent_on:
            candidate = _make_date(sent_on.year + 1, month, day)
        return candidate
    if sent_on is None:
        return None
    if match := _WEEKDAY.search(sentence):
        ahead = (_WEEKDAYS.index(match.group(1).lower()) - sent_on.weekday()) % 7 or 7
        return sent_on + timedelta(days=ahead)
    if _TOMORROW.search(sentence):
        return sent_on + timedelta(days=1)
    if _TODAY.search(sentence):
        return sent_on
    if _END_OF_WEEK.search(sentence):
        return sent_on + timedelta(days=(4 - sent_on.weekday()) % 7)
    return None


def find_priority(sentence: str, subject: str) -> str:
    text = _normalise(sentence + "\n" + subject)
    if _has_any(text, _HIGH_PHRASES, whole_word=False):  # "urgent" also counts in "urgently"
        return "high"
    if _has_any(text, _LOW_PHRASES, whole_word=False):
        return "low"
    return "medium"


def _has_any(text: str, phrases: tuple[str, ...], *, whole_word: bool = True) -> bool:
    """Whether `text` has one of `phrases` as whole words (or, without whole_word, as a word's start)."""
    lowered = text.lower()
    end = r"(?!\w)" if whole_word else ""
    return any(re.search(rf"(?<!\w){re.escape(p)}{end}", lowered) for p in phrases)


def _normalise(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def _make_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _parse_date_line(value: str) -> date | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).date()
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).date()
    except (TypeError, ValueError, IndexError):
        return None
