"""Forward the demo person an email, as their mail server would: `python -m sandbox.forward_send --port P`.

Builds a Gmail-style forward (a colleague's ask, with a note above it) from the person (demo@tasklift.test by
default), has the sandbox sign it with its DKIM key for the person's domain (whose DNS the sandbox answers), and
sends it over SMTP to the `inbound` process on this machine, to the person's forward-to address (read from the
database, made if need be; or `--to`). Prints the server's answer."""

from __future__ import annotations

import argparse
import os
import smtplib
import sys
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid


def forward_message(person: str, to: str) -> bytes:
    message = EmailMessage()
    message["From"] = person
    message["To"] = to
    message["Subject"] = "Fwd: Venue contract"
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=person.rpartition("@")[2])
    message.set_content(
        "remind me Friday\n\n---------- Forwarded message ---------\n"
        "From: Maya Okafor <maya@client.example>\nDate: Tue, Dec 1, 2026 at 9:14 AM\nSubject: Venue contract\n"
        f"To: <{person}>\n\nHi,\n\nCould you sign and return the venue contract by Friday?\n\nThanks,\nMaya\n"
    )
    return message.as_bytes().replace(b"\n", b"\r\n")


def _text(answer: bytes | str) -> str:
    return answer.decode(errors="replace") if isinstance(answer, bytes) else answer


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.forward_send", description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="the inbound process's port (INBOUND_SMTP_PORT)")
    parser.add_argument("--person", default="demo@tasklift.test")
    parser.add_argument("--to", default="", help="the forward-to address (default: the person's, from the database)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    from accounts.models import User
    from integrations.inbound.addresses import forward_address
    from sandbox.client import SandboxClient

    to = args.to or forward_address(user=User.objects.get(email=args.person)).account_address
    domain = args.person.rpartition("@")[2]
    raw = SandboxClient(settings.SANDBOX_URL).dkim_sign(forward_message(args.person, to), domain)
    with smtplib.SMTP("127.0.0.1", args.port, local_hostname="mx.tasklift.test", timeout=30) as client:
        try:
            client.sendmail(args.person, [to], raw)
        except smtplib.SMTPResponseException as error:
            print(f"{to} refused it: {error.smtp_code} {_text(error.smtp_error)}")
            return 1
    print(f"Forwarded to {to}: taken (250). It becomes a task within moments.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
