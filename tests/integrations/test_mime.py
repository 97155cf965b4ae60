"""Reading sender, subject, date and plain-text body out of real-world MIME, raw or as a Gmail payload."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone
from email.message import EmailMessage
from typing import Any

from integrations.mail.mime import (
    decode_base64url,
    gmail_body_attachment_id,
    html_to_text,
    parse_gmail_payload,
    parse_rfc822,
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def leaf(mime_type: str, data: bytes, *, charset: str = "utf-8", filename: str = "") -> dict[str, Any]:
    headers = [{"name": "Content-Type", "value": f'{mime_type}; charset="{charset}"'}]
    body: dict[str, Any] = {"size": len(data)}
    if filename:
        body["attachmentId"] = "ANGjdJ-x"
    else:
        body["data"] = b64url(data)
    return {"partId": "", "mimeType": mime_type, "filename": filename, "headers": headers, "body": body}


def test_plain_message_gives_decoded_headers_date_and_body() -> None:
    raw = (
        b"From: =?utf-8?q?Ren=C3=A9e_Dupont?= <renee@example.fr>\r\n"
        b"Subject: =?utf-8?b?UsOpdW5pb24gZGUgbHVuZGk=?=\r\n"
        b"Date: Mon, 02 Nov 2026 14:05:00 +0100\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"\r\n"
        b"Can you send the slides before Monday?\r\n"
    )

    mail = parse_rfc822(raw)

    assert mail.sender == "Renée Dupont <renee@example.fr>"
    assert mail.subject == "Réunion de lundi"
    assert mail.date == datetime(2026, 11, 2, 14, 5, tzinfo=timezone(timedelta(hours=1)))
    assert mail.body_text == "Can you send the slides before Monday?"


def test_html_only_message_becomes_readable_text_with_inline_links_and_no_images() -> None:
    raw = (
        b"From: shop@example.com\r\nSubject: Invoice\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
        b"<html><head><style>p { color: red }</style></head><body>"
        b'<img src="https://example.com/logo.png" alt="Logo">'
        b'<p>Please <b>pay</b> your invoice <a href="https://pay.example.com/i/42">here</a> by 5&nbsp;Dec.</p>'
        b"</body></html>"
    )

    body = parse_rfc822(raw).body_text

    assert "Please pay your invoice [here](https://pay.example.com/i/42) by 5 Dec." in body
    assert "logo" not in body.lower()
    assert "color" not in body
    assert "[1]" not in body  # links are not turned into footnotes


def test_multipart_alternative_prefers_the_plain_part() -> None:
    mail = EmailMessage()
    mail["From"] = "a@example.com"
    mail["Subject"] = "Both"
    mail.set_content("The plain version.")
    mail.add_alternative("<p>The HTML version.</p>", subtype="html")

    assert parse_rfc822(bytes(mail)).body_text == "The plain version."


def test_quoted_printable_is_decoded_with_soft_line_breaks() -> None:
    raw = (
        b"From: a@example.com\r\nSubject: QP\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"Caf=C3=A9 meeting moved to Thurs=\r\nday at 10=3D30.\r\n"
    )

    assert parse_rfc822(raw).body_text == "Café meeting moved to Thursday at 10=30."


def test_non_utf8_charset_is_decoded() -> None:
    raw = (
        b"From: b@example.de\r\nSubject: Umlaute\r\n"
        b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
        b"Bitte die Gr\xfc\xdfe an J\xf6rg weiterleiten.\r\n"
    )

    assert parse_rfc822(raw).body_text == "Bitte die Grüße an Jörg weiterleiten."


def test_unknown_charset_falls_back_to_utf8() -> None:
    raw = b"From: c@example.com\r\nContent-Type: text/plain; charset=x-nonsense\r\n\r\nna\xc3\xafve\r\n"

    assert parse_rfc822(raw).body_text == "naïve"


def test_attachments_are_not_read_as_the_body() -> None:
    mail = EmailMessage()
    mail["From"] = "d@example.com"
    mail["Subject"] = "Notes"
    mail.add_alternative("<p>See the attached notes.</p>", subtype="html")
    mail.add_attachment("SECRET attachment text", filename="notes.txt")

    body = parse_rfc822(bytes(mail)).body_text

    assert body == "See the attached notes."


def test_missing_or_broken_date_is_none() -> None:
    assert parse_rfc822(b"From: e@example.com\r\nDate: someday\r\n\r\nx").date is None
    assert parse_rfc822(b"From: e@example.com\r\n\r\nx").date is None


def test_gmail_payload_prefers_plain_and_decodes_its_charset() -> None:
    payload = {
        "partId": "",
        "mimeType": "multipart/mixed",
        "filename": "",
        "headers": [
            {"name": "From", "value": "Jörg <joerg@example.de>"},
            {"name": "Subject", "value": "Grüße"},
            {"name": "Date", "value": "Tue, 03 Nov 2026 08:00:00 +0000"},
        ],
        "body": {"size": 0},
        "parts": [
            {
                "partId": "0",
                "mimeType": "multipart/alternative",
                "filename": "",
                "headers": [],
                "body": {"size": 0},
                "parts": [
                    leaf("text/plain", "Schöne Grüße".encode("iso-8859-1"), charset="iso-8859-1"),
                    leaf("text/html", b"<p>HTML</p>"),
                ],
            },
            leaf("text/plain", b"", filename="notes.txt"),
        ],
    }

    mail = parse_gmail_payload(payload)

    assert (mail.sender, mail.subject) == ("Jörg <joerg@example.de>", "Grüße")
    assert mail.date == datetime(2026, 11, 3, 8, 0, tzinfo=UTC)
    assert mail.body_text == "Schöne Grüße"


def test_gmail_payload_with_only_html_is_converted() -> None:
    payload = leaf("text/html", b"<div>Call <i>Ana</i> back.</div>")
    payload["headers"] += [{"name": "Subject", "value": "=?utf-8?q?Caf=C3=A9?="}]

    mail = parse_gmail_payload(payload)

    assert mail.body_text == "Call Ana back."
    assert mail.subject == "Café"


def test_base64url_is_decoded_with_or_without_padding() -> None:
    data = b"\xfb\xef" + "Grüß".encode()
    padded = base64.urlsafe_b64encode(data).decode()

    assert padded.endswith("=") and "-" in padded
    assert decode_base64url(padded) == data
    assert decode_base64url(padded.rstrip("=")) == data


def test_html_to_text_drops_scripts() -> None:
    assert html_to_text("<script>alert(1)</script><p>Hello</p>") == "Hello"


def test_a_named_text_part_is_the_body_only_when_no_unnamed_text_part_is() -> None:
    named = leaf("text/plain", b"", filename="message.txt")  # Gmail sends its data apart
    assert gmail_body_attachment_id(named) == "ANGjdJ-x"
    body = parse_gmail_payload(named, body_data=b64url(b"Please sign the lease.")).body_text
    assert body == "Please sign the lease."

    payload = {
        "partId": "",
        "mimeType": "multipart/mixed",
        "filename": "",
        "headers": [],
        "body": {"size": 0},
        "parts": [leaf("text/html", b"<p>See the notes.</p>"), leaf("text/plain", b"attached notes", filename="n.txt")],
    }
    assert parse_gmail_payload(payload).body_text == "See the notes."


def test_an_empty_plain_part_never_hides_the_html_body() -> None:
    empty = {"partId": "0", "mimeType": "text/plain", "filename": "", "headers": [], "body": {"size": 0}}
    payload = {
        "partId": "",
        "mimeType": "multipart/alternative",
        "filename": "",
        "headers": [],
        "body": {"size": 0},
        "parts": [empty, leaf("text/html", b"<p>Please send the report by Friday.</p>")],
    }
    assert parse_gmail_payload(payload).body_text == "Please send the report by Friday."
