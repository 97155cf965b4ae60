"""The sandbox's copy of a message, as a page a person opens: where a task's "Open in Gmail / Outlook" link goes
while that provider is the sandbox (the real web clients have no such mail). A message the mailbox does not
hold (deleted, another address, a link from an earlier sandbox) is a page that says so, never an error body."""

from __future__ import annotations

import email
import email.policy
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import getaddresses

from flask import Response, render_template

from sandbox import gmail, graph
from sandbox.app import sandbox_state
from sandbox.control import control_route


@dataclass(frozen=True)
class MailCopy:
    sender: str
    to: str
    cc: str
    subject: str
    date: str
    body: str


def _addresses(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{name} <{address}>" if name and name != address else address for name, address in pairs)


def _gmail_copy(address: str, message_id: str) -> MailCopy | None:
    mailbox = gmail.mailbox_get(sandbox_state(), address)
    stored = mailbox.messages.get(message_id) if mailbox else None
    if stored is None:
        return None
    parsed = email.message_from_bytes(stored.raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(preferencelist=("plain", "html"))
    body = part.get_content() if part is not None else ""
    if part is not None and part.get_content_type() == "text/html":
        body = graph.html_to_text(body)
    received = datetime.fromtimestamp(stored.internal_date / 1000, UTC)
    return MailCopy(
        sender=str(parsed.get("From", "")),
        to=_addresses(getaddresses([str(v) for v in parsed.get_all("To", [])])),
        cc=_addresses(getaddresses([str(v) for v in parsed.get_all("Cc", [])])),
        subject=str(parsed.get("Subject", "")),
        date=f"{received:%a, %d %b %Y %H:%M} UTC",
        body=body,
    )


def _outlook_copy(address: str, message_id: str) -> MailCopy | None:
    mailbox = graph.mailbox_get(sandbox_state(), address)
    message = graph.message_find(mailbox, message_id) if mailbox else None
    if message is None:
        return None
    return MailCopy(
        sender=_addresses([message.sender]),
        to=_addresses(message.to),
        cc=_addresses(message.cc),
        subject=message.subject,
        date=f"{message.received.astimezone(UTC):%a, %d %b %Y %H:%M} UTC",
        body=graph.html_to_text(message.body) if message.body_type == "html" else message.body,
    )


PROVIDERS = {"gmail": ("Gmail", _gmail_copy), "outlook": ("Outlook", _outlook_copy)}


@control_route("/mail/<provider>/<address>/<path:message_id>", methods=["GET"])
def mail_page(provider: str, address: str, message_id: str) -> Response:
    name, find = PROVIDERS.get(provider, (provider, None))
    copy = find(address, message_id) if find else None
    page = render_template("mail_copy.html", provider=name, address=address, copy=copy)
    return Response(page, status=200 if copy else 404, content_type="text/html; charset=utf-8")
