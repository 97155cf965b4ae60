"""Tasks that repeat: a rule in iCalendar's RRULE form (RFC 5545), read and stepped by python-dateutil.

Tasklift keeps a small part of RRULE, the part a person says in words: a frequency (day, week, month, year), an
interval, weekdays and a day of the month. `REPEAT_PATTERN` is that part (the API's document states it too);
quick add reads it from words in the seven languages it reads dates in ("every month on the 1st", "jeden
Werktag", "toutes les 2 semaines"), the edit form offers the common ones, and the calendar feed carries it.

Done on a repeating task closes this one and makes the next (tasks/services.py): the next day the rule gives
after the task's due date, and not before the person's today (a daily task done three days late comes back
today, not three times)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from dateutil.rrule import rrule, rrulestr

from config.errors import ApplicationError

_DAY_CODES = "MO|TU|WE|TH|FR|SA|SU"
REPEAT_PATTERN = (
    r"^FREQ=(?:DAILY|WEEKLY|MONTHLY|YEARLY)(?:;INTERVAL=(?:[1-9]|[1-9]\d))?"
    rf"(?:;BYDAY=(?:{_DAY_CODES})(?:,(?:{_DAY_CODES})){{0,6}})?(?:;BYMONTHDAY=(?:[1-9]|[12]\d|3[01]))?$"
)
_RULE = re.compile(REPEAT_PATTERN)
MAX_REPEAT_CHARS = 100
# How far a rule is stepped to find its next day: a rule that gives none within it never comes round (FREQ=YEARLY
# on the 31st of a February), and stepping further would only cost time.
_HORIZON = timedelta(days=4 * 366)
WORKDAYS = "MO,TU,WE,TH,FR"
_DAY_NAMES = {
    "MO": "Monday",
    "TU": "Tuesday",
    "WE": "Wednesday",
    "TH": "Thursday",
    "FR": "Friday",
    "SA": "Saturday",
    "SU": "Sunday",
}
_UNITS = {"DAILY": "day", "WEEKLY": "week", "MONTHLY": "month", "YEARLY": "year"}


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


@dataclass(frozen=True)
class Rule:
    """A rule's parts, as REPEAT_PATTERN admits them."""

    freq: str
    interval: int = 1
    days: tuple[str, ...] = ()
    month_day: int | None = None

    def __str__(self) -> str:
        parts = [f"FREQ={self.freq}"]
        if self.interval > 1:
            parts.append(f"INTERVAL={self.interval}")
        if self.days:
            parts.append("BYDAY=" + ",".join(self.days))
        if self.month_day:
            parts.append(f"BYMONTHDAY={self.month_day}")
        return ";".join(parts)


def _parts(rule: str) -> Rule:
    values = dict(part.split("=", 1) for part in rule.split(";"))
    return Rule(
        freq=values["FREQ"],
        interval=int(values.get("INTERVAL", 1)),
        days=tuple(values["BYDAY"].split(",")) if "BYDAY" in values else (),
        month_day=int(values["BYMONTHDAY"]) if "BYMONTHDAY" in values else None,
    )


def repeat_words(rule: str) -> str:
    """The rule in words, as the list shows it: "every weekday", "every 2 weeks", "every month on the 1st"."""
    if not rule or not _RULE.match(rule):
        return ""
    parts = _parts(rule)
    unit = _UNITS[parts.freq]
    if parts.freq == "WEEKLY" and ",".join(parts.days) == WORKDAYS and parts.interval == 1:
        return "every weekday"
    words = f"every {parts.interval} {unit}s" if parts.interval > 1 else f"every {unit}"
    if parts.days:
        names = [_DAY_NAMES[day] for day in dict.fromkeys(parts.days)]
        on = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        words = f"every {on}" if parts.freq == "WEEKLY" and parts.interval == 1 else f"{words} on {on}"
    if parts.month_day:
        words += f" on the {_ORDINALS[parts.month_day]}"
    return words


