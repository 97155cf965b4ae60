"""A forwarded email is read as the email it forwards (its sender, date, subject and body), and what the person
wrote above it as their note.

Each message is built as its client sends it: Gmail and Outlook a plain and an HTML alternative (Outlook on the
web may send HTML only), Apple Mail its plain text with the forward quoted by ">", iOS Mail without the quotes,
Outlook's "Forward as attachment" a message/rfc822 part. The plain forwards of tests/fixtures/mail/forward/ (a
note above Gmail's, Thunderbird's, Apple Mail's or Outlook's header in twelve languages) are read too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email.message import EmailMessage
from pathlib import Path

import pytest

from integrations.mail.forwarded import unwrap_forward

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mail" / "forward"
JANE = "Jane Doe <jane.doe@acme.com>"
BODY = "Hi Dana,\n\nCould you book the large room for the offsite on 8 December?\n\nThanks,\nJane"
BODY_HTML = (
    "<div>Hi Dana,</div><div><br></div><div>Could you book the large room for the offsite on 8 December?</div>"
    "<div><br></div><div>Thanks,<br>Jane</div>"
)
NOTE = "Remind me Friday."
DEC_1_0914_UTC = datetime(2026, 12, 1, 9, 14, tzinfo=UTC)


def sent_to_tasklift(subject: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Dana Lee <dana@example.com>"
    message["To"] = "dana.7f3k@in.tasklift.app"
    message["Subject"] = subject
    message["Date"] = "Wed, 02 Dec 2026 08:30:00 +0000"
    message["Message-ID"] = "<CAHx9fwd01@mail.example.com>"
    return message


def plain_and_html(message: EmailMessage, plain: str, html: str) -> EmailMessage:
    message.set_content(plain)
    message.add_alternative(html, subtype="html")
    return message


def the_original() -> EmailMessage:
    original = EmailMessage()
    original["From"] = JANE
    original["To"] = "Dana Lee <dana@example.com>"
    original["Subject"] = "Room for the offsite"
    original["Date"] = "Tue, 01 Dec 2026 09:14:00 +0100"
    original["Message-ID"] = "<AM0PR04MB6433.eurprd04@acme.com>"
    return plain_and_html(original, BODY, BODY_HTML)


def test_forward_as_attachment_reads_the_attached_message_and_keeps_the_note() -> None:
    forward = plain_and_html(sent_to_tasklift("FW: Room for the offsite"), f"{NOTE}\n", f"<div>{NOTE}</div>")
    forward.add_attachment(the_original(), filename="Room for the offsite.eml")

    found = unwrap_forward(bytes(forward))

    assert found.forwarded
    assert found.sender == JANE
    assert found.subject == "Room for the offsite"
    assert found.date == datetime(2026, 12, 1, 9, 14, tzinfo=timezone(timedelta(hours=1)))
    assert found.body_text == BODY
    assert found.note == NOTE
    assert found.message_id == "AM0PR04MB6433.eurprd04@acme.com"


GMAIL_PLAIN = f"""{NOTE}

---------- Forwarded message ---------
From: Jane Doe <jane.doe@acme.com>
Date: Tue, Dec 1, 2026 at 9:14 AM
Subject: Q4 budget
To: Dana Lee <dana@example.com>
Cc: Finance <finance@acme.com>

Hi Dana,

Please send the *Q4 budget* by Friday.

