"""Quick add understands dates: "Call Sam tomorrow 3pm" or "Send the report by Friday" typed as a new task
sets its due date, in the person's time zone, and the title keeps the rest ("Call Sam").

`dateparser` finds and reads the date words (in English). What it finds is taken only when it says a day a
person would write in a to-do: a weekday, today/tomorrow, "next week", "in 3 days", a month with its day, a
written date. A number alone ("Read 1984", "PR 123"), a month alone ("Ask May") or "now" stays in the title:
the page shows what was understood before the task is saved, and "Keep the text as typed" turns it off."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time

from accounts.models import User
from tasks.services import due_date_in_range
from tasks.snooze import person_now

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DAY_WORDS = r"(?:today|tonight|tomorrow|tmrw|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)[a-z]*"
# What makes a phrase a day: without one of these, what dateparser found is not taken.
_ANCHOR = re.compile(
    rf"\b{_DAY_WORDS}\b|\bnext\s+(?:week|month)\b|\bin\s+\d+\s+(?:days?|weeks?|months?)\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?!\w)|(?<!\w){_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b|\bnoon\b|\bat\s+\d{1,2}\b", re.IGNORECASE)
_LEADING_NUMBER = re.compile(rf"^\d+\s+(?!{_MONTH}|(?:st|nd|rd|th)\b|days?|weeks?|months?)", re.IGNORECASE)
_EDGES = " ,;:-\u2013\u2014"  # spaces, punctuation and dashes left at the ends
_DANGLING = re.compile(r"\s+(?:by|on|due|before|until|at|for)$", re.IGNORECASE)


@dataclass(frozen=True)
class Understood:
    """What quick add made of a new task's text: the title to keep and the due date (and time) found, with the
    words it took them from ("" when none)."""

    title: str
    due_date: date | None = None
    at: time | None = None
    phrase: str = ""


def _parser_settings(now: datetime) -> dict[str, object]:
    return {
        "RELATIVE_BASE": now.replace(tzinfo=None),  # the person's wall clock: "tomorrow" is theirs
        "PREFER_DATES_FROM": "future",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }


def quick_add_understand(*, text: str, user: User, now: datetime | None = None) -> Understood:
    """The due date the text says, relative to now in the person's time zone, and the title without it."""
    text = " ".join(text.split())
    if not _ANCHOR.search(text):
        return Understood(title=text)  # no day words at all: no need to load the parser
    from dateparser import parse
    from dateparser.search import search_dates  # about a second to import and to warm: only when needed

    local_now = person_now(user=user, now=now)
    found = search_dates(text, languages=["en"], settings=_parser_settings(local_now)) or []
    for phrase, when in found:
        if _LEADING_NUMBER.match(phrase):  # "PR 123 next week": 123 is not part of the date
            phrase = _LEADING_NUMBER.sub("", phrase)
            when = parse(phrase, languages=["en"], settings=_parser_settings(local_now))
        if when is None or not _ANCHOR.search(phrase):
            continue
        due = when.date()
        if due < local_now.date() or not due_date_in_range(due):
            continue
        title = _title_without(text, phrase)
        if not title:
            continue  # the whole text is a date: it is the title
        return Understood(title=title, due_date=due, at=when.time() if _TIME.search(phrase) else None, phrase=phrase)
    return Understood(title=text)


def _title_without(text: str, phrase: str) -> str:
    start = text.find(phrase)
    rest = (text[:start] + " " + text[start + len(phrase) :]) if start >= 0 else text
    rest = " ".join(rest.split()).replace(" ,", ",").strip(_EDGES)
    return _DANGLING.sub("", rest).strip(_EDGES)


def quick_add_resolve(*, user: User, title: str, due_date: date | None, keep_as_typed: bool) -> Understood:
    """What a new task is saved with: a due date chosen in the form, or "Keep the text as typed", wins over
    the words of the title; otherwise what `quick_add_understand` finds (the same as its preview showed)."""
    if due_date is not None or keep_as_typed:
        return Understood(title=" ".join(title.split()), due_date=due_date)
    return quick_add_understand(text=title, user=user)


def quick_add_notes(understood: Understood) -> str:
    """The time of day the text said, kept in the notes (a task has a due date, not a due time)."""
    return f"At {understood.at:%H:%M}." if understood.at else ""