_ORDINALS = {day: _ordinal(day) for day in range(1, 32)}


@lru_cache(maxsize=256)
def _stepper(rule: str, start: date) -> rrule:
    stepped = rrulestr(rule, dtstart=datetime.combine(start, datetime.min.time()))
    assert isinstance(stepped, rrule)  # one RRULE, no RDATE/EXDATE: REPEAT_PATTERN admits nothing else
    return stepped.replace(until=datetime.combine(start + _HORIZON, datetime.min.time()))


def repeat_first(rule: str, *, today: date) -> date | None:
    """The first day the rule gives from today (today included): a repeating task's due date when none is said."""
    day = _stepper(rule, today).after(datetime.combine(today, datetime.min.time()), inc=True)
    return day.date() if day else None


def repeat_next(rule: str, *, due: date, today: date) -> date | None:
    """The day of the next one after a task due on `due` is done: the rule's next day after `due` (its steps
    counted from `due`), and not before `today`. None when the rule gives no more."""
    start = max(due, today - timedelta(days=1))
    day = _stepper(rule, due).after(datetime.combine(start, datetime.min.time()), inc=False)
    if day is None and start > due:  # the horizon counted from `due`: from today, once it is far behind
        day = _stepper(rule, today).after(datetime.combine(today, datetime.min.time()), inc=True)
    return day.date() if day else None


def repeat_check(rule: str, *, start: date) -> str:
    """The rule as stored ("" for none), or ApplicationError `invalid_repeat` for one Tasklift does not keep or
    that never comes round."""
    rule = rule.strip().upper()
    if not rule:
        return ""
    if len(rule) > MAX_REPEAT_CHARS or not _RULE.match(rule):
        raise ApplicationError(
            "A repeat is FREQ=DAILY, WEEKLY, MONTHLY or YEARLY, with INTERVAL, BYDAY or BYMONTHDAY if need be.",
            code="invalid_repeat",
            extra={"field": "repeat"},
        )
    if repeat_first(rule, today=start) is None:
        raise ApplicationError(
            "This repeat does not come round within four years: choose another.",
            code="invalid_repeat",
            extra={"field": "repeat"},
        )
    return rule


# Words ------------------------------------------------------------------------------------------------

