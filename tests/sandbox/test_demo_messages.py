"""The demo inbox: well-formed raw mail, dated inside the backfill window, covering the awkward formats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from itertools import pairwise

import pytest

from sandbox.demo.messages import DEMO_ADDRESS, EXPECTED_ASKS, demo_messages

NOW = datetime(2025, 12, 5, 14, 37, 12, 345678, tzinfo=UTC)


def _parse(raw: bytes) -> EmailMessage:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def _parts(message: Message) -> list[Message]:
    return list(message.walk())


@pytest.fixture(scope="module")
def messages() -> list[EmailMessage]:
    return [_parse(raw) for raw in demo_messages(NOW)]


def test_at_least_forty_raw_messages():
    raws = demo_messages(NOW)
    assert len(raws) >= 40
    assert all(isinstance(raw, bytes) for raw in raws)


def test_every_message_has_the_headers_a_mailbox_needs(messages):
    for message in messages:
        for header in ("From", "To", "Subject", "Date", "Message-ID", "MIME-Version"):
            assert message[header], f"{message['Subject']!r} has no {header}"
        assert message["To"].addresses[0].addr_spec == DEMO_ADDRESS
        assert str(message["To"]) == f"Demo User <{DEMO_ADDRESS}>"
        assert "@" in message["From"].addresses[0].addr_spec
        message_id = str(message["Message-ID"])
        assert message_id.startswith("<")
        assert message_id.endswith(">")
        assert "@" in message_id


def test_subjects_and_message_ids_are_unique(messages):
    subjects = [str(message["Subject"]) for message in messages]
    assert len(set(subjects)) == len(subjects)
    ids = [str(message["Message-ID"]) for message in messages]
    assert len(set(ids)) == len(ids)


def test_message_ids_do_not_depend_on_now():
    later = [_parse(raw)["Message-ID"] for raw in demo_messages(NOW + timedelta(days=3, hours=5))]
    assert later == [_parse(raw)["Message-ID"] for raw in demo_messages(NOW)]


@pytest.mark.parametrize(
    "now",
    [
        NOW,
        datetime(2026, 1, 1, 0, 0, tzinfo=UTC),
        datetime(2025, 3, 1, 6, 30, 59, 999999, tzinfo=timezone(timedelta(hours=-8))),
    ],
)
def test_dates_lie_within_six_days_before_now_oldest_first(now):
    dates = [parsedate_to_datetime(str(_parse(raw)["Date"])) for raw in demo_messages(now)]
    assert all(date.tzinfo is not None for date in dates)
    assert all(now - timedelta(days=6) <= date <= now for date in dates)
    assert all(earlier < later for earlier, later in pairwise(dates))
    # Spread out over the window, not bunched together.
    assert dates[-1] - dates[0] > timedelta(days=5)


def test_naive_now_is_taken_as_utc():
    naive = datetime(2025, 12, 5, 14, 37)
    dates = [parsedate_to_datetime(str(_parse(raw)["Date"])) for raw in demo_messages(naive)]
    aware = naive.replace(tzinfo=UTC)
    assert all(aware - timedelta(days=6) <= date <= aware for date in dates)


def test_expected_asks_covers_every_subject(messages):
    subjects = {str(message["Subject"]) for message in messages}
    assert set(EXPECTED_ASKS) == subjects
    assert all(isinstance(count, int) and 0 <= count <= 3 for count in EXPECTED_ASKS.values())
    with_asks = sum(1 for count in EXPECTED_ASKS.values() if count)
    assert with_asks >= 20
    assert len(EXPECTED_ASKS) - with_asks >= 10


def test_every_body_decodes(messages):
    for message in messages:
        body = message.get_body(preferencelist=("plain", "html"))
        assert body is not None, message["Subject"]
        content = body.get_content()
        assert isinstance(content, str)
        assert content.strip()


def test_has_an_html_only_message(messages):
    assert any(message.get_content_type() == "text/html" for message in messages)


def test_has_a_multipart_alternative_message(messages):
    alternatives = [message for message in messages if message.get_content_type() == "multipart/alternative"]
    assert alternatives
    for message in alternatives:
        types = {part.get_content_type() for part in message.iter_parts()}
        assert types == {"text/plain", "text/html"}


def test_has_a_message_with_a_pdf_attachment(messages):
    attachments = [part for message in messages for part in message.iter_attachments()]
    assert any(part.get_content_type() == "application/pdf" for part in attachments)
    pdf = next(part for part in attachments if part.get_content_type() == "application/pdf")
    assert pdf.get_filename()
    assert pdf.get_content().startswith(b"%PDF")


def test_has_a_quoted_printable_message(messages):
    encodings = {part.get("Content-Transfer-Encoding", "").lower() for m in messages for part in _parts(m)}
    assert "quoted-printable" in encodings


def test_has_a_latin_1_message_that_decodes(messages):
    latin = [part for message in messages for part in _parts(message) if part.get_content_charset() == "iso-8859-1"]
    assert latin
    text = latin[0].get_content()  # type: ignore[attr-defined]  # policy=default gives EmailMessage
    assert any(letter in text for letter in "äöüßéè")


def test_has_a_body_over_twenty_thousand_characters(messages):
    lengths = [
        len(part.get_content())  # type: ignore[attr-defined]
        for message in messages
        for part in _parts(message)
        if part.get_content_maintype() == "text"
    ]
    assert max(lengths) > 20_000


def test_has_quoted_reply_history(messages):
    bodies = [message.get_body(preferencelist=("plain",)) for message in messages]
    texts = [body.get_content() for body in bodies if body is not None]
    quoted = [text for text in texts if any(line.startswith(">") for line in text.splitlines())]
    assert quoted
    assert all(any(line.startswith("On ") and line.endswith("wrote:") for line in text.splitlines()) for text in quoted)


def test_has_mail_in_other_languages(messages):
    texts = " ".join(
        body.get_content()
        for body in (message.get_body(preferencelist=("plain", "html")) for message in messages)
        if body is not None
    ).lower()
    for phrase in ("pourriez-vous", "por favor", "bitte"):
        assert phrase in texts
