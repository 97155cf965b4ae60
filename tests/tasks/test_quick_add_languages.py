"""Quick add reads dates in the person's language (issue 34): German, French, Spanish, Italian, Dutch and
Portuguese beside English, with their day/month order (12/05 in Paris is 12 May), and a weekday that is part of
a name ("the Monday club") stays in the title. The language is a setting (on /settings/ and PATCH /api/me),
taken at sign-up from the browser."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.test import Client

from accounts.models import User
from tasks.quickadd import quick_add_understand
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# Friday 4 December 2026, 09:00 UTC (10:00 in Paris).
NOW = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
TOMORROW, MONDAY, NEXT_FRIDAY = date(2026, 12, 5), date(2026, 12, 7), date(2026, 12, 11)


def _person(language: str, date_order: str = "DMY") -> User:
    return UserFactory.build(timezone="Europe/Paris", language=language, date_order=date_order)


@pytest.mark.parametrize(
    ("language", "text", "title", "due", "at"),
    [
        ("en", "call Bob tomorrow 3pm", "call Bob", TOMORROW, "15:00"),
        ("de", "Rechnung bezahlen bis Freitag", "Rechnung bezahlen", NEXT_FRIDAY, None),
        ("de", "Arzttermin morgen um 10 Uhr", "Arzttermin", TOMORROW, "10:00"),
        ("de", "Bericht schicken in 3 Tagen", "Bericht schicken", MONDAY, None),
        ("fr", "appeler Marie lundi", "appeler Marie", MONDAY, None),
        ("fr", "envoyer le rapport le 5 mars", "envoyer le rapport", date(2027, 3, 5), None),
        ("es", "Llamar a Juan mañana", "Llamar a Juan", TOMORROW, None),
        ("es", "entregar el informe antes del lunes", "entregar el informe", MONDAY, None),
        ("it", "chiamare Luca domani alle 15", "chiamare Luca", TOMORROW, "15:00"),
        ("nl", "bel Jan maandag", "bel Jan", MONDAY, None),
        ("pt", "ligar para Ana amanhã às 10h", "ligar para Ana", TOMORROW, "10:00"),
        ("pt", "pagar a renda sexta-feira", "pagar a renda", NEXT_FRIDAY, None),
        # Day first, as each of these languages writes a date: 12 May, not 5 December.
        ("de", "Besprechung 12/05", "Besprechung", date(2027, 5, 12), None),
        ("fr", "réunion 12/05", "réunion", date(2027, 5, 12), None),
        ("es", "reunión 12/05", "reunión", date(2027, 5, 12), None),
        ("it", "riunione 12/05", "riunione", date(2027, 5, 12), None),
        ("nl", "vergadering 12/05", "vergadering", date(2027, 5, 12), None),
        ("pt", "reunião 12/05", "reunião", date(2027, 5, 12), None),
    ],
)
def test_quick_add_language_reads_the_dates_and_times_of_each_language(
    language: str, text: str, title: str, due: date, at: str
) -> None:
    understood = quick_add_understand(text=text, user=_person(language), now=NOW)
    assert (understood.title, understood.due_date) == (title, due)
    assert (f"{understood.at:%H:%M}" if understood.at else None) == at


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("en", "ring the Monday club about the schedule"),
        ("fr", "le club du lundi prépare la fête"),
        ("es", "el club de los lunes organiza la cena"),
        ("pt", "o grupo das segundas prepara a festa"),
        ("it", "il club del lunedì organizza la cena"),
        ("nl", "de club van maandag organiseert het diner"),
        ("de", "den Montagsclub anrufen"),
        ("de", "Guten Morgen sagen"),  # the morning, not tomorrow
        ("nl", "bel Jan"),  # a name, not January
        ("it", "leggere 1984"),
    ],
)
def test_quick_add_language_keeps_a_word_that_is_no_date_here_in_the_title(language: str, text: str) -> None:
    understood = quick_add_understand(text=text, user=_person(language), now=NOW)
    assert (understood.title, understood.due_date) == (text, None)


@pytest.mark.parametrize(
    ("language", "order", "text", "title", "due", "at"),
    [
        # A time after "at": the weekday is the date, the hour its time (not 9 September).
        ("en", "MDY", "Standup Monday at 9", "Standup", MONDAY, "09:00"),
        ("en", "MDY", "call Bob tomorrow at 3:45pm", "call Bob", TOMORROW, "15:45"),
        ("en", "MDY", "lunch with Ann Monday at noon", "lunch with Ann", MONDAY, "12:00"),
        ("de", "DMY", "Zahnarzt Montag um 14:30 Uhr", "Zahnarzt", MONDAY, "14:30"),
        # A date that reads only one way is read that way, whatever the order (31 cannot be a month).
        ("en", "DMY", "Pay rent 12/31", "Pay rent", date(2026, 12, 31), None),
        ("en", "MDY", "Pay rent 31/12", "Pay rent", date(2026, 12, 31), None),
        ("en", "MDY", "Renew passport 3/15/2027", "Renew passport", date(2027, 3, 15), None),
        ("en", "MDY", "Party 2026-12-24", "Party", date(2026, 12, 24), None),
        ("en", "MDY", "Order 3/4 cup flour tomorrow", "Order 3/4 cup flour", TOMORROW, None),  # words first
        # German writes a date with dots and a last dot: 12 May, not 12:05 today.
        ("de", "DMY", "Miete zahlen 12.05.", "Miete zahlen", date(2027, 5, 12), None),
        ("de", "DMY", "Miete zahlen am 1.1.2027", "Miete zahlen", date(2027, 1, 1), None),
        # A month's name without a day is a name: Jan stays, the weekday and its time are the date.
        ("en", "MDY", "Email Jan on Monday at 10", "Email Jan", MONDAY, "10:00"),
        # Only the person's languages' little words are taken off the end: "no" is English here, not Portuguese.
        ("en", "MDY", "Vote no tomorrow", "Vote no", TOMORROW, None),
        # The day after tomorrow, as each language says it, is not tomorrow with a word left over.
        ("en", "MDY", "call Bob the day after tomorrow", "call Bob", date(2026, 12, 6), None),
        ("de", "DMY", "Oma anrufen übermorgen", "Oma anrufen", date(2026, 12, 6), None),
        ("fr", "DMY", "appeler Marie après-demain", "appeler Marie", date(2026, 12, 6), None),
        ("es", "DMY", "Llamar a Juan pasado mañana", "Llamar a Juan", date(2026, 12, 6), None),
        ("it", "DMY", "chiamare Luca dopodomani", "chiamare Luca", date(2026, 12, 6), None),
        ("nl", "DMY", "bel Jan overmorgen", "bel Jan", date(2026, 12, 6), None),
        ("pt", "DMY", "ligar para Ana depois de amanhã às 10h", "ligar para Ana", date(2026, 12, 6), "10:00"),
    ],
)
def test_quick_add_language_reads_times_numbers_and_names_as_a_person_means_them(
    language: str, order: str, text: str, title: str, due: date, at: str | None
) -> None:
    understood = quick_add_understand(text=text, user=_person(language, order), now=NOW)
    assert (understood.title, understood.due_date) == (title, due)
    assert (f"{understood.at:%H:%M}" if understood.at else None) == at


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("de", "Kapitel 3.12 lesen"),  # a section, not 3 December: a German date ends with its dot
        ("en", "Read chapter 3.12"),
        ("en", "Budget 13/13"),  # no day of any year
        ("en", "Pay rent 2/30"),
    ],
)
def test_quick_add_language_keeps_numbers_that_are_no_date_in_the_title(language: str, text: str) -> None:
    understood = quick_add_understand(text=text, user=_person(language), now=NOW)
    assert (understood.title, understood.due_date) == (text, None)


def test_quick_add_language_day_first_or_month_first_and_english_in_any_language() -> None:
    assert quick_add_understand(text="meeting 12/05", user=_person("en", "MDY"), now=NOW).due_date == date(2026, 12, 5)
    assert quick_add_understand(text="meeting 12/05", user=_person("en", "DMY"), now=NOW).due_date == date(2027, 5, 12)
    assert quick_add_understand(text="call Bob tomorrow", user=_person("de"), now=NOW).due_date == TOMORROW
    # Only the person's language (and English): French days are not read for a German writer.
    assert quick_add_understand(text="appeler Marie lundi", user=_person("de"), now=NOW).due_date is None


def test_quick_add_language_is_set_on_the_settings_page_and_through_the_api(client: Client) -> None:
    user = UserFactory()
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert 'id="language-form"' in page and "Language you write tasks in" in page
    saved = client.post("/settings/language", {"language": "de", "date_order": "DMY"}, follow=True)
    assert "Quick add now reads dates in Deutsch (and English), day first" in saved.content.decode()
    user.refresh_from_db()
    assert (user.language, user.date_order) == ("de", "DMY")
    refused = client.post("/settings/language", {"language": "xx", "date_order": "DMY"})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()

    me = client.patch("/api/me", {"language": "pt", "date_order": "MDY"}, content_type="application/json")
    assert me.status_code == 200 and (me.json()["language"], me.json()["date_order"]) == ("pt", "MDY")
    assert me.json()["timezone"] == user.timezone  # left as it was
    bad = client.patch("/api/me", {"language": "klingon"}, content_type="application/json")
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
    user.refresh_from_db()
    assert (user.language, user.date_order) == ("pt", "MDY")


@pytest.mark.parametrize(
    ("accept", "language", "order"),
    [
        ("de-AT,de;q=0.9,en;q=0.5", "de", "DMY"),
        ("en-US,en;q=0.9", "en", "MDY"),
        ("en-GB", "en", "DMY"),
        ("ja-JP,fr;q=0.8", "fr", "DMY"),
        ("", "en", "MDY"),
    ],
)
def test_quick_add_language_and_date_order_come_from_the_browser_at_sign_up(
    client: Client, accept: str, language: str, order: str
) -> None:
    answer = client.post(
        "/signup/",
        {"email": "new@example.com", "password1": "correct-horse-battery-9", "password2": "correct-horse-battery-9"},
        HTTP_ACCEPT_LANGUAGE=accept,
    )
    assert answer.status_code in (200, 302)
    user = User.objects.get(email="new@example.com")
    assert (user.language, user.date_order) == (language, order)
