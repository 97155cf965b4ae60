"""Conversations through the control API: send as a mailbox's owner, and deliver someone's reply in a thread,
for Gmail and Outlook alike (sandbox/README.md, "Sent mail and threads").

Sent mail lands where each service keeps it: Gmail gives it the system label `SENT` (a messagesAdded history
record, filterable by labelId=SENT), Graph puts it, read, into the `sentitems` folder (its own delta, its own
subscriptions). Mail the owner sends to themselves (their address in To, Cc or `deliver_to`) also arrives in
their inbox as each service stores it: at Gmail it is the same one message, labelled UNREAD, SENT and INBOX (as
`messages.send` answers for it; one messagesAdded record that both labelId=SENT and labelId=INBOX list); at
Outlook a second item, unread, in the inbox, with the same internetMessageId and conversationId. Either way the
answer's `delivered` lists the owner's mailbox first, and `deliver_to` naming it delivers nothing more.
The mail is written by sandbox/compose.py and then delivered through the ordinary delivery paths,
so the headers a client reads (To, Cc, In-Reply-To, References) are the ones of the raw mail, and the thread
(Gmail `threadId`, Graph `conversationId`) follows from them as for any delivery. `deliver_to` hands the same
bytes to other mailboxes of this sandbox, Gmail or Outlook or both, as incoming mail; every address is checked
before anything is stored, so a refused call leaves every mailbox as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import formataddr, parseaddr
from typing import Annotated, Any

from flask import Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from sandbox import gmail, graph
from sandbox.app import json_response, sandbox_state
from sandbox.compose import Original, compose, message_id, reply_subject
from sandbox.control import ControlError, control_route, parse_body
from sandbox.state import SandboxState

MAX_RECIPIENTS = 100
# The labels of mail sent to oneself at Gmail, in the order messages.send answers them (captured from live Gmail).
TO_SELF_LABELS = ["UNREAD", "SENT", "INBOX"]


def _mailbox_address(value: str) -> str:
    """An address, bare or with a display name ("Sam <sam@example.org>"), as a header may carry it."""
    _, address = parseaddr(value)
    local, at, domain = address.partition("@")
    if not (local and at and "." in domain) or any(c in value for c in "\r\n"):
        raise ValueError(f"not an email address: {value!r}")
    return value.strip()


Address = Annotated[str, AfterValidator(_mailbox_address)]
Addresses = Annotated[list[Address], Field(max_length=MAX_RECIPIENTS)]


def _aware(moment: datetime | None) -> datetime | None:
    if moment is not None and moment.tzinfo is None:
        raise ValueError("a time must carry a timezone")
    return moment


class SendIn(BaseModel):
    """Mail the owner of `address` sends; `in_reply_to` is the id (in that mailbox) of the message it answers."""

    model_config = ConfigDict(extra="forbid")

    address: Address
    to: Annotated[list[Address], Field(min_length=1, max_length=MAX_RECIPIENTS)]
    cc: Addresses = Field(default_factory=list)
    subject: str | None = Field(default=None, max_length=998)
    body: str = Field(max_length=1_000_000)
    in_reply_to: str | None = Field(default=None, min_length=1)
    deliver_to: Addresses = Field(default_factory=list)
    sent_at: Annotated[datetime | None, AfterValidator(_aware)] = None

    @model_validator(mode="after")
    def no_header_breaks(self) -> SendIn:
        if self.subject is not None and any(c in self.subject for c in "\r\n"):
            raise ValueError("subject: one line, without CR or LF")
        return self


class ReplyIn(BaseModel):
    """A reply from `from` to message `id` of mailbox `address`, arriving there as incoming mail."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    address: Address
    id: str = Field(min_length=1)
    sender: Address = Field(alias="from")
    body: str = Field(max_length=1_000_000)
    to: Addresses | None = None  # default: the mailbox's owner
    cc: Addresses = Field(default_factory=list)
    received_at: Annotated[datetime | None, AfterValidator(_aware)] = None


def _bare(address: str) -> str:
    return parseaddr(address)[1].lower()


def _unknown_mailbox(address: str, provider: str) -> ControlError:
    return ControlError("unknown_mailbox", f"address: no {provider} mailbox {address}; create it first", 404)