# Per language: "every", then the units a repeat names (with an optional number before them) and the
# one-word forms ("monthly", "täglich").
_EVERY = {
    "en": r"every",
    "de": r"jede[nrms]?|alle",
    "fr": r"chaque|tous\s+les|toutes\s+les",
    "es": r"cada|todos\s+los|todas\s+las",
    "it": r"ogni|tutti\s+i|tutte\s+le",
    "nl": r"elke|iedere|om\s+de",
    "pt": r"todo|toda|todos\s+os|todas\s+as|a\s+cada",
}
# (words, FREQ, BYDAY): the workday first, so that it wins over "day".
_UNIT_WORDS: dict[str, list[tuple[str, str, str]]] = {
    "en": [
        (r"weekdays?|workdays?|working\s+days?", "WEEKLY", WORKDAYS),
        (r"days?", "DAILY", ""),
        (r"weeks?", "WEEKLY", ""),
        (r"months?", "MONTHLY", ""),
        (r"years?", "YEARLY", ""),
        (r"mondays?", "WEEKLY", "MO"),
        (r"tuesdays?", "WEEKLY", "TU"),
        (r"wednesdays?", "WEEKLY", "WE"),
        (r"thursdays?", "WEEKLY", "TH"),
        (r"fridays?", "WEEKLY", "FR"),
        (r"saturdays?", "WEEKLY", "SA"),
        (r"sundays?", "WEEKLY", "SU"),
    ],
    "de": [
        (r"werktage?n?|arbeitstage?n?", "WEEKLY", WORKDAYS),
        (r"tage?n?", "DAILY", ""),
        (r"wochen?", "WEEKLY", ""),
        (r"monate?n?", "MONTHLY", ""),
        (r"jahre?n?", "YEARLY", ""),
        (r"montage?", "WEEKLY", "MO"),
        (r"dienstage?", "WEEKLY", "TU"),
        (r"mittwoche?", "WEEKLY", "WE"),
        (r"donnerstage?", "WEEKLY", "TH"),
        (r"freitage?", "WEEKLY", "FR"),
        (r"samstage?", "WEEKLY", "SA"),
        (r"sonntage?", "WEEKLY", "SU"),
    ],
    "fr": [
        (r"jours?\s+(?:ouvrés?|ouvrables?)|jours?\s+de\s+semaine", "WEEKLY", WORKDAYS),
        (r"jours?", "DAILY", ""),
        (r"semaines?", "WEEKLY", ""),
        (r"mois", "MONTHLY", ""),
        (r"ans|années?", "YEARLY", ""),
        (r"lundis?", "WEEKLY", "MO"),
        (r"mardis?", "WEEKLY", "TU"),
        (r"mercredis?", "WEEKLY", "WE"),
        (r"jeudis?", "WEEKLY", "TH"),
        (r"vendredis?", "WEEKLY", "FR"),
        (r"samedis?", "WEEKLY", "SA"),
        (r"dimanches?", "WEEKLY", "SU"),
    ],
    "es": [
        (r"días?\s+laborables?|días?\s+hábiles?", "WEEKLY", WORKDAYS),
        (r"días?", "DAILY", ""),
        (r"semanas?", "WEEKLY", ""),
        (r"mes(?:es)?", "MONTHLY", ""),
        (r"años?", "YEARLY", ""),
        (r"lunes", "WEEKLY", "MO"),
        (r"martes", "WEEKLY", "TU"),
        (r"miércoles", "WEEKLY", "WE"),
        (r"jueves", "WEEKLY", "TH"),
        (r"viernes", "WEEKLY", "FR"),
        (r"sábados?", "WEEKLY", "SA"),
        (r"domingos?", "WEEKLY", "SU"),
    ],
    "it": [
        (r"giorn[oi]\s+ferial[ei]|giorn[oi]\s+lavorativ[oi]", "WEEKLY", WORKDAYS),
        (r"giorn[oi]", "DAILY", ""),
        (r"settiman[ae]", "WEEKLY", ""),
        (r"mes[ei]", "MONTHLY", ""),
        (r"ann[oi]", "YEARLY", ""),
        (r"lunedì", "WEEKLY", "MO"),
        (r"martedì", "WEEKLY", "TU"),
        (r"mercoledì", "WEEKLY", "WE"),
        (r"giovedì", "WEEKLY", "TH"),
        (r"venerdì", "WEEKLY", "FR"),
        (r"sabat[oi]", "WEEKLY", "SA"),
        (r"domenic(?:a|he)", "WEEKLY", "SU"),
    ],
    "nl": [
        (r"werkdag(?:en)?", "WEEKLY", WORKDAYS),
        (r"dag(?:en)?", "DAILY", ""),
        (r"weken|week", "WEEKLY", ""),
        (r"maand(?:en)?", "MONTHLY", ""),
        (r"jaar|jaren", "YEARLY", ""),
        (r"maandag", "WEEKLY", "MO"),
        (r"dinsdag", "WEEKLY", "TU"),
        (r"woensdag", "WEEKLY", "WE"),
        (r"donderdag", "WEEKLY", "TH"),
        (r"vrijdag", "WEEKLY", "FR"),
        (r"zaterdag", "WEEKLY", "SA"),
        (r"zondag", "WEEKLY", "SU"),
    ],
    "pt": [
        (r"dias?\s+úte?is|dia\s+útil", "WEEKLY", WORKDAYS),
        (r"dias?", "DAILY", ""),
        (r"semanas?", "WEEKLY", ""),
        (r"mês|meses", "MONTHLY", ""),
        (r"anos?", "YEARLY", ""),
        (r"segundas?(?:-feiras?)?", "WEEKLY", "MO"),
        (r"terças?(?:-feiras?)?", "WEEKLY", "TU"),
        (r"quartas?(?:-feiras?)?", "WEEKLY", "WE"),
        (r"quintas?(?:-feiras?)?", "WEEKLY", "TH"),
        (r"sextas?(?:-feiras?)?", "WEEKLY", "FR"),
        (r"sábados?", "WEEKLY", "SA"),
        (r"domingos?", "WEEKLY", "SU"),
    ],
}
_ONE_WORD = {
    "en": {"daily": "DAILY", "weekly": "WEEKLY", "monthly": "MONTHLY", "yearly": "YEARLY", "annually": "YEARLY"},
    "de": {"täglich": "DAILY", "wöchentlich": "WEEKLY", "monatlich": "MONTHLY", "jährlich": "YEARLY"},
    "fr": {"quotidiennement": "DAILY", "hebdomadairement": "WEEKLY", "mensuellement": "MONTHLY"},
    "es": {"diariamente": "DAILY", "semanalmente": "WEEKLY", "mensualmente": "MONTHLY", "anualmente": "YEARLY"},
    "it": {"quotidianamente": "DAILY", "settimanalmente": "WEEKLY", "mensilmente": "MONTHLY"},
    "nl": {"dagelijks": "DAILY", "wekelijks": "WEEKLY", "maandelijks": "MONTHLY", "jaarlijks": "YEARLY"},
    "pt": {"diariamente": "DAILY", "semanalmente": "WEEKLY", "mensalmente": "MONTHLY", "anualmente": "YEARLY"},
}
# "on the 1st", "am 1.", "le 1er", "el día 1", "il 1", "op de 1e", "no dia 1": a day of the month after a unit.
_ON_DAY = {
    "en": r"on\s+the",
    "de": r"am",
    "fr": r"le",
    "es": r"el(?:\s+día)?",
    "it": r"il",
    "nl": r"op\s+de",
    "pt": r"no\s+dia|dia",
}
_DAY_SUFFIX = r"(?:st|nd|rd|th|er|e|º|ª|\.)?"


