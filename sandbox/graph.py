"""Microsoft Graph v1.0 mail, as far as Tasklift reads it (reference §B): /me, mail folders by well-known name or
id, message delta of any folder, messages by id and JSON $batch. Served under /v1.0 on the sandbox's HTTPS
listener; the links it hands out point there. Subscriptions (change notifications) live in
sandbox/graph_subscriptions.py and sandbox/graph_notifications.py; every message change below is reported there.

Delta works like Graph's: the query options of the first request ($select, $filter on receivedDateTime) are
encoded in the state tokens, so later requests just replay the absolute `@odata.nextLink` (…?$skiptoken=) and
`@odata.deltaLink` (…?$deltatoken=). A round's items are snapshotted when its first page is asked for, so mail
arriving while a client pages lands in the next round. A deltaLink round returns what changed since: new
messages, messages whose isRead or flag changed (again, with the selected fields) and `@removed` entries for
deleted or moved-out ones. Expiring a mailbox's delta state (control route) makes every older token a 410.
$select accepts every property of msgraph-sdk's Message model (its OutlookItem and Entity ones included) and
refuses any other name with live Graph's 400 (`RequestBroker--ParseUri`).

Conversations: a message joins the conversation (`conversationId`) of an earlier message of the mailbox that
its In-Reply-To or References names, or that has its own Message-ID (another copy of the same mail, as the inbox
copy of mail the owner sent to themselves), in whatever folder, so a reply in the inbox and the mail it answers
in `sentitems` share one. Exchange's own rule (the Thread-Index header, the conversation topic) is not
documented for Graph; the sandbox threads by the references alone, without Gmail's subject test (inferred). Its
`conversationIndex` (PidTagConversationIndex, base64) is laid out as [MS-OXOMSG] 2.2.1.3 says: the Thread-Index
header it came with, else the index of the message it answers plus a 5-byte response level, else a new 22-byte
header. Mail the owner sends (control route) lands in `sentitems`, read, with `from` the owner, and has its own
delta like any folder; mail they send to themselves also arrives, as a second item, in their inbox (Exchange
keeps a copy in each folder, unlike Gmail's one message with two labels).

Folders: every message lives in one folder (a well-known name such as inbox, archive, junkemail,
deleteditems, or any other name). `GET /me/mailFolders/{name|id}` (and `mailFolders('…')`) answers the
mailFolder resource with the properties of msgraph-sdk's MailFolder (id, displayName, parentFolderId, the
counts, isHidden); the well-known folders sit under `msgfolderroot` ("Top of Information Store"). Delta works
per folder, as Graph's does: a message moved into a folder is a new item of that folder's next round (if the
round's persisted $filter admits its receivedDateTime, which a move never changes), and an `@removed` entry of
the folder it left.

Ids: every message has one key, shown as an immutable id ("AAkALg…") when the request says
`Prefer: IdType="ImmutableId"` and as a REST id ("AAMkAG…") otherwise, so a test can tell the header was
honoured; both forms open the message. As at Graph, the REST id changes when the message moves (the old
one then answers 404); the immutable id never does.

$batch parts are dispatched through the whole app (a WSGI call in a fresh context), so each inner request is
logged (marked `batch_part`) and fault-checked as "GET /v1.0/me/messages/ID?$select=…", like a Gmail batch part.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import email
import email.policy
import html
import json
import re
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, formataddr, getaddresses, parseaddr, parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote

from flask import Blueprint, Response, current_app, g, request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.graph_notifications import MessageChange, message_changed
from sandbox.microsoft import access_token_lookup, account_oid, display_name, tls_base_url
from sandbox.state import SandboxState

blueprint = Blueprint("graph", __name__, url_prefix="/v1.0")

MAX_BATCH_REQUESTS = 20
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 1000
KEPT_SNAPSHOTS = 256  # rounds whose skip tokens still work (per mailbox); older ones answer 410
IMMUTABLE_PREFIX = "AAkALgAAAAAAHYQDEapmEc2byACqAC-EWg0A"
REST_PREFIX = "AAMkAGVmMDEzMTM4LTZmYWUtNDdkNC1hMDZiLTU1OGY5OTZhYmY4OABGAAAAAA"
CONVERSATION_PREFIX = "AAQkAGVmMDEzMTM4LTZmYWUtNDdkNC1hMDZiLTU1OGY5OTZhYmY4OAAQA"
WELL_KNOWN_FOLDERS = frozenset(
    {"inbox", "drafts", "sentitems", "deleteditems", "junkemail", "archive", "outbox", "clutter", "msgfolderroot"}
)
# The display names an English mailbox gives its well-known folders (Graph answers them in the mailbox's locale).
FOLDER_DISPLAY_NAMES = {
    "inbox": "Inbox",
    "drafts": "Drafts",
    "sentitems": "Sent Items",
    "deleteditems": "Deleted Items",
    "junkemail": "Junk Email",
    "archive": "Archive",
    "outbox": "Outbox",
    "clutter": "Clutter",
    "msgfolderroot": "Top of Information Store",
}
FLAG_STATUSES = ("notFlagged", "flagged", "complete")
_BATCH_PART = "sandbox.graph_batch_part"  # WSGI environ key of an inner request of a $batch
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_FILTER = re.compile(r"^\s*receivedDateTime\s+(ge|gt)\s+(\S+)\s*$", re.IGNORECASE)
_DELTA_PATH = re.compile(r"^mailfolders(?:/([^/()']+)|\('([^']+)'\))/messages/delta$", re.IGNORECASE)
_FOLDER_PATH = re.compile(r"^mailfolders(?:/([^/()']+)|\('([^']+)'\))$", re.IGNORECASE)
_MESSAGE_PATH = re.compile(r"^messages(?:/([^/()']+)|\('([^']+)'\))$", re.IGNORECASE)


# Storage ---------------------------------------------------------------------------------------------
@dataclass
class GraphMessage:
    key: str
    subject: str
    sender: tuple[str, str]  # (name, address)
    to: list[tuple[str, str]]
    cc: list[tuple[str, str]]
    received: datetime
    sent: datetime
    body_type: str  # "html" | "text", as it was delivered
    body: str
    internet_message_id: str
    conversation_key: str
    has_attachments: bool
    created_seq: int
    changed_seq: int
    change_key: str
    modified: datetime
    is_read: bool = False
    flag: str = "notFlagged"
    folder: str = "inbox"  # a well-known folder name, or the (lower-cased) name of another folder
    rest_key: str = ""  # the REST id's key: the key until the message first moves, a new one after each move
    entered_seq: int = 0  # when it came into its folder: a delta watermark below this never saw it there
    # Its internet headers (name, value) as delivered: internetMessageHeaders, sent only when selected.
    headers: list[tuple[str, str]] = field(default_factory=list)
    inference: str = "focused"  # inferenceClassification: "focused" | "other"
    reply_to: list[tuple[str, str]] = field(default_factory=list)  # its Reply-To header's addresses: replyTo
    conversation_index: bytes = b""  # conversationIndex (PidTagConversationIndex)

    def rest_id(self) -> str:
        return f"{REST_PREFIX}{self.rest_key or self.key}"


@dataclass
class Departure:
    """A message that left `folder` (deleted, or moved elsewhere) at `seq`: an @removed entry of that folder."""

    seq: int
    key: str
    rest_id: str
    folder: str
    entered_seq: int
    received: datetime
    reason: str  # "deleted" | "changed"


@dataclass
class Entry:
    """One item of a delta round: a message as it is when the page is read, or its @removed entry."""

    key: str
    removed: bool = False
    rest_id: str = ""
    reason: str = "deleted"


@dataclass
class Snapshot:
    """The items of one delta round, fixed when its first page was asked for; `upto` is its watermark."""

    entries: list[Entry]
    upto: int


@dataclass
class OutlookMailbox:
    address: str
    display_name: str
    inbox_id: str
    messages: dict[str, GraphMessage] = field(default_factory=dict)  # every folder's
    departures: list[Departure] = field(default_factory=list)
    folder_ids: dict[str, str] = field(default_factory=dict)  # folder name -> id, made when first used
    seq: int = 0  # rises on every change; delta tokens carry the value they saw
    generation: int = 1  # the delta state's generation: older tokens answer 410
    snapshots: dict[str, Snapshot] = field(default_factory=dict)


def _mailboxes(state: SandboxState) -> dict[str, OutlookMailbox]:
    mailboxes: dict[str, OutlookMailbox] = state.data.setdefault("graph", {})
    return mailboxes


def mailbox_addresses(state: SandboxState) -> list[str]:
    with state.lock:
        return list(_mailboxes(state))


def mailbox_ensure(state: SandboxState, address: str, name: str | None = None) -> OutlookMailbox:
    """The Outlook mailbox of `address`, created empty if missing (every Microsoft account has one)."""
    address = address.lower()
    with state.lock:
        mailboxes = _mailboxes(state)
        if address not in mailboxes:
            inbox_id = "AQMkADAwATM0MDAAMS1iNTcwLWI2NTEtMDACLTAwCgAuAAAD" + _key(24)
            mailboxes[address] = OutlookMailbox(address, name or display_name(address), inbox_id)
        return mailboxes[address]


def _key(length: int = 32) -> str:
    return secrets.token_urlsafe(length)[:length].replace("-", "A").replace("_", "B")


def _now() -> datetime:
    return datetime.now(UTC)


def _change_key() -> str:
    return "CQAAABYAAAA" + _key(20)


def message_add(
    state: SandboxState,
    address: str,
    *,
    subject: str,
    sender: tuple[str, str],
    body: str,
    body_type: str,
    to: list[tuple[str, str]] | None = None,
    cc: list[tuple[str, str]] | None = None,
    received: datetime | None = None,
    sent: datetime | None = None,
    internet_message_id: str | None = None,
    in_reply_to: list[str] | None = None,
    has_attachments: bool = False,
    is_read: bool = False,
    folder: str = "inbox",
    headers: list[tuple[str, str]] | None = None,
    inference: str = "focused",
    reply_to: list[tuple[str, str]] | None = None,
) -> GraphMessage:
    """Deliver a message into `folder` (default the inbox) of `address` (created if missing); it shows in that
    folder's next delta round. receivedDateTime is `received`, else now. `headers` are its internet headers
    (an RFC 822 delivery's own); without them it gets From, To, Subject, Date and Message-ID ones."""
    received = (received or _now()).astimezone(UTC).replace(microsecond=0)
    with state.lock:
        mailbox = mailbox_ensure(state, address)
        joined = next(
            (
                earlier
                for earlier in mailbox.messages.values()
                if (in_reply_to and earlier.internet_message_id in in_reply_to)
                or (internet_message_id and earlier.internet_message_id == internet_message_id)
            ),
            None,
        )
        mailbox.seq += 1
        key = _key()
        recipients = list(to or [(mailbox.display_name, mailbox.address)])
        internet_id = internet_message_id or f"<{uuid.uuid4().hex}@sandbox.outlook.test>"
        if headers is None:
            headers = [
                ("From", formataddr(sender)),
                ("To", ", ".join(formataddr(r) for r in recipients)),
                ("Subject", subject),
                ("Date", format_datetime((sent or received).astimezone(UTC))),
                ("Message-ID", internet_id),
            ]
        message = GraphMessage(
            key=key,
            subject=subject,
            sender=sender,
            to=recipients,
            cc=list(cc or []),
            received=received,
            sent=(sent or received).astimezone(UTC).replace(microsecond=0),
            body_type=body_type,
            body=body,
            internet_message_id=internet_id,
            conversation_key=joined.conversation_key if joined else _key(),
            has_attachments=has_attachments,
            created_seq=mailbox.seq,
            changed_seq=mailbox.seq,
            change_key=_change_key(),
            modified=received,  # as if it arrived then: a message is created, then changed (read, moved) later
            is_read=is_read,
            folder=folder_name(folder),
            rest_key=key,
            entered_seq=mailbox.seq,
            headers=list(headers),
            inference=inference,
            reply_to=list(reply_to or []),
            conversation_index=_conversation_index(headers, joined, internet_id, received),
        )
        mailbox.messages[key] = message
        _notify(state, mailbox, message, "created")
        return message


_FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)


