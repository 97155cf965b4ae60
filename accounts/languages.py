"""The languages a person can write their tasks in (quick add reads dates in them: tasks/quickadd.py), and the
order they write a date's day and month in. Both are the person's settings; at sign-up they come from the
browser's Accept-Language (its first tag Tasklift knows: "de-AT" is German, day first; "en-US" month first)."""

from __future__ import annotations

from django.utils.translation.trans_real import parse_accept_lang_header

LANGUAGES = {
    "en": "English",
    "de": "Deutsch",
    "fr": "Français",
    "es": "Español",
    "it": "Italiano",
    "nl": "Nederlands",
    "pt": "Português",
}
DATE_ORDERS = {"DMY": "Day first (31/12)", "MDY": "Month first (12/31)"}
# Where a date is written month first: the United States and a few others; English without a region too
# (a browser saying only "en" is most often American). Everywhere else Tasklift reads, the day comes first.
_MONTH_FIRST = {"en", "en-us", "en-ph", "en-ca", "es-us", "en-um", "en-as", "en-gu", "en-pr", "en-vi"}


def language_from_browser(accept_language: str) -> tuple[str, str]:
    """(language, date order) from an Accept-Language header: its first tag of a language Tasklift knows,
    else English, month first."""
    for tag, _ in parse_accept_lang_header(accept_language[:500]):
        language = tag.split("-", 1)[0].lower()
        if language in LANGUAGES:
            return language, "MDY" if tag.lower() in _MONTH_FIRST else "DMY"
    return "en", "MDY"