Thanks,
Jane
"""
GMAIL_HTML = f"""<div dir="ltr">{NOTE}<br><br><div class="gmail_quote gmail_quote_container"><div dir="ltr" \
class="gmail_attr">---------- Forwarded message ---------<br>From: <strong class="gmail_sendername" dir="auto">\
Jane Doe</strong> <span dir="auto">&lt;<a href="mailto:jane.doe@acme.com">jane.doe@acme.com</a>&gt;</span><br>\
Date: Tue, Dec 1, 2026 at 9:14 AM<br>Subject: Q4 budget<br>To: Dana Lee &lt;<a href="mailto:dana@example.com">\
dana@example.com</a>&gt;<br>Cc: Finance &lt;<a href="mailto:finance@acme.com">finance@acme.com</a>&gt;<br></div>\
<br><br><div dir="ltr">Hi Dana,<div><br></div><div>Please send the <b>Q4 budget</b> by Friday.</div><div><br>\
</div><div>Thanks,</div><div>Jane</div></div></div></div>
"""


def test_gmail_inline_forward_is_read_from_its_plain_alternative() -> None:
    forward = plain_and_html(sent_to_tasklift("Fwd: Q4 budget"), GMAIL_PLAIN, GMAIL_HTML)

    found = unwrap_forward(bytes(forward))

    assert found.forwarded
    assert found.sender == JANE
    assert found.subject == "Q4 budget"
    assert found.date == DEC_1_0914_UTC
    # Gmail's plain text writes bold as *…*; the HTML turned into text would not.
    assert found.body_text == "Hi Dana,\n\nPlease send the *Q4 budget* by Friday.\n\nThanks,\nJane"
    assert found.note == NOTE
    assert found.message_id == ""


@pytest.mark.parametrize(
    ("separator", "sender_line", "expected_sender"),
    [
        # Outlook desktop's plain text writes each link after its text.
        ("________________________________\n", "Jane Doe <jane.doe@acme.com<mailto:jane.doe@acme.com>>", JANE),
        ("________________________________\n", "Jane Doe", "Jane Doe"),
        ("", "Jane Doe <jane.doe@acme.com>", JANE),
        ("-----Original Message-----\n", "Jane Doe [mailto:jane.doe@acme.com]", JANE),
    ],
    ids=["underscores_mailto", "name_only", "no_separator", "original_message_line"],
)
def test_outlook_inline_forward_reads_the_header_block(separator: str, sender_line: str, expected_sender: str) -> None:
    plain = (
        f"{NOTE}\n\nDana\n\n{separator}From: {sender_line}\nSent: Tuesday, December 1, 2026 9:14 AM\n"
        "To: Dana Lee <dana@example.com<mailto:dana@example.com>>\nCc: Facilities <facilities@acme.com>\n"
        f"Subject: Room for the offsite\n\n{BODY}\n"
    )
    forward = plain_and_html(sent_to_tasklift("FW: Room for the offsite"), plain, f"<div>{NOTE}</div>")

    found = unwrap_forward(bytes(forward))

    assert found.forwarded
    assert found.sender == expected_sender
    assert found.subject == "Room for the offsite"
    assert found.date == DEC_1_0914_UTC
    assert found.body_text == BODY
    assert found.note == f"{NOTE}\n\nDana"


OUTLOOK_WEB_HTML = f"""<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<style type="text/css" style="display:none;"> P {{margin-top:0;margin-bottom:0;}} </style></head>
<body dir="ltr">
<div class="elementToProof" style="font-family: Aptos, Calibri, Helvetica, sans-serif; font-size: 12pt;">
{NOTE}</div>
<div id="appendonsend"></div>
<hr style="display:inline-block;width:98%" tabindex="-1">
<div id="divRplyFwdMsg" dir="ltr"><font face="Calibri, sans-serif" style="font-size:11pt" color="#000000">\
<b>From:</b> Jane Doe &lt;jane.doe@acme.com&gt;<br>
<b>Sent:</b> Tuesday, December 1, 2026 9:14 AM<br>
<b>To:</b> Dana Lee &lt;dana@example.com&gt;<br>
<b>Subject:</b> Room for the offsite</font>
<div>&nbsp;</div>
</div>
<div class="elementToProof">{BODY_HTML}</div>
</body>
</html>
"""


def test_outlook_html_only_forward_keeps_the_forwarded_email() -> None:
    forward = sent_to_tasklift("FW: Room for the offsite")
    forward.set_content(OUTLOOK_WEB_HTML, subtype="html")

    found = unwrap_forward(bytes(forward))

    assert found.forwarded
    assert found.sender == JANE
    assert found.subject == "Room for the offsite"
    assert found.date == DEC_1_0914_UTC
    assert found.body_text == BODY
    assert found.note == NOTE


APPLE_MAIL = f"""{NOTE}

> Begin forwarded message:
>
> From: Jane Doe <jane.doe@acme.com>
> Subject: Room for the offsite
> Date: 1 December 2026 at 10:14:00 CET
> To: Dana Lee <dana@example.com>
>
{"".join(f"> {line}".rstrip() + chr(10) for line in BODY.split(chr(10)))}"""
IOS_MAIL = f"""{NOTE}

Sent from my iPhone

Begin forwarded message:

From: Jane Doe <jane.doe@acme.com>
Date: December 1, 2026 at 10:14:00 AM GMT+1
To: Dana Lee <dana@example.com>
Subject: Room for the offsite