def _conversation_index(
    headers: list[tuple[str, str]], joined: GraphMessage | None, internet_id: str, received: datetime
) -> bytes:
    """PidTagConversationIndex as [MS-OXOMSG] 2.2.1.3 lays it out: the Thread-Index header when the mail has a
    readable one; the index of another copy of the same mail; the answered message's index plus a 5-byte
    response level (DeltaCode 0, the 31 bits above the 18 lowest of the FILETIME difference, a random and a
    sequence nibble); else a new 22-byte header (0x01, the FILETIME without its 24 lowest bits, a GUID)."""
    thread_index = next((value for name, value in headers if name.lower() == "thread-index"), "")
    try:
        given = base64.b64decode(thread_index.strip(), validate=True) if thread_index else b""
    except (binascii.Error, ValueError):
        given = b""
    if len(given) >= 22 and (len(given) - 22) % 5 == 0:
        return given
    ticks = int((received - _FILETIME_EPOCH).total_seconds() * 10_000_000)
    if joined is not None and joined.conversation_index:
        if joined.internet_message_id == internet_id:
            return joined.conversation_index
        since = max(ticks - int((joined.received - _FILETIME_EPOCH).total_seconds() * 10_000_000), 0)
        level = ((since >> 18) & 0x7FFFFFFF).to_bytes(4, "big") + bytes([secrets.randbits(4) << 4])
        return joined.conversation_index + level
    return b"\x01" + (ticks >> 24).to_bytes(5, "big") + uuid.uuid4().bytes


def _notify(
    state: SandboxState, mailbox: OutlookMailbox, message: GraphMessage, kind: str, *, left: Departure | None = None
) -> None:
    """Tell the subscriptions of `kind` of change to `message` (a move names the folder it left)."""
    message_changed(
        state,
        MessageChange(
            address=mailbox.address,
            kind=kind,
            folder=message.folder,
            immutable_id=message_id(message, immutable=True),
            rest_id=message.rest_id(),
            change_key=message.change_key,
            left=left.folder if left else None,
            left_rest_id=left.rest_id if left else None,
        ),
    )


