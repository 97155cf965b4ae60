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
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from accounts.languages import DATE_ORDERS, LANGUAGES
from accounts.models import User
from tasks.quickadd_words import AFTER_TOMORROW, DANGLING, DAY_WORDS, MONTHS, NAMING, RELATIVE, TIME
from tasks.repeat import repeat_first, repeat_understand
from tasks.services import due_date_in_range
from tasks.snooze import person_now

_ALL_DAYS = "|".join(DAY_WORDS.values())
_ALL_MONTHS = "|".join(f"(?:{m})" for m in MONTHS.values())
_ALL_RELATIVE = "|".join(RELATIVE.values())
_MONTH_DAY = (
    rf"\b\d{{1,2}}(?:st|nd|rd|th|\.)?\s+(?:of\s+|de\s+)?(?:{_ALL_MONTHS})(?!\w)"
    rf"|(?<!\w)(?:{_ALL_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
)
# What makes a phrase a day, in any of the languages: without one of these, what dateparser found is not taken.
_ANCHOR = re.compile(
    rf"(?<!\w)(?:{_ALL_DAYS})(?!\w)|\b(?:{_ALL_RELATIVE})\b|{_MONTH_DAY}",
    re.IGNORECASE,
)
_HAS_MONTH_DAY = re.compile(_MONTH_DAY, re.IGNORECASE)
# A date in figures, read here rather than by dateparser: 2026-12-24; 12/05 or 12/05/2027 in the person's order
# (or the other where theirs is no date: 12/31 is the 31st of December day first too); 12.05. or 1.1.2027 day
# first, with the dot that ends a German date ("Kapitel 3.12" is a section).
_NUMERIC = re.compile(
    r"(?<![\w./-])(?:(\d{4})-(\d{2})-(\d{2})|(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?|(\d{1,2})\.(\d{1,2})\.(\d{4}|\d{2})?)"
    r"(?![\w/-]|\.\d)"
)
_MONTH_WORD = re.compile(rf"(?<!\w)(?:{_ALL_MONTHS})(?!\w)", re.IGNORECASE)
_WEEKDAY_ALONE = re.compile(rf"(?:{_ALL_DAYS})", re.IGNORECASE)
_TIME = re.compile(TIME, re.IGNORECASE)
_TIME_NEXT = re.compile(rf"\s*(?:{TIME})", re.IGNORECASE)
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2})|h(\d{2}))?\s*(am|pm)?", re.IGNORECASE)
_LEADING_NUMBER = re.compile(rf"^\d+\s+(?!{_ALL_MONTHS}|(?:st|nd|rd|th)\b|days?|weeks?|months?)", re.IGNORECASE)
_EDGES = " ,;:-\u2013\u2014"  # spaces, punctuation and dashes left at the ends
_NAMING = re.compile(rf"(?:^|\s)(?:{NAMING})\s+$", re.IGNORECASE)
_NAMED = re.compile(rf"(?:{NAMING})\s+", re.IGNORECASE)


@lru_cache(maxsize=16)
def _words_of(languages: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The day after tomorrow and the little words left at a title's end, in these languages only."""
    after = "|".join(AFTER_TOMORROW[language] for language in languages)
    dangling = "|".join(DANGLING[language] for language in languages)
    return (
        re.compile(rf"(?<!\w)(?:{after})(?!\w)", re.IGNORECASE),
        re.compile(rf"\s+(?:{dangling})$", re.IGNORECASE),
    )


@dataclass(frozen=True)
class Understood:
    """What quick add made of a new task's text: the title to keep and the due date (and time) found, with the
    words it took them from ("" when none)."""

    title: str
    due_date: date | None = None
    at: time | None = None
    phrase: str = ""
    repeat: str = ""  # an RRULE (tasks/repeat.py): "every month on the 1st" is FREQ=MONTHLY;BYMONTHDAY=1


def _parser_settings(now: datetime, user: User) -> dict[str, object]:
    return {
        "RELATIVE_BASE": now.replace(tzinfo=None),  # the person's wall clock: "tomorrow" is theirs
        "PREFER_DATES_FROM": "future",
        "RETURN_AS_TIMEZONE_AWARE": False,
        "DATE_ORDER": user.date_order if user.date_order in DATE_ORDERS else "MDY",  # 12/05 in Paris is 12 May
    }


def _languages(user: User) -> tuple[str, ...]:
    """The person's language, then English (written in either)."""
    return (user.language, "en") if user.language in LANGUAGES and user.language != "en" else ("en",)


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


def _clock(said: str) -> time | None:
    """The time of day a time phrase says ("at 3:45pm", "um 10 Uhr", "às 10h", "noon")."""
    if "noon" in said.lower():
        return time(12, 0)
    clock = _CLOCK.search(said)
    if clock is None:
        return None
    hour, minute = int(clock[1]), int(clock[2] or clock[3] or 0)
    if clock[4]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if clock[4].lower() == "pm" else 0)
    return time(hour, minute) if hour < 24 and minute < 60 else None


def _numeric_date(found: re.Match[str], user: User, today: date) -> date | None:
    """The day a date in figures says: the person's order first, the other where theirs is no date; without a
    year, its next coming (today included)."""
    if found[1]:
        year, pairs = int(found[1]), [(int(found[2]), int(found[3]))]
    else:
        first, second, written = (found[4], found[5], found[6]) if found[4] else (found[7], found[8], found[9])
        a, b = int(first), int(second)
        month_first = user.date_order == "MDY" and found[4] is not None  # a dotted date is day first everywhere
        pairs = [(a, b), (b, a)] if month_first else [(b, a), (a, b)]
        year = (int(written) + (2000 if len(written) == 2 else 0)) if written else 0
    for month, day in pairs:
        for candidate_year in [year] if year else [today.year, today.year + 1]:
            try:
                day_of = date(candidate_year, month, day)
            except ValueError:
                continue
            if year or day_of >= today:
                return day_of
    return None


