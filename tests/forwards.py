"""Forwarded mail as Gmail, Outlook and a forward-as-attachment make it, for the forward-to address's tests and
benchmark, and its sending over SMTP to the `inbound` process."""

from __future__ import annotations

import smtplib
from datetime import UTC, datetime, timedelta
from email import message_from_string, policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

from tests.mail import rfc822

ORIGINAL_SENDER = "Maya Okafor <maya@client.example>"


def _outer(person: str, subject: str, when: datetime | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = person
    message["To"] = "tasks@in.tasklift.test"
    message["Subject"] = subject
    message["Date"] = format_datetime(when or datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=person.rpartition("@")[2].strip(">"))
    return message


def gmail_forward(person: str, ask: str, *, note: str = "", subject: str = "Contract") -> bytes:
    """Gmail's inline forward: the note, its "Forwarded message" line and header block, the original."""
    message = _outer(person, f"Fwd: {subject}")
    message.set_content(
        f"{note}\n\n---------- Forwarded message ---------\n"
        f"From: {ORIGINAL_SENDER}\nDate: Tue, Dec 1, 2026 at 9:14 AM\nSubject: {subject}\nTo: <{person}>\n\n"
        f"Hi,\n\n{ask}\n\nThanks,\nMaya\n"
    )
    return message.as_bytes()


def outlook_forward(person: str, ask: str, *, note: str = "", subject: str = "Contract") -> bytes:
    """Outlook's inline forward: the note, a rule, the From/Sent/To/Subject block, the original."""
    message = _outer(person, f"FW: {subject}")
    message.set_content(
        f"{note}\n\n________________________________\n"
        f"From: {ORIGINAL_SENDER}\nSent: Tuesday, December 1, 2026 9:14 AM\nTo: Person <{person}>\n"
        f"Subject: {subject}\n\nHi,\n\n{ask}\n\nThanks,\nMaya\n"
    )
    return message.as_bytes()


def attached_forward(person: str, ask: str, *, note: str = "", subject: str = "Contract") -> bytes:
    """A forward as an attachment: the note as the body, the original as a message/rfc822 part."""
    message = _outer(person, f"Fwd: {subject}")
    message.set_content(note or "See attached.")
    original = rfc822(
        subject, f"Hi,\n\n{ask}\n\nThanks,\nMaya\n", sender=ORIGINAL_SENDER, when=datetime.now(UTC) - timedelta(days=1)
    )
    message.add_attachment(message_from_string(original, policy=policy.default))
    return message.as_bytes()


def smtp_send(port: int, *, mail_from: str, to: str, raw: bytes) -> tuple[int, str]:
    """Send one message as a mail server would (CRLF line ends: smtplib sends bytes as they are); the answer to
    DATA (or to the refused command)."""
    raw = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    with smtplib.SMTP("127.0.0.1", port, local_hostname="mx.sender.example", timeout=30) as client:
        try:
            client.sendmail(mail_from, [to], raw)
        except smtplib.SMTPRecipientsRefused as refused:
            code, text = refused.recipients[to]
            return code, _text(text)
        except smtplib.SMTPResponseException as error:
            return error.smtp_code, _text(error.smtp_error)
    return 250, ""


def _text(answer: bytes | str) -> str:
    return answer.decode(errors="replace") if isinstance(answer, bytes) else answer