def folder_name(ref: str) -> str:
    """The folder a control call names: well-known names in any case, other names as given, lower-cased."""
    return ref.strip().lower()


def folder_id(mailbox: OutlookMailbox, name: str) -> str:
    """The id of folder `name` (the inbox's is the mailbox's inbox_id), made on first use."""
    if name == "inbox":
        return mailbox.inbox_id
    if name not in mailbox.folder_ids:
        mailbox.folder_ids[name] = "AQMkADAwATM0MDAAMS1iNTcwLWI2NTEtMDACLTAwCgAuAAAD" + _key(24)
    return mailbox.folder_ids[name]


def folder_of_ref(mailbox: OutlookMailbox, ref: str) -> str | None:
    """The folder a Graph URL names: a well-known name (any case), or a folder id; None if unknown."""
    if ref == mailbox.inbox_id or ref.lower() == "inbox":
        return "inbox"
    if ref.lower() in WELL_KNOWN_FOLDERS:
        return ref.lower()
    return next((name for name, known in mailbox.folder_ids.items() if known == ref), None)


def _address_pair(value: str) -> tuple[str, str]:
    name, address = parseaddr(value)
    return name, address or value


def message_deliver_rfc822(
    state: SandboxState,
    address: str,
    raw: bytes,
    *,
    received: datetime | None = None,
    is_read: bool = False,
    folder: str = "inbox",
    inference: str = "focused",
) -> GraphMessage:
    """Deliver an RFC 822 message as Graph stores it: the HTML alternative as an html body when there is one,
    else the text one. receivedDateTime is `received`, else now (the arrival time, as at Graph: never the
    Date header, which gives sentDateTime)."""
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(preferencelist=("html", "plain"))
    body, body_type = "", "text"
    if part is not None:
        try:
            body = str(part.get_content())
        except (LookupError, ValueError):  # an unknown charset: undecoded text is what Outlook would show
            payload = part.get_payload(decode=True)
            body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
        body_type = "html" if part.get_content_type() == "text/html" else "text"
    date: datetime | None = None
    if parsed.get("Date"):
        try:
            date = parsedate_to_datetime(str(parsed["Date"]))
        except (TypeError, ValueError):
            date = None
        if date is not None and date.tzinfo is None:
            date = date.replace(tzinfo=UTC)
    references = f"{parsed.get('In-Reply-To', '')} {parsed.get('References', '')}".split()
    return message_add(
        state,
        address,
        subject=str(parsed.get("Subject", "")),
        sender=_address_pair(str(parsed.get("From", ""))),
        to=[(n, a) for n, a in getaddresses([str(v) for v in parsed.get_all("To", [])]) if a] or None,
        cc=[(n, a) for n, a in getaddresses([str(v) for v in parsed.get_all("Cc", [])]) if a],
        body=body,
        body_type=body_type,
        received=received,
        sent=date,
        internet_message_id=str(parsed.get("Message-ID", "")).strip() or None,
        in_reply_to=references,
        has_attachments=any(True for _ in parsed.iter_attachments()),
        is_read=is_read,
        folder=folder,
        headers=[(str(name), str(value)) for name, value in parsed.items()],
        inference=inference,
        reply_to=[(n, a) for n, a in getaddresses([str(v) for v in parsed.get_all("Reply-To", [])]) if a],
    )


def mailbox_get(state: SandboxState, address: str) -> OutlookMailbox | None:
    with state.lock:
        return _mailboxes(state).get(address.lower())


def header_value(message: GraphMessage, name: str) -> str:
    """The first internet header `name` of `message` (any case), or ""."""
    return next((value for key, value in message.headers if key.lower() == name.lower()), "")


def message_find(mailbox: OutlookMailbox, message_id: str) -> GraphMessage | None:
    """The message an immutable id, or its current REST id, names (a REST id from before a move: None)."""
    if message_id.startswith(IMMUTABLE_PREFIX):
        return mailbox.messages.get(message_id[len(IMMUTABLE_PREFIX) :])
    if message_id.startswith(REST_PREFIX):
        rest_key = message_id[len(REST_PREFIX) :]
        return next((m for m in mailbox.messages.values() if (m.rest_key or m.key) == rest_key), None)
    return None


def messages_update(
    state: SandboxState, address: str, ids: list[str], *, is_read: bool | None = None, flag: str | None = None
) -> int:
    """Change isRead and/or the flag of messages (by either id form); each change shows in the next delta."""
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        found = [message_find(mailbox, i) for i in ids]
        missing = [i for i, m in zip(ids, found, strict=True) if m is None]
        if missing:
            raise KeyError(missing[0])
        for message in found:
            assert message is not None
            mailbox.seq += 1
            if is_read is not None:
                message.is_read = is_read
            if flag is not None:
                message.flag = flag
            message.changed_seq = mailbox.seq
            message.change_key = _change_key()
            message.modified = _now()
            _notify(state, mailbox, message, "updated")
        return len(found)


def _depart(mailbox: OutlookMailbox, message: GraphMessage, reason: str) -> Departure:
    departure = Departure(
        mailbox.seq, message.key, message.rest_id(), message.folder, message.entered_seq, message.received, reason
    )
    mailbox.departures.append(departure)
    return departure


def messages_remove(state: SandboxState, address: str, ids: list[str]) -> int:
    """Delete messages for good: the next delta of their folder lists them as @removed (reason deleted)."""
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        found = [message_find(mailbox, i) for i in ids]
        missing = [i for i, m in zip(ids, found, strict=True) if m is None]
        if missing:
            raise KeyError(missing[0])
        for message in found:
            assert message is not None
            if message.key not in mailbox.messages:
                continue  # named twice
            mailbox.seq += 1
            del mailbox.messages[message.key]
            _depart(mailbox, message, "deleted")
            _notify(state, mailbox, message, "deleted")
        return len({m.key for m in found if m is not None})


def messages_move(
    state: SandboxState, address: str, ids: list[str], folder: str, *, removed_reason: str = "deleted"
) -> list[GraphMessage]:
    """Move messages to `folder`, as POST /messages/{id}/move does: receivedDateTime stays, the REST id
    changes, the immutable id does not. The folder left lists each as @removed (`removed_reason`) in its
    next delta; the folder entered lists it as a new item. Moving a message to its own folder does nothing."""
    target = folder_name(folder)
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        found = [message_find(mailbox, i) for i in ids]
        missing = [i for i, m in zip(ids, found, strict=True) if m is None]
        if missing:
            raise KeyError(missing[0])
        moved: list[GraphMessage] = []
        for message in found:
            assert message is not None
            if message.folder == target:
                if all(m.key != message.key for m in moved):
                    moved.append(message)
                continue
            mailbox.seq += 1
            departure = _depart(mailbox, message, removed_reason)
            message.folder = target
            message.rest_key = _key()
            message.entered_seq = message.changed_seq = mailbox.seq
            message.change_key = _change_key()
            message.modified = _now()
            _notify(state, mailbox, message, "moved", left=departure)
            moved.append(message)
        return moved