\ufeff{BODY}
"""


@pytest.mark.parametrize(
    ("plain", "note"),
    [(APPLE_MAIL, NOTE), (IOS_MAIL, f"{NOTE}\n\nSent from my iPhone")],
    ids=["mac_quoted", "ios"],
)
def test_apple_mail_inline_forward_is_read_quoted_or_not(plain: str, note: str) -> None:
    forward = sent_to_tasklift("Fwd: Room for the offsite")
    forward.set_content(plain)

    found = unwrap_forward(bytes(forward))

    assert found.forwarded
    assert found.sender == JANE
    assert found.subject == "Room for the offsite"
    assert found.date == DEC_1_0914_UTC
    assert found.body_text == BODY
    assert found.note == note


@pytest.mark.parametrize(
    ("header", "subject", "date"),
    [
        (  # Outlook
            "________________________________\nVon: Jane Doe <jane.doe@acme.com>\n"
            "Gesendet: Dienstag, 1. Dezember 2026 09:14\nAn: Dana Lee <dana@example.com>\nBetreff: Raum",
            "Raum",
            DEC_1_0914_UTC,
        ),
        (  # Apple Mail
            "Anfang der weitergeleiteten Nachricht:\n\nVon: Jane Doe <jane.doe@acme.com>\nBetreff: Raum\n"
            "Datum: 1. Dezember 2026 um 10:14:00 MEZ\nAn: Dana Lee <dana@example.com>",
            "Raum",
            DEC_1_0914_UTC,
        ),
        (  # Gmail
            "---------- Weitergeleitete Nachricht ---------\nVon: Jane Doe <jane.doe@acme.com>\n"
            "Date: Di., 1. Dez. 2026 um 09:14 Uhr\nSubject: Raum\nTo: Dana Lee <dana@example.com>",
            "Raum",
            DEC_1_0914_UTC,
        ),
        (  # Gmail
            "---------- Message transféré ---------\nDe : Jane Doe <jane.doe@acme.com>\n"
            "Date : mar. 1 déc. 2026 à 09:14\nObjet : Salle\nÀ : Dana Lee <dana@example.com>",
            "Salle",
            DEC_1_0914_UTC,
        ),
        (  # Outlook
            "________________________________\nDe : Jane Doe <jane.doe@acme.com>\n"
            "Envoyé : mardi 1 décembre 2026 09:14\nÀ : Dana Lee <dana@example.com>\nObjet : Salle",
            "Salle",
            DEC_1_0914_UTC,
        ),
        (  # Gmail
            "---------- Mensaje reenviado ---------\nDe: Jane Doe <jane.doe@acme.com>\n"
            "Date: mar, 1 dic 2026 a las 9:14\nSubject: Sala\nTo: Dana Lee <dana@example.com>",
            "Sala",
            DEC_1_0914_UTC,
        ),
        (  # Outlook
            "________________________________\nDe: Jane Doe <jane.doe@acme.com>\n"
            "Enviado: martes, 1 de diciembre de 2026 9:14\nPara: Dana Lee <dana@example.com>\nAsunto: Sala",
            "Sala",
            DEC_1_0914_UTC,
        ),
    ],
    ids=["de_outlook", "de_apple_mail", "de_gmail", "fr_gmail", "fr_outlook", "es_gmail", "es_outlook"],
)
def test_localised_inline_forward_reads_the_fields_of_its_language(header: str, subject: str, date: datetime) -> None:
    forward = sent_to_tasklift(f"WG: {subject}")
    forward.set_content(f"{NOTE}\n\n{header}\n\n{BODY}\n")

    found = unwrap_forward(bytes(forward))

    assert (found.forwarded, found.sender, found.subject, found.date) == (True, JANE, subject, date)
    assert found.body_text == BODY
    assert found.note == NOTE


# The fixtures' dates, in UTC: Thunderbird's and Apple Mail's carry a zone (+0100, UTC+1, CET, WET), Gmail's and
# Outlook's do not.
FIXTURE_SUBJECT_AND_HOUR = {
    "en": ("Contract", 10),
    "de": ("Vertrag", 9),
    "fr": ("Contrat", 9),
    "es": ("RV: Contrato", 10),
    "it": ("Contratto", 9),
    "pt": ("Contrato", 10),
    "nl": ("Contract", 10),
    "pl": ("Umowa", 9),
    "sv": ("Avtal", 9),
    "fi": ("Sopimus", 10),
    "hu": ("Szerződés", 10),
    "ja": ("契約書", 10),
}


@pytest.mark.parametrize("language", FIXTURE_SUBJECT_AND_HOUR)
def test_forward_fixture_reads_as_its_original_in_each_language(language: str) -> None:
    text = (FIXTURES / f"{language}.txt").read_text()
    forward = sent_to_tasklift("Fwd: …")
    forward.set_content(text)

    found = unwrap_forward(bytes(forward))

    subject, hour = FIXTURE_SUBJECT_AND_HOUR[language]
    assert found.forwarded
    assert found.sender == "John Carter <john@example.com>"
    assert found.subject == subject
    assert found.date == datetime(2026, 11, 24, hour, tzinfo=UTC)
    assert found.body_text == "\n".join(text.strip().splitlines()[-2:])  # each fixture's original has two lines
    assert found.note == (FIXTURES / f"{language}.reply.txt").read_text().strip()


def test_nested_inline_forward_reads_the_innermost_original_with_the_outermost_note() -> None:
    forwarded_by_sam = GMAIL_PLAIN.replace(NOTE, "FYI, see below.\n\nSam")
    forward = sent_to_tasklift("Fwd: Fwd: Q4 budget")
    forward.set_content(
        f"{NOTE}\n\n---------- Forwarded message ---------\nFrom: Sam Ito <sam@example.com>\n"
        f"Date: Tue, Dec 1, 2026 at 11:02 AM\nSubject: Fwd: Q4 budget\nTo: Dana Lee <dana@example.com>\n\n"
        f"{forwarded_by_sam}"
    )

    found = unwrap_forward(bytes(forward))

    assert (found.forwarded, found.sender, found.subject, found.date) == (True, JANE, "Q4 budget", DEC_1_0914_UTC)
    assert found.body_text == "Hi Dana,\n\nPlease send the *Q4 budget* by Friday.\n\nThanks,\nJane"
    assert found.note == NOTE


def test_attached_inline_forward_reads_the_original_inside_the_attachment() -> None:
    attached = sent_to_tasklift("FW: Room for the offsite")
    attached.replace_header("From", "Sam Ito <sam@example.com>")
    attached.set_content(
        "Over to you.\n\n________________________________\nFrom: Jane Doe <jane.doe@acme.com>\n"
        "Sent: Tuesday, December 1, 2026 9:14 AM\nTo: Sam Ito <sam@example.com>\n"
        f"Subject: Room for the offsite\n\n{BODY}\n"
    )
    forward = sent_to_tasklift("FW: Room for the offsite")
    forward.set_content(f"{NOTE}\n")
    forward.add_attachment(attached, filename="FW Room for the offsite.eml")

    found = unwrap_forward(bytes(forward))

    assert (found.forwarded, found.sender, found.subject, found.date) == (
        True,
        JANE,
        "Room for the offsite",
        DEC_1_0914_UTC,
    )
    assert found.body_text == BODY
    assert found.note == NOTE
    assert found.message_id == ""  # the original's own is not in the text


def test_forwarded_reply_keeps_the_history_it_quotes() -> None:
    reply = (
        "Yes, 8 December works.\n\n________________________________\nFrom: Dana Lee <dana@example.com>\n"
        "Sent: Monday, November 30, 2026 5:02 PM\nTo: Jane Doe <jane.doe@acme.com>\nSubject: Offsite\n\n"
        "Does 8 December work for the offsite?"
    )
    forward = sent_to_tasklift("Fwd: RE: Offsite")
    forward.set_content(
        f"{NOTE}\n\n---------- Forwarded message ---------\nFrom: {JANE}\nDate: Tue, Dec 1, 2026 at 9:14 AM\n"
        f"Subject: RE: Offsite\nTo: Dana Lee <dana@example.com>\n\n{reply}\n"
    )

    found = unwrap_forward(bytes(forward))

    assert (found.sender, found.subject, found.date) == (JANE, "RE: Offsite", DEC_1_0914_UTC)
    assert found.body_text == reply


@pytest.mark.parametrize(
    "body",
    [
        "Book the large room for the offsite on 8 December.\n",
        # A reply's quote under Gmail's attribution is not a forward.
        f"Book it, please.\n\nOn Tue, Dec 1, 2026 at 9:14 AM Jane Doe <jane.doe@acme.com> wrote:\n\n> {NOTE}\n",
    ],
    ids=["written_to_tasklift", "reply_with_quote"],
)
def test_mail_that_forwards_nothing_is_not_a_forward(body: str) -> None:
    mail = sent_to_tasklift("Offsite room")
    mail.set_content(body)

    found = unwrap_forward(bytes(mail))

    assert not found.forwarded
    assert found.sender == "Dana Lee <dana@example.com>"
    assert found.subject == "Offsite room"
    assert found.date == datetime(2026, 12, 2, 8, 30, tzinfo=UTC)
    assert found.body_text == body.strip()
    assert (found.note, found.message_id) == ("", "")


@pytest.mark.parametrize("prefix", ["Fwd: ", "FW: ", "WG: ", "TR: ", "RV: ", "Fwd: FW: "])
def test_forward_without_subject_line_takes_the_outer_subject_without_its_prefix(prefix: str) -> None:
    forward = sent_to_tasklift(f"{prefix}Room for the offsite")
    forward.set_content(
        f"{NOTE}\n\n________________________________\nFrom: {JANE}\nTo: Dana Lee <dana@example.com>\n\n{BODY}\n"
    )

    found = unwrap_forward(bytes(forward))

    assert (found.forwarded, found.sender, found.subject) == (True, JANE, "Room for the offsite")
    assert found.date is None  # the block has no date
    assert found.body_text == BODY