@lru_cache(maxsize=16)
def _phrases(languages: tuple[str, ...]) -> list[tuple[re.Pattern[str], str, str]]:
    found: list[tuple[re.Pattern[str], str, str]] = []
    for language in languages:
        on_day = rf"(?:\s+(?:{_ON_DAY[language]})\s+(?P<day>\d{{1,2}}){_DAY_SUFFIX})?"
        for words, freq, days in _UNIT_WORDS[language]:
            pattern = rf"(?<!\w)(?:{_EVERY[language]})\s+(?:(?P<n>\d{{1,2}})\s+)?(?:{words})(?!\w){on_day}"
            found.append((re.compile(pattern, re.IGNORECASE), freq, days))
        for word, freq in _ONE_WORD[language].items():  # at the end only: a "weekly report" is a report
            found.append((re.compile(rf"(?<!\w){word}(?!\w){on_day}[.!]?$", re.IGNORECASE), freq, ""))
    return found


def repeat_understand(text: str, *, languages: tuple[str, ...]) -> tuple[str, str] | None:
    """(rule, the words that say it) when the text says a repeat in one of these languages, else None."""
    best: tuple[re.Match[str], str, str] | None = None
    for pattern, freq, days in _phrases(languages):
        found = pattern.search(text)
        if found and (best is None or (found.start(), -len(found[0])) < (best[0].start(), -len(best[0][0]))):
            best = (found, freq, days)
    if best is None:
        return None
    found, freq, days = best
    said = found.groupdict()
    interval = int(said["n"]) if said.get("n") else 1
    if interval < 1:
        return None
    day = int(said["day"]) if said.get("day") else None
    if day is not None and not 1 <= day <= 31:
        return None
    if day is not None and freq == "WEEKLY":
        return None  # "every week on the 3rd" says no day a week has
    rule = Rule(freq=freq, interval=interval, days=tuple(days.split(",")) if days else (), month_day=day)
    return str(rule), found[0]
