"""Email bodies lose quoted history and signatures, keep their asks, and stay within a length."""

import pytest

from integrations.mail.clean import clean_body


@pytest.mark.parametrize(
    "body",
    [
        "Could you send the report?\n\nOn Mon, Nov 24, 2026 at 10:00 AM Carol <c@example.com> wrote:\n> Pay it.",
        "Could you send the report?\n\nLe lun. 24 nov. 2026 à 10:00, Paul <p@example.fr> a écrit :\n> Payez.",
        "Could you send the report?\n\nAm 24.11.2026 um 10:00 schrieb Paul <p@example.de>:\n> Bezahlen.",
        "Could you send the report?\n\n-----Original Message-----\nFrom: Carol\nSent: Monday\nTo: me\n\nPay.",
        "Could you send the report?\n> Pay it.\n>> And this.",
        "Could you send the report?\n\n--\nAlice Example\nHead of Finance",
        "Could you send the report?\n\nBest regards,\nAlice",
        "Could you send the report?\n\nSent from my iPhone",
    ],
)
def test_quoted_replies_and_signatures_are_removed(body):
    assert clean_body(body, max_chars=1_000) == "Could you send the report?"


def test_bulleted_asks_are_kept():
    body = "Before Friday, please:\n- send the report\n- book the room\n\nThanks,\nAlice"
    assert clean_body(body, max_chars=1_000) == "Before Friday, please:\n- send the report\n- book the room"


def test_whitespace_is_collapsed_but_paragraphs_kept():
    body = "  Hi   Bob,\r\n\r\n\r\n\r\nPlease\t\tcall\u00a0me.   \n"
    assert clean_body(body, max_chars=1_000) == "Hi Bob,\n\nPlease call me."


def test_a_bare_forward_keeps_the_forwarded_text():
    body = "-----Original Message-----\nFrom: Carol\nSent: Monday\nTo: me\nSubject: Invoice\n\nPlease pay the invoice."
    assert "Please pay the invoice." in clean_body(body, max_chars=1_000)


def test_long_bodies_are_cut_at_a_word_with_an_ellipsis():
    body = "Please review " + "the very long document " * 100
    cleaned = clean_body(body, max_chars=50)
    assert len(cleaned) <= 50
    assert cleaned.endswith("…")
    assert cleaned == "Please review the very long document the very…"


def test_short_bodies_are_unchanged():
    assert clean_body("Please call me.", max_chars=15) == "Please call me."


def test_max_chars_must_be_positive():
    with pytest.raises(ValueError):
        clean_body("x", max_chars=0)