def _unknown_message(message_ref: str, address: str) -> ControlError:
    return ControlError("unknown_message", f"id: no message {message_ref} in {address}", 404)


def _copy_targets(state: SandboxState, addresses: list[str]) -> list[tuple[str, str]]:
    """(address, provider) of every sandbox mailbox `deliver_to` names; 404 for an address that has none."""
    targets: list[tuple[str, str]] = []
    for address in dict.fromkeys(_bare(a) for a in addresses):
        found = [
            (address, provider)
            for provider, lookup in (("gmail", gmail.mailbox_get), ("outlook", graph.mailbox_get))
            if lookup(state, address) is not None
        ]
        if not found:
            raise ControlError("unknown_mailbox", f"deliver_to: no sandbox mailbox {address}; create it first", 404)
        targets += found
    return targets


def _addressed_to(spec: SendIn, address: str) -> bool:
    """Whether the mail names `address` (the sender's own) among its recipients or in `deliver_to`."""
    return address in {_bare(a) for a in [*spec.to, *spec.cc, *spec.deliver_to]}


def _deliver_copies(state: SandboxState, raw: bytes, targets: list[tuple[str, str]], when: datetime) -> list[Any]:
    delivered: list[dict[str, Any]] = []
    for address, provider in targets:
        if provider == "gmail":
            stored = gmail.message_deliver(state, address, raw, internal_date=when)
            delivered.append({"address": address, "provider": provider, "id": stored.id, "threadId": stored.thread_id})
        else:
            message = graph.message_deliver_rfc822(state, address, raw, received=when)
            delivered.append({"address": address, "provider": provider, **graph.delivered_answer(message)})
    return delivered


def _subject(spec: SendIn, answers: Original | None) -> str:
    if spec.subject is not None:
        return spec.subject
    return reply_subject(answers.subject) if answers is not None else ""


# Gmail --------------------------------------------------------------------------------------------------
def _gmail_original(state: SandboxState, mailbox: gmail.Mailbox, message_ref: str) -> Original:
    with state.lock:
        stored = mailbox.messages.get(message_ref)
    if stored is None:
        raise _unknown_message(message_ref, mailbox.address)
    return Original.of(stored.raw)


@control_route("/gmail/messages/send", methods=["POST"])
def control_gmail_send() -> Response:
    """The owner sends mail: it carries SENT (a messagesAdded record), in the thread of the mail it answers;
    sent to themselves, it is that one message with UNREAD and INBOX too (see the module docstring)."""
    spec = parse_body(SendIn)
    st = sandbox_state()
    mailbox = gmail.mailbox_get(st, _bare(spec.address))
    if mailbox is None:
        raise _unknown_mailbox(spec.address, "Gmail")
    answers = _gmail_original(st, mailbox, spec.in_reply_to) if spec.in_reply_to else None
    targets = _copy_targets(st, spec.deliver_to)
    when = spec.sent_at or datetime.now(UTC)
    raw = compose(
        sender=mailbox.address,
        to=spec.to,
        cc=spec.cc,
        subject=_subject(spec, answers),
        body=spec.body,
        date=when,
        message_id=message_id("mail.gmail.com"),
        answers=answers,
    )
    to_self = _addressed_to(spec, mailbox.address)
    labels = TO_SELF_LABELS if to_self else ["SENT"]
    stored = gmail.message_deliver(st, mailbox.address, raw, labels=labels, internal_date=when)
    own = [{"address": mailbox.address, "provider": "gmail", "id": stored.id, "threadId": stored.thread_id}]
    others = [target for target in targets if target != (mailbox.address, "gmail")]
    answer = {
        "id": stored.id,
        "threadId": stored.thread_id,
        "historyId": str(stored.history_id),
        "messageId": stored.message_id_header,
        "labelIds": list(stored.label_ids),
        "delivered": (own if to_self else []) + _deliver_copies(st, raw, others, when),
    }
    return json_response(answer, 201)


