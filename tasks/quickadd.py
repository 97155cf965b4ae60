"""Quick add understands dates: "Call Sam tomorrow 3pm" or "Send the report by Friday" typed as a new task
sets its due date, in the person's time zone, and the title keeps the rest ("Call Sam").

`dateparser` finds and reads the date words, in the person's language and English (accounts/languages.py), with
their order of day and month ("12/05" is 12 May in Paris). What it finds is taken only when it says a day a
person would write in a to-do: a weekday, today/tomorrow, "next week", "in 3 days", a month with its day, a
written date. A number alone ("Read 1984", "PR 123"), a month alone ("Ask May") or "now" stays in the title:
the page shows what was understood before the task is saved, and "Keep the text as typed" turns it off."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time

from accounts.languages import DATE_ORDERS, LANGUAGES
from accounts.models import User
from tasks.quickadd_words import DANGLING, DAY_WORDS, MONTHS, NAMING, RELATIVE, TIME
from tasks.services import due_date_in_range
from tasks.snooze import person_now

_ALL_DAYS = "|".join(DAY_WORDS.values())
_ALL_MONTHS = "|".join(f"(?:{m})" for m in MONTHS.values())
_ALL_RELATIVE = "|".join(RELATIVE.values())
# What makes a phrase a day, in any of the languages: without one of these, what dateparser found is not taken.
_ANCHOR = re.compile(
    rf"(?<!\w)(?:{_ALL_DAYS})(?!\w)|\b(?:{_ALL_RELATIVE})\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th|\.)?\s+(?:of\s+|de\s+)?(?:{_ALL_MONTHS})(?!\w)"
    rf"|(?<!\w)(?:{_ALL_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?\b",
    re.IGNORECASE,
)
_MONTH_WORD = re.compile(rf"(?<!\w)(?:{_ALL_MONTHS})(?!\w)", re.IGNORECASE)
_WEEKDAY_ALONE = re.compile(rf"(?:{_ALL_DAYS})", re.IGNORECASE)
_TIME = re.compile(TIME, re.IGNORECASE)
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2})|h(\d{2}))?\s*(am|pm)?", re.IGNORECASE)
_LEADING_NUMBER = re.compile(rf"^\d+\s+(?!{_ALL_MONTHS}|(?:st|nd|rd|th)\b|days?|weeks?|months?)", re.IGNORECASE)
_EDGES = " ,;:-\u2013\u2014"  # spaces, punctuation and dashes left at the ends
_DANGLING = re.compile(rf"\s+(?:{DANGLING})$", re.IGNORECASE)
_NAMING = re.compile(rf"(?:^|\s)(?:{NAMING})\s+$", re.IGNORECASE)
_NAMED = re.compile(rf"(?:{NAMING})\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Understood:
    """What quick add made of a new task's text: the title to keep and the due date (and time) found, with the
    words it took them from ("" when none)."""

    title: str
    due_date: date | None = None
    at: time | None = None
    phrase: str = ""


def _parser_settings(now: datetime, user: User) -> dict[str, object]:
    return {
        "RELATIVE_BASE": now.replace(tzinfo=None),  # the person's wall clock: "tomorrow" is theirs
        "PREFER_DATES_FROM": "future",
        "RETURN_AS_TIMEZONE_AWARE": False,
        "DATE_ORDER": user.date_order if user.date_order in DATE_ORDERS else "MDY",  # 12/05 in Paris is 12 May
    }


def _languages(user: User) -> list[str]:
    """The person's language, then English (written in either)."""
    return [user.language, "en"] if user.language in LANGUAGES and user.language != "en" else ["en"]


def _names_a_thing(text: str, phrase: str) -> bool:
    """A weekday alone, after a word that makes it part of a name, with more than a time after it: "ring the
    Monday club about the schedule" (the club), not "see the doctor on Monday". And German's capitalised
    "Morgen" within a sentence, which is the morning ("Guten Morgen"), where "morgen" is tomorrow."""
    start = text.find(phrase)
    if phrase.startswith("Morgen") and start > 0:
        return True
    named = _NAMED.match(phrase)
    core = phrase[named.end() :] if named else phrase
    if not _WEEKDAY_ALONE.fullmatch(core):
        return False
    after = text[start + len(phrase) :].strip(_EDGES)
    return bool(named or _NAMING.search(text[:start])) and bool(after) and not _TIME.match(after)


def _time_of(phrase: str, when: datetime) -> time | None:
    """The time the phrase says: dateparser's where it read one, else the hour written ("um 10 Uhr", "alle 15")."""
    said = _TIME.search(phrase)
    if said is None:
        return None
    clock = _CLOCK.search(said[0])
    if clock is None:
        return when.time()
    hour, minute = int(clock[1]), int(clock[2] or clock[3] or 0)
    if clock[4]:
        hour = hour % 12 + (12 if clock[4].lower() == "pm" else 0)
    return time(hour, minute) if hour < 24 and minute < 60 else when.time()


def quick_add_understand(*, text: str, user: User, now: datetime | None = None) -> Understood:
    """The due date the text says, relative to now in the person's time zone, and the title without it."""
    text = " ".join(text.split())
    if not _ANCHOR.search(text):
        return Understood(title=text)  # no day words at all: no need to load the parser
    from dateparser import parse
    from dateparser.search import search_dates  # about a second to import and to warm: only when needed

    local_now = person_now(user=user, now=now)
    languages, parsing = _languages(user), _parser_settings(local_now, user)
    found = search_dates(text, languages=languages, settings=parsing) or []
    for phrase, when in found:
        if _LEADING_NUMBER.match(phrase):  # "PR 123 next week": 123 is not part of the date
            phrase = _LEADING_NUMBER.sub("", phrase)
            when = parse(phrase, languages=languages, settings=parsing)
        anchor = _ANCHOR.search(phrase)
        if anchor and anchor[0] != phrase and not re.search(r"\d", phrase) and _MONTH_WORD.search(phrase):
            # A month without its day beside a day word ("bel Jan maandag": Jan is a name): the day word alone.
            phrase = anchor[0]
            when = parse(phrase, languages=languages, settings=parsing)
        if when is None or not anchor or _names_a_thing(text, phrase):
            continue
        due = when.date()
        if due < local_now.date() or not due_date_in_range(due):
            continue
        title = _title_without(text, phrase)
        if not title:
            continue  # the whole text is a date: it is the title
        return Understood(title=title, due_date=due, at=_time_of(phrase, when), phrase=phrase)
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