def _days_said(text: str, user: User, local_now: datetime) -> list[tuple[str, date, time | None]]:
    """Every (phrase, day, time) the text may say, in the order they are tried: the day after tomorrow (read
    here), what dateparser finds (its time read here: it takes "Monday at 9" for the 9th), then dates in figures
    (read here)."""
    from dateparser import parse
    from dateparser.search import search_dates  # about a second to import and to warm: only when needed

    today = local_now.date()
    languages, parsing = _languages(user), _parser_settings(local_now, user)
    after_tomorrow, _ = _words_of(languages)
    said: list[tuple[str, date, time | None]] = [
        (m[0], today + timedelta(days=2), None) for m in after_tomorrow.finditer(text)
    ]
    for found_phrase, when in search_dates(text, languages=list(languages), settings=parsing) or []:
        phrase = found_phrase
        if _LEADING_NUMBER.match(phrase):  # "PR 123 next week": 123 is not part of the date
            phrase = _LEADING_NUMBER.sub("", phrase)
        at_said = _TIME.search(phrase)
        day_part = (phrase[: at_said.start()] + " " + phrase[at_said.end() :]).strip(_EDGES) if at_said else phrase
        day_part = _words_of(languages)[1].sub("", " ".join(day_part.split())).strip(_EDGES)
        anchor = _ANCHOR.search(day_part)
        if not anchor or _names_a_thing(text, phrase):
            continue
        if _MONTH_WORD.search(day_part) and not _HAS_MONTH_DAY.search(day_part):
            # A month without its day beside a day word ("Email Jan on Monday", "bel Jan maandag"): Jan is a
            # name; the date starts at the day word.
            phrase, day_part = phrase[phrase.find(anchor[0]) :], day_part[anchor.start() :]
        if day_part != found_phrase:
            when = parse(day_part, languages=list(languages), settings=parsing)
        if when is not None:
            said.append((phrase, when.date(), _clock(at_said[0]) if at_said else None))
    for found in _NUMERIC.finditer(text):  # last: "Order 3/4 cup flour tomorrow" is due tomorrow
        day = _numeric_date(found, user, today)
        if day is not None:
            said.append((found[0], day, None))
    return said


def quick_add_understand(*, text: str, user: User, now: datetime | None = None) -> Understood:
    """The due date (and time) the text says, relative to now in the person's time zone, whether it repeats
    ("every month on the 1st": due on the next 1st when it says no date), and the title without them."""
    text = " ".join(text.split())
    languages = _languages(user)
    repeating = repeat_understand(text, languages=languages)
    if repeating is None:
        return _understand_day(text, user, now)
    rule, words = repeating
    start = text.find(words)
    following = _TIME_NEXT.match(text, start + len(words))  # "every Monday at 7am"
    at = _clock(following[0]) if following else None
    if following and at is not None:
        words = text[start : following.end()]
    rest = _title_without(text, words, _words_of(languages)[1])
    dated = _understand_day(rest, user, now)
    due = dated.due_date or repeat_first(rule, today=person_now(user=user, now=now).date())
    if not dated.title or due is None:
        return Understood(title=text)  # the whole text is a repeat: it is the title
    phrase = f"{words}, {dated.phrase}" if dated.phrase else words
    return Understood(title=dated.title, due_date=due, at=dated.at or at, phrase=phrase, repeat=rule)


def _understand_day(text: str, user: User, now: datetime | None) -> Understood:
    languages = _languages(user)
    after_tomorrow, dangling = _words_of(languages)
    if not (_ANCHOR.search(text) or _NUMERIC.search(text) or after_tomorrow.search(text)):
        return Understood(title=text)  # no day words at all: no need to load the parser
    local_now = person_now(user=user, now=now)
    for phrase, due, at in _days_said(text, user, local_now):
        if due < local_now.date() or not due_date_in_range(due):
            continue
        if at is None:  # a time just after the day ("übermorgen um 10", "12/05 3pm") is part of it
            start = text.find(phrase) + len(phrase)
            following = _TIME_NEXT.match(text, start)
            if following and (at := _clock(following[0])) is not None:
                phrase = text[text.find(phrase) : following.end()]
        title = _title_without(text, phrase, dangling)
        if not title:
            continue  # the whole text is a date: it is the title
        return Understood(title=title, due_date=due, at=at, phrase=phrase)
    return Understood(title=text)


def _title_without(text: str, phrase: str, dangling: re.Pattern[str]) -> str:
    start = text.find(phrase)
    rest = (text[:start] + " " + text[start + len(phrase) :]) if start >= 0 else text
    rest = " ".join(rest.split()).replace(" ,", ",").strip(_EDGES)
    return dangling.sub("", rest).strip(_EDGES)


def quick_add_resolve(*, user: User, title: str, due_date: date | None, keep_as_typed: bool) -> Understood:
    """What a new task is saved with: a due date chosen in the form, or "Keep the text as typed", wins over
    the words of the title; otherwise what `quick_add_understand` finds (the same as its preview showed)."""
    if due_date is not None or keep_as_typed:
        return Understood(title=" ".join(title.split()), due_date=due_date)
    return quick_add_understand(text=title, user=user)
