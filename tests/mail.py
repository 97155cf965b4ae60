"""Building test mail for the sandbox mailboxes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid


def rfc822(
    subject: str, body: str, *, sender: str = "Alex Colleague <alex@example.com>", when: datetime | None = None
) -> str:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = "Person <person@example.com>"
    message["Subject"] = subject
    message["Date"] = format_datetime(when or datetime.now(UTC) - timedelta(minutes=5))
    message["Message-ID"] = make_msgid(domain="example.com")
    message.set_content(body)
    return message.as_string()


def ask(n: int) -> str:
    """An email with exactly one ask (for the sandbox reader): "Send the report for project N"."""
    return rfc822(f"Project {n}", f"Hi,\n\nPlease send the report for project {n} by Friday.\n\nAlex\n")


def no_ask(n: int) -> str:
    return rfc822(f"Update {n}", f"Hi,\n\nThe build for update {n} went fine. Nothing else today.\n")