@control_route("/gmail/messages/reply", methods=["POST"])
def control_gmail_reply() -> Response:
    """Someone's reply to message `id` arrives in the inbox (INBOX, UNREAD), in that message's thread."""
    spec = parse_body(ReplyIn)
    st = sandbox_state()
    mailbox = gmail.mailbox_get(st, _bare(spec.address))
    if mailbox is None:
        raise _unknown_mailbox(spec.address, "Gmail")
    answers = _gmail_original(st, mailbox, spec.id)
    when = spec.received_at or datetime.now(UTC)
    raw = compose(
        sender=spec.sender,
        to=spec.to or [mailbox.address],
        cc=spec.cc,
        subject=reply_subject(answers.subject),
        body=spec.body,
        date=when,
        message_id=message_id(_bare(spec.sender).partition("@")[2]),
        answers=answers,
    )
    stored = gmail.message_deliver(st, mailbox.address, raw, internal_date=when)
    answer = {
        "id": stored.id,
        "threadId": stored.thread_id,
        "historyId": str(stored.history_id),
        "messageId": stored.message_id_header,
    }
    return json_response(answer, 201)


# Outlook ------------------------------------------------------------------------------------------------
def _graph_original(state: SandboxState, mailbox: graph.OutlookMailbox, message_ref: str) -> Original:
    with state.lock:
        message = graph.message_find(mailbox, message_ref)
        if message is None:
            raise _unknown_message(message_ref, mailbox.address)
        return Original.from_headers(
            message_id=message.internet_message_id,
            references=graph.header_value(message, "References"),
            in_reply_to=graph.header_value(message, "In-Reply-To"),
            subject=message.subject,
        )


@control_route("/graph/messages/send", methods=["POST"])
def control_graph_send() -> Response:
    """The owner sends mail: it lands, read, in sentitems, in the conversation of the mail it answers; sent to
    themselves, a second item arrives, unread, in their inbox (see the module docstring)."""
    spec = parse_body(SendIn)
    st = sandbox_state()
    mailbox = graph.mailbox_get(st, _bare(spec.address))
    if mailbox is None:
        raise _unknown_mailbox(spec.address, "Outlook")
    answers = _graph_original(st, mailbox, spec.in_reply_to) if spec.in_reply_to else None
    targets = _copy_targets(st, spec.deliver_to)
    when = spec.sent_at or datetime.now(UTC)
    raw = compose(
        sender=formataddr((mailbox.display_name, mailbox.address)),
        to=spec.to,
        cc=spec.cc,
        subject=_subject(spec, answers),
        body=spec.body,
        date=when,
        message_id=message_id("sandbox.outlook.test"),
        answers=answers,
    )
    message = graph.message_deliver_rfc822(st, mailbox.address, raw, received=when, is_read=True, folder="sentitems")
    own = []
    if _addressed_to(spec, mailbox.address):
        inbox_copy = graph.message_deliver_rfc822(st, mailbox.address, raw, received=when)
        own = [{"address": mailbox.address, "provider": "outlook", **graph.delivered_answer(inbox_copy)}]
    others = [target for target in targets if target != (mailbox.address, "outlook")]
    answer = {**graph.delivered_answer(message), "delivered": own + _deliver_copies(st, raw, others, when)}
    return json_response(answer, 201)


@control_route("/graph/messages/reply", methods=["POST"])
def control_graph_reply() -> Response:
    """Someone's reply to message `id` arrives in the inbox, unread, in that message's conversation."""
    spec = parse_body(ReplyIn)
    st = sandbox_state()
    mailbox = graph.mailbox_get(st, _bare(spec.address))
    if mailbox is None:
        raise _unknown_mailbox(spec.address, "Outlook")
    answers = _graph_original(st, mailbox, spec.id)
    when = spec.received_at or datetime.now(UTC)
    raw = compose(
        sender=spec.sender,
        to=spec.to or [formataddr((mailbox.display_name, mailbox.address))],
        cc=spec.cc,
        subject=reply_subject(answers.subject),
        body=spec.body,
        date=when,
        message_id=message_id(_bare(spec.sender).partition("@")[2]),
        answers=answers,
    )
    message = graph.message_deliver_rfc822(st, mailbox.address, raw, received=when)
    return json_response(graph.delivered_answer(message), 201)