def delta_expire(state: SandboxState, address: str) -> int:
    """Drop the mailbox's delta state: every earlier skip or delta token now answers 410 SyncStateNotFound."""
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        mailbox.generation += 1
        mailbox.snapshots.clear()
        return mailbox.generation


# Ids and rendering -------------------------------------------------------------------------------------
def message_id(message: GraphMessage, *, immutable: bool) -> str:
    return f"{IMMUTABLE_PREFIX}{message.key}" if immutable else message.rest_id()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _recipient(pair: tuple[str, str]) -> dict[str, Any]:
    return {"emailAddress": {"name": pair[0] or pair[1], "address": pair[1]}}


def html_to_text(markup: str) -> str:
    """Roughly what Outlook's text rendering of an HTML body gives: blocks on their own lines, no tags."""
    text = re.sub(r"(?is)<(style|script|head)\b.*?</\1\s*>", "", markup)
    text = re.sub(r"(?i)<br\s*/?>", "\n", text)
    text = re.sub(r"(?i)</(p|div|li|tr|h[1-6]|table|blockquote)\s*>", "\n", text)
    text = re.sub(r"(?i)<li\b[^>]*>", "- ", text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\xa0", " ")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _text_to_html(text: str) -> str:
    escaped = html.escape(text).replace("\n", "<br>\r\n")
    head = '<head>\r\n<meta http-equiv="Content-Type" content="text/html; charset=utf-8"></head>'
    return f"<html>{head}<body>{escaped}</body></html>"


def _web_link(message: GraphMessage) -> str:
    # Graph's webLink carries the REST id whatever IdType the request asked for.
    item_id = quote(message.rest_id(), safe="")
    return f"https://outlook.office365.com/owa/?ItemID={item_id}&exvsurl=1&viewmodel=ReadMessageItem"


MESSAGE_FIELDS = (
    "createdDateTime",
    "lastModifiedDateTime",
    "changeKey",
    "categories",
    "receivedDateTime",
    "sentDateTime",
    "hasAttachments",
    "internetMessageId",
    "subject",
    "bodyPreview",
    "importance",
    "parentFolderId",
    "conversationId",
    "conversationIndex",
    "isDeliveryReceiptRequested",
    "isReadReceiptRequested",
    "isRead",
    "isDraft",
    "webLink",
    "inferenceClassification",
    "body",
    "sender",
    "from",
    "toRecipients",
    "ccRecipients",
    "bccRecipients",
    "replyTo",
    "flag",
)
# Fields Graph sends only when $select names them. uniqueBody is the body as the sandbox keeps it (Exchange
# would leave out the quoted history it recognises).
SELECT_ONLY_FIELDS = ("internetMessageHeaders", "uniqueBody")
# Navigation properties of message: a $select may name them (they are properties of the type), but their
# content comes only with $expand, which the sandbox does not serve.
NAVIGATION_FIELDS = ("attachments", "extensions", "singleValueExtendedProperties", "multiValueExtendedProperties")
# Every property of message in msgraph-sdk's models (Message, OutlookItem, Entity): what $select accepts.
_FIELD_NAMES = {name.lower(): name for name in ("id", *MESSAGE_FIELDS, *SELECT_ONLY_FIELDS, *NAVIGATION_FIELDS)}


def message_resource(
    mailbox: OutlookMailbox, message: GraphMessage, *, select: list[str] | None, immutable: bool, body_format: str
) -> dict[str, Any]:
    """The Graph message resource; `select` (canonical names) limits it to id, @odata.etag and those fields."""
    wanted = set(select) if select else set(MESSAGE_FIELDS)
    text = message.body if message.body_type == "text" else html_to_text(message.body)
    values: dict[str, Any] = {
        "createdDateTime": _iso(message.received),
        "lastModifiedDateTime": _iso(message.modified),
        "changeKey": message.change_key,
        "categories": [],
        "receivedDateTime": _iso(message.received),
        "sentDateTime": _iso(message.sent),
        "hasAttachments": message.has_attachments,
        "internetMessageId": message.internet_message_id,
        "subject": message.subject,
        "bodyPreview": " ".join(text.split())[:255],
        "importance": "normal",
        "parentFolderId": folder_id(mailbox, message.folder),
        "conversationId": CONVERSATION_PREFIX + message.conversation_key,
        "conversationIndex": base64.b64encode(message.conversation_index).decode(),
        "isDeliveryReceiptRequested": False,
        "isReadReceiptRequested": False,
        "isRead": message.is_read,
        "isDraft": False,
        "webLink": _web_link(message),
        "inferenceClassification": message.inference,
        "sender": _recipient(message.sender),
        "from": _recipient(message.sender),
        "toRecipients": [_recipient(r) for r in message.to],
        "ccRecipients": [_recipient(r) for r in message.cc],
        "bccRecipients": [],
        "replyTo": [_recipient(r) for r in message.reply_to],
        "flag": {"flagStatus": message.flag},
    }
    if "body" in wanted or "uniqueBody" in wanted:
        if body_format == "text" and message.body_type == "html":
            body = {"contentType": "text", "content": text}
        elif body_format == "html" and message.body_type == "text":
            body = {"contentType": "html", "content": _text_to_html(message.body)}
        else:
            body = {"contentType": message.body_type, "content": message.body}
        values["body"] = body
    resource: dict[str, Any] = {
        "@odata.etag": f'W/"{message.change_key}"',
        "id": message_id(message, immutable=immutable),
    }
    resource.update({name: values[name] for name in MESSAGE_FIELDS if name in wanted})
    if "internetMessageHeaders" in wanted:
        resource["internetMessageHeaders"] = [{"name": name, "value": value} for name, value in message.headers]
    if "uniqueBody" in wanted:
        resource["uniqueBody"] = values["body"]
    return resource


# Errors, auth and preferences -------------------------------------------------------------------------
class GraphError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def error_body(code: str, message: str) -> dict[str, Any]:
    """Graph's error shape: {"error": {"code", "message", "innerError": {date, request-id, client-request-id}}};
    the date without an offset, as live Graph writes it ("2026-03-05T14:15:53")."""
    request_id = g.get("graph_request_id") or str(uuid.uuid4())
    return {
        "error": {
            "code": code,
            "message": message,
            "innerError": {
                "date": _now().strftime("%Y-%m-%dT%H:%M:%S"),
                "request-id": request_id,
                "client-request-id": request.headers.get("client-request-id", request_id),
            },
        }
    }


@blueprint.errorhandler(GraphError)
def graph_error(error: GraphError) -> Response:
    return json_response(error_body(error.code, error.message), error.status, error.headers)


def _bad_request(message: str, code: str = "BadRequest") -> GraphError:
    return GraphError(400, code, message)


def _not_found() -> GraphError:
    return GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")


def mailbox_of_request() -> OutlookMailbox:
    """The mailbox the request's Bearer token opens, or Graph's 401."""
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    challenge = {
        "WWW-Authenticate": 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/'
        'authorize", client_id="00000003-0000-0000-c000-000000000000"'
    }
    if not token:
        raise GraphError(401, "InvalidAuthenticationToken", "Access token is empty.", challenge)
    st = sandbox_state()
    address, why = access_token_lookup(st, token)
    if address is None:
        message = (
            "Lifetime validation failed, the token is expired."
            if why == "expired"
            else "IDX14100: JWT is not well formed, there are no dots (.)."
        )
        raise GraphError(401, "InvalidAuthenticationToken", message, challenge)
    return mailbox_ensure(st, address)


@dataclass
class Preferences:
    page_size: int | None = None
    immutable: bool = False
    body_format: str = ""  # "", "text" or "html"
    applied: list[str] = field(default_factory=list)

    def header(self) -> dict[str, str]:
        return {"Preference-Applied": ", ".join(self.applied)} if self.applied else {}


def request_preferences() -> Preferences:
    """The Prefer header(s): comma-separated in one header, or repeated headers (RFC 7240)."""
    prefs = Preferences()
    for header in request.headers.getlist("Prefer"):
        for item in header.split(","):
            name, _, value = item.strip().partition("=")
            name, value = name.strip().lower(), value.strip().strip('"')
            if name == "odata.maxpagesize" and value.isdigit() and int(value) >= 1:
                prefs.page_size = min(int(value), MAX_PAGE_SIZE)
                prefs.applied.append(f"odata.maxpagesize={prefs.page_size}")
            elif name == "idtype" and value.lower() == "immutableid":
                prefs.immutable = True
                prefs.applied.append('IdType="ImmutableId"')
            elif name == "outlook.body-content-type" and value.lower() in ("text", "html"):
                prefs.body_format = value.lower()
                prefs.applied.append(f'outlook.body-content-type="{prefs.body_format}"')
    return prefs


def _select() -> list[str] | None:
    """The message properties a $select names (canonical names, `id` left out: it is always sent). A name
    that is no property of message is refused as Outlook's request broker does (body captured from live Graph,
    e.g. for `messageClass`: code RequestBroker--ParseUri, the type named by its Outlook REST name)."""
    value = request.args.get("$select")
    if value is None:
        return None
    chosen = []
    for raw in value.split(","):
        name = raw.strip()
        canonical = _FIELD_NAMES.get(name.lower())
        if canonical is None:
            raise _bad_request(
                f"Could not find a property named '{name}' on type 'Microsoft.OutlookServices.Message'.",
                "RequestBroker--ParseUri",
            )
        if canonical != "id":
            chosen.append(canonical)
    return chosen


@blueprint.before_request
def request_ids() -> None:
    g.graph_request_id = str(uuid.uuid4())


@blueprint.after_request
def graph_headers(response: Response) -> Response:
    """request-id headers like Graph's; and mark the log entry of a $batch part, so the log tells HTTP
    requests from batch parts (after_request: it also runs when a fault answered before the route did)."""
    request_id = g.get("graph_request_id") or str(uuid.uuid4())
    response.headers.setdefault("request-id", request_id)
    response.headers.setdefault("client-request-id", request.headers.get("client-request-id", request_id))
    logged = g.get("logged")
    if logged is not None and request.environ.get(_BATCH_PART):
        logged.batch_part = True
    return response


# Delta ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeltaQuery:
    select: list[str] | None
    since: str | None  # ISO value of `receivedDateTime ge|gt`
    strict: bool  # gt rather than ge
    newest_first: bool

    def matches(self, received: datetime) -> bool:
        if self.since is None:
            return True
        since = datetime.fromisoformat(self.since)
        return received > since if self.strict else received >= since

    def as_dict(self) -> dict[str, Any]:
        return {"select": self.select, "since": self.since, "strict": self.strict, "desc": self.newest_first}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeltaQuery:
        return cls(data["select"], data["since"], bool(data["strict"]), bool(data["desc"]))

    def params(self) -> str:
        """The query string of the initial delta request this query came from."""
        parts = []
        if self.select:
            parts.append("$select=" + ",".join(self.select))
        if self.since:
            operator = "gt" if self.strict else "ge"
            parts.append("$filter=" + quote(f"receivedDateTime {operator} {self.since}", safe=":"))
        if self.newest_first:
            parts.append("$orderby=" + quote("receivedDateTime desc"))
        return "&".join(parts)


def _query_from_request() -> DeltaQuery:
    select = _select()
    since, strict = None, False
    value = request.args.get("$filter")
    if value is not None:
        match = _FILTER.match(value)
        if not match:
            raise _bad_request(
                f"Invalid filter clause: '{value}'. "
                "Delta on messages supports only receivedDateTime ge|gt <DateTimeOffset>."
            )
        try:
            moment = datetime.fromisoformat(match.group(2).strip("'"))
        except ValueError as exc:
            raise _bad_request(f"The DateTimeOffset '{match.group(2)}' is not valid.") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        since, strict = moment.astimezone(UTC).isoformat(), match.group(1).lower() == "gt"
    orderby = request.args.get("$orderby")
    if orderby is not None and " ".join(orderby.split()).lower() != "receiveddatetime desc":
        raise _bad_request("Delta on messages supports only $orderby=receivedDateTime desc.")
    return DeltaQuery(select, since, strict, orderby is not None)


def _token_encode(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).rstrip(b"=").decode()


@dataclass(frozen=True)
class StateToken:
    """What a skip or delta token carries: the mailbox, the query, the generation, and either the round's
    snapshot and offset (skip) or the watermark (delta)."""

    address: str
    query: DeltaQuery
    generation: int
    snapshot: str = ""
    offset: int = 0
    watermark: int = 0


def _token_decode(value: str) -> StateToken:
    try:
        data = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
        return StateToken(
            address=str(data["a"]),
            query=DeltaQuery.from_dict(data["q"]),
            generation=int(data["g"]),
            snapshot=str(data.get("s", "")),
            offset=int(data.get("o", 0)),
            watermark=int(data.get("w", 0)),
        )
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise _bad_request(
            "Synchronization state data is corrupt or otherwise invalid.", "ErrorInvalidSyncStateData"
        ) from exc


def _links_base(folder_ref: str) -> str:
    return f"{tls_base_url()}/v1.0/me/mailFolders('{folder_ref}')/messages/delta"


def _sync_state_gone(mailbox: OutlookMailbox, generation: int, query: DeltaQuery, folder_ref: str) -> GraphError:
    return GraphError(
        410,
        "SyncStateNotFound",
        f"The sync state generation is not found; generation={generation};"
        f"[highest={mailbox.generation}][{mailbox.generation}].",
        {"Location": f"{tls_base_url()}/v1.0/me/mailFolders/{folder_ref}/messages/delta?{query.params()}"},
    )


def _initial_entries(mailbox: OutlookMailbox, folder: str, query: DeltaQuery) -> list[Entry]:
    chosen = sorted(
        (m for m in mailbox.messages.values() if m.folder == folder and query.matches(m.received)),
        key=lambda m: (m.received, m.created_seq),
        reverse=query.newest_first,
    )
    return [Entry(m.key) for m in chosen]


def _changed_entries(mailbox: OutlookMailbox, folder: str, query: DeltaQuery, since: int) -> list[Entry]:
    """What changed in `folder` after watermark `since`, in change order: messages new to it (delivered or
    moved in) or updated, and @removed entries for messages that left it (deleted or moved out). Mail the
    client never saw there (it came in after `since`, or the filter kept it out) leaves without a word."""
    events: list[tuple[int, Entry]] = [
        (m.changed_seq, Entry(m.key))
        for m in mailbox.messages.values()
        if m.folder == folder and m.changed_seq > since and query.matches(m.received)
    ]
    back = {entry.key for _, entry in events}  # left and came back: only its present state is news
    events += [
        (d.seq, Entry(d.key, removed=True, rest_id=d.rest_id, reason=d.reason))
        for d in mailbox.departures
        if d.folder == folder
        and d.seq > since
        and d.entered_seq <= since
        and d.key not in back
        and query.matches(d.received)
    ]
    return [entry for _, entry in sorted(events, key=lambda event: event[0])]


def _snapshot_store(mailbox: OutlookMailbox, snapshot: Snapshot) -> str:
    snapshot_id = _key(16)
    mailbox.snapshots[snapshot_id] = snapshot
    while len(mailbox.snapshots) > KEPT_SNAPSHOTS:
        del mailbox.snapshots[next(iter(mailbox.snapshots))]
    return snapshot_id


def _delta(folder_ref: str) -> Response:
    mailbox = mailbox_of_request()
    prefs = request_preferences()
    folder = folder_of_ref(mailbox, folder_ref)
    if folder is None:
        raise _not_found()
    top = request.args.get("$top")
    page_size = prefs.page_size or (min(int(top), MAX_PAGE_SIZE) if top and top.isdigit() and int(top) > 0 else None)
    page_size = page_size or DEFAULT_PAGE_SIZE
    skiptoken, deltatoken = request.args.get("$skiptoken"), request.args.get("$deltatoken")
    st = sandbox_state()
    with st.lock:
        token = _token_decode(skiptoken or deltatoken or "") if (skiptoken or deltatoken) else None
        if token is not None:
            query = token.query
            if token.address != mailbox.address:
                raise _bad_request("The sync state belongs to another mailbox.", "ErrorInvalidSyncStateData")
            if token.generation != mailbox.generation:
                raise _sync_state_gone(mailbox, token.generation, query, folder_ref)
        else:
            query = _query_from_request()
        if skiptoken and token is not None:
            snapshot_id, offset = token.snapshot, token.offset
            snapshot = mailbox.snapshots.get(snapshot_id)
            if snapshot is None:  # dropped from the cache: what Graph answers for a stale nextLink too
                raise _sync_state_gone(mailbox, token.generation, query, folder_ref)
        else:
            if token is not None:
                entries = _changed_entries(mailbox, folder, query, token.watermark)
            else:
                entries = _initial_entries(mailbox, folder, query)
            snapshot = Snapshot(entries, mailbox.seq)
            snapshot_id, offset = _snapshot_store(mailbox, snapshot), 0
        page = snapshot.entries[offset : offset + page_size]
        values = []
        for entry in page:
            message = mailbox.messages.get(entry.key)
            if entry.removed or message is None or message.folder != folder:
                # gone since the round began (a later round tells where): its last REST id, or the immutable one
                rest_id = entry.rest_id or (message.rest_id() if message else f"{REST_PREFIX}{entry.key}")
                values.append(
                    {
                        "@odata.type": "#microsoft.graph.message",
                        "id": f"{IMMUTABLE_PREFIX}{entry.key}" if prefs.immutable else rest_id,
                        "@removed": {"reason": entry.reason},
                    }
                )
                continue
            resource = message_resource(
                mailbox, message, select=query.select, immutable=prefs.immutable, body_format=prefs.body_format
            )
            values.append({"@odata.type": "#microsoft.graph.message", **resource})
        base = _links_base(folder_id(mailbox, folder))
        common = {"a": mailbox.address, "q": query.as_dict(), "g": mailbox.generation}
        answer: dict[str, Any] = {"@odata.context": f"{tls_base_url()}/v1.0/$metadata#Collection(message)"}
        if offset + page_size < len(snapshot.entries):
            next_token = _token_encode({**common, "s": snapshot_id, "o": offset + page_size})
            answer["@odata.nextLink"] = f"{base}?$skiptoken={next_token}"
        else:
            answer["@odata.deltaLink"] = f"{base}?$deltatoken={_token_encode({**common, 'w': snapshot.upto})}"
        answer["value"] = values
    return json_response(answer, 200, prefs.header())


# Routes ---------------------------------------------------------------------------------------------
@blueprint.get("/me")
def me() -> Response:
    mailbox = mailbox_of_request()
    name_parts = mailbox.display_name.split(" ", 1)
    return json_response(
        {
            "@odata.context": f"{tls_base_url()}/v1.0/$metadata#users/$entity",
            "businessPhones": [],
            "displayName": mailbox.display_name,
            "givenName": name_parts[0],
            "surname": name_parts[1] if len(name_parts) > 1 else None,
            "jobTitle": None,
            "mail": mailbox.address,
            "mobilePhone": None,
            "officeLocation": None,
            "preferredLanguage": "en-US",
            "userPrincipalName": mailbox.address,
            "id": account_oid(mailbox.address),
        }
    )


@blueprint.get("/me/<path:rest>")
def me_resource(rest: str) -> Response:
    delta = _DELTA_PATH.match(rest)
    if delta:
        return _delta(delta.group(1) or delta.group(2))
    folder = _FOLDER_PATH.match(rest)
    if folder:
        return _folder_get(folder.group(1) or folder.group(2))
    single = _MESSAGE_PATH.match(rest)
    if single:
        return _message_get(single.group(1) or single.group(2))
    raise _bad_request(f"Resource not found for the segment '{rest.split('/')[0]}'.")


# The properties of msgraph-sdk's MailFolder (and Entity's id); the navigation ones (childFolders, messages,
# messageRules, the extended properties) may be named in $select but come only with $expand.
FOLDER_FIELDS = ("displayName", "parentFolderId", "childFolderCount", "unreadItemCount", "totalItemCount", "isHidden")
_FOLDER_NAVIGATION = (
    "childFolders",
    "messages",
    "messageRules",
    "singleValueExtendedProperties",
    "multiValueExtendedProperties",
)
_FOLDER_FIELD_NAMES = {name.lower(): name for name in ("id", *FOLDER_FIELDS, *_FOLDER_NAVIGATION)}


def _folder_select() -> set[str]:
    """The mailFolder properties a $select names (all of them without one). An unknown name is the 400 Graph
    answers for folders (captured from live Graph, e.g. for `isRead` on a folder)."""
    value = request.args.get("$select")
    if value is None:
        return set(FOLDER_FIELDS)
    chosen = set()
    for raw in value.split(","):
        name = raw.strip()
        canonical = _FOLDER_FIELD_NAMES.get(name.lower())
        if canonical is None:
            raise _bad_request(
                "Parsing OData Select and Expand failed: "
                f"Could not find a property named '{name}' on type 'microsoft.graph.mailFolder'."
            )
        chosen.add(canonical)
    return chosen


def folder_resource(mailbox: OutlookMailbox, name: str, *, select: set[str]) -> dict[str, Any]:
    """The mailFolder resource of folder `name`: the well-known folders (and any other) sit under msgfolderroot,
    whose own parent (the mailbox's root, not a mail folder) is named by an id nothing else answers to."""
    in_it = [m for m in mailbox.messages.values() if m.folder == name]
    if name == "msgfolderroot":
        parent = "AQMkADAwATM0MDAAMS1iNTcwLWI2NTEtMDACLTAwCgAuAAAB" + mailbox.inbox_id[-24:]
        children = len({*WELL_KNOWN_FOLDERS, *mailbox.folder_ids} - {"msgfolderroot"})
    else:
        parent, children = folder_id(mailbox, "msgfolderroot"), 0
    values: dict[str, Any] = {
        "displayName": FOLDER_DISPLAY_NAMES.get(name, name),
        "parentFolderId": parent,
        "childFolderCount": children,
        "unreadItemCount": sum(1 for m in in_it if not m.is_read),
        "totalItemCount": len(in_it),
        "isHidden": False,
    }
    return {"id": folder_id(mailbox, name), **{key: values[key] for key in FOLDER_FIELDS if key in select}}


def _folder_get(folder_ref: str) -> Response:
    mailbox = mailbox_of_request()
    select = _folder_select()
    with sandbox_state().lock:
        name = folder_of_ref(mailbox, folder_ref)
        if name is None:
            raise _not_found()
        resource = folder_resource(mailbox, name, select=select)
    context = f"{tls_base_url()}/v1.0/$metadata#users('{quote(mailbox.address)}')/mailFolders/$entity"
    return json_response({"@odata.context": context, **resource})


def _message_get(message_ref: str) -> Response:
    mailbox = mailbox_of_request()
    prefs = request_preferences()
    select = _select()
    with sandbox_state().lock:
        message = message_find(mailbox, message_ref)
        if message is None:
            raise _not_found()
        resource = message_resource(
            mailbox, message, select=select, immutable=prefs.immutable, body_format=prefs.body_format
        )
    context = f"{tls_base_url()}/v1.0/$metadata#users('{quote(mailbox.address)}')/messages/$entity"
    return json_response({"@odata.context": context, **resource}, 200, prefs.header())


# $batch ---------------------------------------------------------------------------------------------
def _dispatch(method: str, target: str, headers: dict[str, str], body: Any) -> Any:
    """Run one inner request through the whole app (hooks included) in a fresh context of its own."""
    client = current_app.test_client()
    environ = {"REMOTE_ADDR": request.remote_addr or "127.0.0.1", _BATCH_PART: True}
    data = json.dumps(body).encode() if isinstance(body, dict | list) else str(body or "").encode()
    return contextvars.Context().run(
        client.open, target, method=method, headers=list(headers.items()), data=data, environ_base=environ
    )


def _batch_requests() -> list[dict[str, Any]]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise _bad_request("Invalid batch payload format: the body must be a JSON object with a 'requests' array.")
    items: list[dict[str, Any]] = data["requests"]
    if not items:
        raise _bad_request("Invalid batch payload format: 'requests' is empty.")
    if len(items) > MAX_BATCH_REQUESTS:
        raise _bad_request(f"Number of batch request steps exceeds the maximum of {MAX_BATCH_REQUESTS}.")
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            raise _bad_request("Invalid batch payload format: every request must be an object.")
        request_id, method, url = item.get("id"), item.get("method"), item.get("url")
        if not isinstance(request_id, str) or not request_id:
            raise _bad_request("Invalid batch payload format: every request needs a string 'id'.")
        if request_id.lower() in seen:
            raise _bad_request(f"Batch request ids must be unique; '{request_id}' appears more than once.")
        seen.add(request_id.lower())
        if not isinstance(method, str) or method.upper() not in ("GET", "POST", "PATCH", "PUT", "DELETE"):
            raise _bad_request(f"Request '{request_id}': invalid or missing 'method'.")
        if not isinstance(url, str) or not url or re.match(r"^[a-z][a-z0-9+.-]*://", url, re.IGNORECASE):
            raise _bad_request(f"Request '{request_id}': 'url' must be relative, e.g. /me/messages/{{id}}.")
        headers = item.get("headers") or {}
        if not isinstance(headers, dict):
            raise _bad_request(f"Request '{request_id}': 'headers' must be an object.")
        if "body" in item and not any(k.lower() == "content-type" for k in headers):
            raise _bad_request(f"Request '{request_id}': a request with a body needs a Content-Type header.")
        depends = item.get("dependsOn") or []
        if not isinstance(depends, list) or any(str(d).lower() not in seen - {request_id.lower()} for d in depends):
            raise _bad_request(f"Request '{request_id}': dependsOn must name earlier requests of the batch.")
    return items


@blueprint.post("/$batch")
def batch() -> Response:
    items = _batch_requests()
    outer_auth = request.headers.get("Authorization")
    statuses: dict[str, int] = {}
    responses = []
    for item in items:
        request_id = str(item["id"])
        failed = [d for d in item.get("dependsOn") or [] if statuses.get(str(d).lower(), 200) >= 400]
        if failed:
            responses.append(
                {"id": request_id, "status": 424, "body": error_body("FailedDependency", "A dependency failed.")}
            )
            statuses[request_id.lower()] = 424
            continue
        url = str(item["url"])
        target = "/v1.0" + (url if url.startswith("/") else f"/{url}")
        headers = {str(k): str(v) for k, v in (item.get("headers") or {}).items()}
        if outer_auth and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = outer_auth
        inner = _dispatch(str(item["method"]).upper(), target, headers, item.get("body"))
        text = inner.get_data(as_text=True)
        inner_headers = {k: v for k, v in inner.headers.items() if k.lower() != "content-length"}
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        entry: dict[str, Any] = {"id": request_id, "status": inner.status_code, "headers": inner_headers}
        if body is not None:
            entry["body"] = body
        responses.append(entry)
        statuses[request_id.lower()] = inner.status_code
    return json_response({"responses": responses})


# Control routes --------------------------------------------------------------------------------------
class MailboxIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    display_name: str | None = Field(default=None, min_length=1, max_length=200)


class DeliveryIn(BaseModel):
    """An RFC 822 message (raw or raw_base64), or the fields of a simple one (subject, from, body or html)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    address: str = Field(pattern=_ADDRESS.pattern)
    raw: str | None = None
    raw_base64: str | None = None
    subject: str | None = None
    sender: str | None = Field(default=None, alias="from")
    body: str | None = None
    html: str | None = None
    received_at: datetime | None = None
    is_read: bool = False
    folder: str = Field(default="inbox", min_length=1, max_length=200)
    inference_classification: Literal["focused", "other"] = "focused"

    @model_validator(mode="after")
    def one_source(self) -> DeliveryIn:
        raws = [self.raw is not None, self.raw_base64 is not None]
        fields = [v is not None for v in (self.subject, self.sender, self.body, self.html)]
        if sum(raws) > 1 or (any(raws) and any(fields)) or not (any(raws) or any(fields)):
            raise ValueError("give one of raw (RFC 822 text), raw_base64, or the fields subject/from/body/html")
        if self.body is not None and self.html is not None:
            raise ValueError("give body (text) or html, not both")
        if self.received_at is not None and self.received_at.tzinfo is None:
            raise ValueError("received_at must carry a timezone")
        return self

    def raw_bytes(self) -> bytes | None:
        if self.raw is not None:
            return self.raw.encode("utf-8")
        if self.raw_base64 is None:
            return None
        value = self.raw_base64.strip().replace("-", "+").replace("_", "/")
        try:
            return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except binascii.Error as exc:
            raise ControlError("invalid_field", "raw_base64: not valid base64") from exc


class IdsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    ids: list[str] = Field(min_length=1)


class UpdateIn(IdsIn):
    is_read: bool | None = None  # with neither is_read nor flag: mark read
    flag: str | None = None

    @model_validator(mode="after")
    def known_flag(self) -> UpdateIn:
        if self.flag is not None and self.flag not in FLAG_STATUSES:
            raise ValueError(f"flag must be one of {', '.join(FLAG_STATUSES)}")
        return self


class MoveIn(IdsIn):
    folder: str = Field(min_length=1, max_length=200)
    removed_reason: str = "deleted"  # the @removed reason the folder left shows

    @model_validator(mode="after")
    def known_reason(self) -> MoveIn:
        if self.removed_reason not in ("deleted", "changed"):
            raise ValueError("removed_reason must be deleted or changed")
        return self


class AddressIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)


def _existing(address: str) -> OutlookMailbox:
    mailbox = _mailboxes(sandbox_state()).get(address.lower())
    if mailbox is None:
        raise ControlError("unknown_mailbox", f"address: no Outlook mailbox {address}; create it first", 404)
    return mailbox


def delivered_answer(message: GraphMessage) -> dict[str, Any]:
    return {
        "id": message_id(message, immutable=True),
        "rest_id": message.rest_id(),
        "conversationId": CONVERSATION_PREFIX + message.conversation_key,
        "internetMessageId": message.internet_message_id,
        "receivedDateTime": _iso(message.received),
        "folder": message.folder,
    }


@control_route("/graph/mailboxes", methods=["POST"])
def control_outlook_create_mailbox() -> Response:
    """Create an Outlook mailbox (201), or answer the existing one (200)."""
    spec = parse_body(MailboxIn)
    st = sandbox_state()
    with st.lock:
        existed = spec.address.lower() in _mailboxes(st)
        mailbox = mailbox_ensure(st, spec.address, spec.display_name)
        answer = {
            "address": mailbox.address,
            "id": account_oid(mailbox.address),
            "displayName": mailbox.display_name,
            "inboxId": mailbox.inbox_id,
        }
    return json_response(answer, 200 if existed else 201)


@control_route("/graph/messages", methods=["POST"])
def control_outlook_deliver() -> Response:
    spec = parse_body(DeliveryIn)
    _existing(spec.address)
    st = sandbox_state()
    raw = spec.raw_bytes()
    if raw is not None:
        if not raw.strip() or not email.message_from_bytes(raw).keys():
            raise ControlError("invalid_field", "raw: not an RFC 822 message (it has no header lines)")
        message = message_deliver_rfc822(
            st,
            spec.address,
            raw,
            received=spec.received_at,
            is_read=spec.is_read,
            folder=spec.folder,
            inference=spec.inference_classification,
        )
    else:
        message = message_add(
            st,
            spec.address,
            subject=spec.subject or "",
            sender=_address_pair(spec.sender or "sender@example.org"),
            body=spec.html if spec.html is not None else spec.body or "",
            body_type="html" if spec.html is not None else "text",
            received=spec.received_at,
            is_read=spec.is_read,
            folder=spec.folder,
            inference=spec.inference_classification,
        )
    return json_response(delivered_answer(message), 201)


@control_route("/graph/messages", methods=["GET"])
def control_outlook_list_messages() -> Response:
    address = request.args.get("address", "")
    if not _ADDRESS.match(address):
        raise ControlError("invalid_field", "address: a mailbox address is required (?address=...)")
    mailbox = _existing(address)
    with sandbox_state().lock:
        listed = [
            {
                **delivered_answer(m),
                "subject": m.subject,
                "from": m.sender[1],
                "isRead": m.is_read,
                "flag": m.flag,
            }
            for m in mailbox.messages.values()
        ]
        generation = mailbox.generation
    return json_response({"address": mailbox.address, "generation": generation, "messages": listed})


def _change(apply: Any, spec: IdsIn, answer_key: str) -> Response:
    _existing(spec.address)
    try:
        count = apply()
    except KeyError as exc:
        raise ControlError("unknown_message", f"ids: no message {exc.args[0]} in {spec.address}", 404) from exc
    return json_response({answer_key: count})


@control_route("/graph/messages/read", methods=["POST"])
def control_outlook_mark_read() -> Response:
    """Set isRead (default true) and/or the flag of messages: each comes back in the next delta round."""
    spec = parse_body(UpdateIn)
    is_read = True if spec.is_read is None and spec.flag is None else spec.is_read
    st = sandbox_state()
    return _change(
        lambda: messages_update(st, spec.address, spec.ids, is_read=is_read, flag=spec.flag), spec, "updated"
    )


@control_route("/graph/messages/delete", methods=["POST"])
def control_outlook_delete() -> Response:
    """Delete messages for good: the next delta round of their folder lists them as @removed (deleted)."""
    spec = parse_body(IdsIn)
    st = sandbox_state()
    return _change(lambda: messages_remove(st, spec.address, spec.ids), spec, "deleted")


@control_route("/graph/messages/move", methods=["POST"])
def control_outlook_move() -> Response:
    """Move messages to another folder: @removed in the next delta of the folder left, a new item in the next
    delta of the folder entered; receivedDateTime and the immutable id stay, the REST id changes."""
    spec = parse_body(MoveIn)
    _existing(spec.address)
    st = sandbox_state()
    try:
        moved = messages_move(st, spec.address, spec.ids, spec.folder, removed_reason=spec.removed_reason)
    except KeyError as exc:
        raise ControlError("unknown_message", f"ids: no message {exc.args[0]} in {spec.address}", 404) from exc
    with st.lock:
        return json_response({"moved": [delivered_answer(m) for m in moved]})


@control_route("/graph/expire-delta", methods=["POST"])
def control_outlook_expire_delta() -> Response:
    spec = parse_body(AddressIn)
    _existing(spec.address)
    generation = delta_expire(sandbox_state(), spec.address)
    return json_response({"address": spec.address.lower(), "generation": generation})
