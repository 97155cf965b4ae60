"""Gmail API v1, as far as Tasklift reads it (reference §A): profile, history, messages, attachments,
watch/stop (with push notifications through sandbox/pubsub.py) and the multipart/mixed batch endpoint.

Messages are kept as raw RFC 822 bytes and parsed on demand into Gmail's payload tree. Every change writes
a history record as `users.history.list` returns it (messagesAdded, messagesDeleted, labelsAdded,
labelsRemoved); ids rise with gaps, like Gmail's. internalDate is the arrival time unless the delivery says
otherwise; the Date header never sets it. A message joins the thread of an earlier one that its In-Reply-To or
References names when their subjects match once reply prefixes are dropped (Gmail's threads guide: the headers
"set in compliance with the RFC 2822 standard" and "the Subject headers must match"); otherwise it starts its
own thread, whose id is its own id. Mail the owner sends carries the system label `SENT` (no INBOX, no UNREAD),
except mail they send to themselves: Gmail keeps that as one message labelled UNREAD, SENT and INBOX, one
messagesAdded record (sandbox/conversations.py), never as a sent copy and a received one.

Error bodies have Google's full current shape (`code`, `message`, `errors`, `status` and, for errors raised
by Google's API front end, `details` with a google.rpc.ErrorInfo), see `error_body`.

A watch publishes `{"emailAddress", "historyId"}` (the mailbox's history id after the change, as a JSON
number, as captured from real pushes; Google's guide shows a string) to its topic when a change it asked for
happens: with `labelIds` and `labelFilterBehavior` include (the default), a message entering one of the
labels (delivered with it, or the label added); with exclude, a delivery or label addition leaving the
message in none of them; with no `labelIds`, every change. Which changes Gmail pushes for under a label filter
is not documented beyond "which labels are required for a push notification to be generated"; the sandbox's
reading is the one above. At most one push per second per user (the `gmail_push_rate_limit` setting, on by
default); extras are dropped, as Gmail does. A watch lasts 7 days; an expired or stopped one pushes nothing.

Batch parts are dispatched through the whole app (a WSGI call in a fresh context), so each inner
request passes the same before_request hook as a direct call: it is logged as its own entry (method,
inner path and query, marked `batch_part`; the outer `POST /batch/gmail/v1` is logged first) and faults are
matched against "GET /gmail/v1/users/me/messages/ID?format=...&alt=json".
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import email
import email.policy
import html
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import Message
from email.parser import BytesParser
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any

from flask import Blueprint, Response, current_app, g, has_request_context, request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from werkzeug.test import TestResponse

from sandbox.app import GOOGLE_STATUS, json_response, sandbox_state
from sandbox.compose import subject_key
from sandbox.control import ControlError, control_route, parse_body
from sandbox.google_oauth import token_address
from sandbox.pubsub import topic_publish
from sandbox.state import SandboxState

blueprint = Blueprint("gmail", __name__)

MAX_BATCH_PARTS = 100
_BATCH_PART = "sandbox.batch_part"  # WSGI environ key of an inner request of a batch
DEFAULT_LABELS = ("INBOX", "UNREAD")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_ATTACHMENT_PREFIX = "ANGjdJ"
WATCH_LIFETIME_S = 7 * 24 * 3600


# Storage ---------------------------------------------------------------------------------------------
@dataclass
class StoredMessage:
    id: str
    thread_id: str
    raw: bytes
    label_ids: list[str]
    internal_date: int  # epoch milliseconds
    history_id: int
    message_id_header: str
    subject_key: str = ""  # its subject as Gmail compares it when threading (compose.subject_key)


HISTORY_TYPES = ("messageAdded", "messageDeleted", "labelAdded", "labelRemoved")


@dataclass
class HistoryRecord:
    """One change to one message. `before` and `after` are its labels just before and just after the change
    (for a delivery both are its labels on arrival; for a deletion both are its labels when deleted)."""

    id: int
    message_id: str
    thread_id: str
    kind: str  # "messageAdded" | "messageDeleted" | "labels"
    before: list[str]
    after: list[str]
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass
class Watch:
    """A `users.watch`: where to publish, for which changes, and until when."""

    topic: str
    label_ids: list[str]
    exclude: bool  # labelFilterBehavior exclude (else include)
    expiration: int  # epoch milliseconds

    def active(self) -> bool:
        return time.time() * 1000 < self.expiration

    def wants(self, record: HistoryRecord) -> bool:
        """Whether `record` is a change this watch pushes for (see the module docstring)."""
        if not self.label_ids:
            return True
        entered = record.after if record.kind == "messageAdded" else record.added
        if self.exclude:
            return bool(entered) and not set(self.label_ids) & set(record.after)
        return bool(set(self.label_ids) & set(entered))

    def as_dict(self) -> dict[str, Any]:
        return {
            "topicName": self.topic,
            "labelIds": list(self.label_ids),
            "labelFilterBehavior": "exclude" if self.exclude else "include",
            "expiration": str(self.expiration),
            "active": self.active(),
        }


@dataclass
class Mailbox:
    address: str
    history_id: int
    history_floor: int  # a startHistoryId below this answers 404, as an expired one does at Google
    messages: dict[str, StoredMessage] = field(default_factory=dict)
    history: list[HistoryRecord] = field(default_factory=list)
    watch: Watch | None = None
    pushed_at: float = 0.0  # when the last push was published (Gmail's one per second per user)


def _mailboxes(state: SandboxState) -> dict[str, Mailbox]:
    mailboxes: dict[str, Mailbox] = state.data.setdefault("gmail", {})
    return mailboxes


def mailbox_get(state: SandboxState, address: str) -> Mailbox | None:
    with state.lock:
        return _mailboxes(state).get(address.lower())


def mailbox_addresses(state: SandboxState) -> list[str]:
    with state.lock:
        return list(_mailboxes(state))


def mailbox_ensure(state: SandboxState, address: str, history_id_start: int | None = None) -> Mailbox:
    """The mailbox of `address`, created empty if missing (every Google account has one)."""
    address = address.lower()
    with state.lock:
        mailboxes = _mailboxes(state)
        if address not in mailboxes:
            start = history_id_start if history_id_start is not None else 100_000 + 1000 * len(mailboxes)
            mailboxes[address] = Mailbox(address=address, history_id=start, history_floor=0)
        return mailboxes[address]


def date_header(raw: bytes) -> datetime | None:
    """The Date header of `raw` as an aware datetime, if it has a readable one (for callers that want mail to
    look as if it arrived when it was sent, like the demo: delivery itself never reads it)."""
    value = email.message_from_bytes(raw, policy=email.policy.compat32).get("Date")
    if not value:
        return None
    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _next_history_id(mailbox: Mailbox) -> int:
    mailbox.history_id += 1 + len(mailbox.history) % 3  # rising, with gaps
    return mailbox.history_id


def _history_append(state: SandboxState, mailbox: Mailbox, record: HistoryRecord) -> None:
    """Record a change, and publish it to the mailbox's watch topic if the watch asks for it (lock held).
    With the `gmail_watch_pushes_every_change` setting a live watch pushes for every change, whatever its
    labels, as developers report of live Gmail (see "Sent mail and threads" in sandbox/README.md)."""
    mailbox.history.append(record)
    watch = mailbox.watch
    if watch is None or not watch.active():
        return
    if not watch.wants(record) and not state.settings.get("gmail_watch_pushes_every_change"):
        return
    now = time.time()
    limited = bool(state.settings.get("gmail_push_rate_limit")) and now - mailbox.pushed_at < 1.0
    if not limited:
        mailbox.pushed_at = now
    topic_publish(
        state,
        watch.topic,
        {"emailAddress": mailbox.address, "historyId": mailbox.history_id},
        dropped="gmail_rate_limit" if limited else None,
    )


def message_deliver(
    state: SandboxState,
    address: str,
    raw: bytes,
    *,
    labels: list[str] | None = None,
    internal_date: datetime | None = None,
) -> StoredMessage:
    """Put `raw` into the mailbox of `address` (created if missing) and record a messageAdded history entry.

    internalDate is `internal_date` if given, else now (the arrival time, as at Gmail: never the Date header).
    """
    parsed = email.message_from_bytes(raw, policy=email.policy.compat32)
    if internal_date is not None:
        if internal_date.tzinfo is None:
            internal_date = internal_date.replace(tzinfo=UTC)
        date_ms = int(internal_date.timestamp() * 1000)
    else:
        date_ms = int(time.time() * 1000)
    message_id_header = str(parsed.get("Message-ID", "")).strip()
    refs = f"{parsed.get('In-Reply-To', '')} {parsed.get('References', '')}".split()
    subject = subject_key(str(parsed.get("Subject", "")))
    with state.lock:
        mailbox = mailbox_ensure(state, address)
        message_id = f"{0x18F0_0000_0000_0000 + state.next_id():x}"
        thread_id = message_id
        for earlier in mailbox.messages.values():
            if earlier.message_id_header and earlier.message_id_header in refs and earlier.subject_key == subject:
                thread_id = earlier.thread_id
                break
        history_id = _next_history_id(mailbox)
        label_ids = list(dict.fromkeys(labels)) if labels is not None else list(DEFAULT_LABELS)
        stored = StoredMessage(message_id, thread_id, raw, label_ids, date_ms, history_id, message_id_header, subject)
        mailbox.messages[message_id] = stored
        _history_append(
            state,
            mailbox,
            HistoryRecord(history_id, message_id, thread_id, "messageAdded", list(label_ids), list(label_ids)),
        )
        return stored


def message_modify(
    state: SandboxState, address: str, message_id: str, *, add: list[str], remove: list[str]
) -> StoredMessage:
    """Add and remove labels of one message, as `users.messages.modify` does: one history record holding a
    labelsAdded and/or a labelsRemoved entry. A change that changes nothing (adding a label the message has,
    removing one it has not) writes no record. KeyError if the message is not there."""
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        message = mailbox.messages[message_id]
        before = list(message.label_ids)
        removed = [label for label in dict.fromkeys(remove) if label in before]
        added = [label for label in dict.fromkeys(add) if label not in before and label not in removed]
        if not added and not removed:
            return message
        after = [label for label in before if label not in removed] + added
        message.label_ids = after
        message.history_id = _next_history_id(mailbox)
        _history_append(
            state,
            mailbox,
            HistoryRecord(message.history_id, message.id, message.thread_id, "labels", before, after, added, removed),
        )
        return message


def messages_delete(state: SandboxState, address: str, message_ids: list[str]) -> int:
    """Delete messages for good (not trashed), one messageDeleted history record each. KeyError for an unknown
    id, before anything is deleted."""
    with state.lock:
        mailbox = _mailboxes(state)[address.lower()]
        missing = [i for i in message_ids if i not in mailbox.messages]
        if missing:
            raise KeyError(missing[0])
        for message_id in dict.fromkeys(message_ids):
            message = mailbox.messages.pop(message_id)
            labels = list(message.label_ids)
            _history_append(
                state,
                mailbox,
                HistoryRecord(
                    _next_history_id(mailbox), message.id, message.thread_id, "messageDeleted", labels, labels
                ),
            )
        return len(set(message_ids))


def mailbox_expire_history(state: SandboxState, address: str) -> int:
    """Forget the mailbox's history: any startHistoryId below the current id now answers 404."""
    with state.lock:
        mailbox = _mailboxes(state).get(address.lower())
        if mailbox is None:
            raise KeyError(address)
        mailbox.history_floor = mailbox.history_id
        mailbox.history.clear()
        return mailbox.history_id


# Message rendering -----------------------------------------------------------------------------------
def _b64(data: bytes, *, pad: bool) -> str:
    encoded = base64.urlsafe_b64encode(data).decode()
    return encoded if pad else encoded.rstrip("=")


def _attachment_id(message_id: str, part_id: str) -> str:
    return _ATTACHMENT_PREFIX + _b64(f"{message_id}/{part_id}".encode(), pad=False)


def _headers(part: Message) -> list[dict[str, str]]:
    headers = []
    for name, value in part.items():
        try:
            text = str(value)
        except Exception:  # a header the modern parser chokes on: give it as sent
            text = str(part.get(name, ""))
        headers.append({"name": name, "value": text})
    return headers


def _leaf_bytes(part: Message) -> bytes:
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _is_attachment(part: Message) -> bool:
    return bool(part.get_filename()) or part.get_content_maintype() != "text"


def _payload(part: Message, message_id: str, part_id: str) -> dict[str, Any]:
    node: dict[str, Any] = {
        "partId": part_id,
        "mimeType": part.get_content_type(),
        "filename": part.get_filename() or "",
        "headers": _headers(part),
    }
    if part.is_multipart():
        node["body"] = {"size": 0}
        children = part.get_payload()
        assert isinstance(children, list)
        prefix = f"{part_id}." if part_id else ""
        node["parts"] = [_payload(child, message_id, f"{prefix}{i}") for i, child in enumerate(children)]
        return node
    data = _leaf_bytes(part)
    if _is_attachment(part):
        node["body"] = {"attachmentId": _attachment_id(message_id, part_id), "size": len(data)}
    else:
        node["body"] = {"size": len(data), "data": _b64(data, pad=False)}
    return node


def _find_part(part: Message, part_id: str) -> Message | None:
    if not part_id:
        return part
    for index in part_id.split("."):
        children = part.get_payload() if part.is_multipart() else None
        if not isinstance(children, list) or not index.isdigit() or int(index) >= len(children):
            return None
        child = children[int(index)]
        if not isinstance(child, Message):
            return None
        part = child
    return part


def _snippet(parsed: Message) -> str:
    html_text = ""
    for part in parsed.walk():
        if part.is_multipart() or part.get_filename():
            continue
        charset = part.get_content_charset() or "utf-8"
        try:
            text = _leaf_bytes(part).decode(charset, errors="replace")
        except LookupError:
            text = _leaf_bytes(part).decode("utf-8", errors="replace")
        if part.get_content_type() == "text/plain":
            return " ".join(text.split())[:200]
        if part.get_content_type() == "text/html" and not html_text:
            text = re.sub(r"(?is)<(style|script)\b.*?</\1>", " ", text)
            html_text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())[:200]
    return html_text


def message_resource(message: StoredMessage, fmt: str, metadata_headers: list[str]) -> dict[str, Any]:
    """The Gmail `Message` resource of `message` in format minimal, full, raw or metadata."""
    parsed = email.message_from_bytes(message.raw, policy=email.policy.default)
    resource: dict[str, Any] = {
        "id": message.id,
        "threadId": message.thread_id,
        "labelIds": list(message.label_ids),
        "snippet": _snippet(parsed),
        "sizeEstimate": len(message.raw),
        "historyId": str(message.history_id),
        "internalDate": str(message.internal_date),
    }
    if fmt == "raw":
        resource["raw"] = _b64(message.raw, pad=True)
    elif fmt == "full":
        resource["payload"] = _payload(parsed, message.id, "")
    elif fmt == "metadata":
        wanted = {h.lower() for h in metadata_headers}
        headers = [h for h in _headers(parsed) if not wanted or h["name"].lower() in wanted]
        resource["payload"] = {"partId": "", "mimeType": parsed.get_content_type(), "filename": "", "headers": headers}
    return resource


# Errors and auth -------------------------------------------------------------------------------------
class GmailApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


SERVICE = "gmail.googleapis.com"
SANDBOX_PROJECT_NUMBER = "469823504216"
_HELP_QUOTA = {
    "@type": "type.googleapis.com/google.rpc.Help",
    "links": [
        {
            "description": "Request a higher quota limit.",
            "url": "https://cloud.google.com/docs/quotas/help/request_increase",
        }
    ],
}
_AUTH_HELP = (
    "Expected OAuth 2 access token, login cookie or other valid authentication credential. "
    "See https://developers.google.com/identity/sign-in/web/devconsole-project."
)


@dataclass(frozen=True)
class ErrorReason:
    """How Gmail words one `errors[].reason`: its usual status, `errors[]` domain and message, the top-level
    message when it differs, and the google.rpc.ErrorInfo reason of `details` (None: Gmail's own errors,
    captured without details). `quota_limit` marks a quota error (ErrorInfo metadata, a Help link)."""

    status: int
    domain: str
    message: str
    top_message: str | None = None
    info_reason: str | None = None
    quota_limit: tuple[str, str, str] | None = None  # (limit name in the message, limit id, limit value)
    location: bool = False  # errors[] names the Authorization header


def _quota_message(limit_name: str) -> str:
    return (
        f"Quota exceeded for quota metric 'Queries' and limit '{limit_name}' of service '{SERVICE}' "
        f"for consumer 'project_number:{SANDBOX_PROJECT_NUMBER}'."
    )


# The reasons a fault may name (`reason`). See sandbox/README.md for which shapes were seen and which inferred.
ERROR_REASONS: dict[str, ErrorReason] = {
    "rateLimitExceeded": ErrorReason(
        429,
        "global",
        "Resource has been exhausted (e.g. check quota).",
        info_reason="RATE_LIMIT_EXCEEDED",
        quota_limit=("Queries per minute", "QueriesPerMinutePerProject", "1200000"),
    ),
    "userRateLimitExceeded": ErrorReason(
        403,
        "usageLimits",
        _quota_message("Queries per minute per user"),
        info_reason="RATE_LIMIT_EXCEEDED",
        quota_limit=("Queries per minute per user", "QueriesPerMinutePerUser", "15000"),
    ),
    "dailyLimitExceeded": ErrorReason(
        403,
        "usageLimits",
        _quota_message("Queries per day"),
        info_reason="RATE_LIMIT_EXCEEDED",
        quota_limit=("Queries per day", "QueriesPerDay", "1000000000"),
    ),
    "authError": ErrorReason(
        401,
        "global",
        "Invalid Credentials",
        f"Request had invalid authentication credentials. {_AUTH_HELP}",
        "ACCESS_TOKEN_TYPE_UNSUPPORTED",
        location=True,
    ),
    "required": ErrorReason(
        401,
        "global",
        "Login Required.",
        f"Request is missing required authentication credential. {_AUTH_HELP}",
        "CREDENTIALS_MISSING",
        location=True,
    ),
    "insufficientPermissions": ErrorReason(
        403,
        "global",
        "Insufficient Permission",
        "Request had insufficient authentication scopes.",
        "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
    ),
    "forbidden": ErrorReason(403, "global", "Forbidden"),
    "notFound": ErrorReason(404, "global", "Requested entity was not found."),
    "invalidArgument": ErrorReason(400, "global", "Invalid argument."),
    "failedPrecondition": ErrorReason(400, "global", "Precondition check failed."),
    "backendError": ErrorReason(500, "global", "Backend Error"),
}
_DEFAULT_REASON = {
    400: "invalidArgument",
    401: "authError",
    403: "insufficientPermissions",
    404: "notFound",
    429: "rateLimitExceeded",
}
_RPC_METHODS = (
    (re.compile(r"/profile$"), "GetProfile"),
    (re.compile(r"/history$"), "ListHistory"),
    (re.compile(r"/messages/[^/]+/attachments/[^/]+$"), "GetAttachment"),
    (re.compile(r"/messages/[^/]+$"), "GetMessage"),
    (re.compile(r"/messages$"), "ListMessages"),
    (re.compile(r"/threads/[^/]+$"), "GetThread"),
    (re.compile(r"/watch$"), "Watch"),
    (re.compile(r"/stop$"), "Stop"),
)


def _rpc_method() -> str | None:
    """The backend method ErrorInfo names (`caribou.api.proto.MailboxService.ListLabels` was seen for labels)."""
    path = request.path if has_request_context() else ""
    for pattern, name in _RPC_METHODS:
        if path.startswith("/gmail/v1/") and pattern.search(path):
            return f"caribou.api.proto.MailboxService.{name}"
    return None


def default_reason(status: int) -> str:
    return _DEFAULT_REASON.get(status, "backendError" if status >= 500 else "")


def error_body(
    status: int, reason: str | None = None, *, message: str | None = None, retry_after: str | None = None
) -> dict[str, Any]:
    """Gmail's error body for `status` and the `errors[].reason` `reason` (by default the usual one for the
    status): {"error": {code, message, errors: [{message, domain, reason}], status, details?}}. Quota and
    auth errors carry `details` (ErrorInfo, plus RetryInfo from `retry_after` on a 429 and a Help link for
    quota); note googleapiclient's HttpError.error_details is then the details list, not `errors`."""
    reason = reason or default_reason(status)
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    spec = ERROR_REASONS.get(reason) or ErrorReason(status, "global", phrase)
    if reason == "backendError" and status == 503:
        spec = ErrorReason(503, "global", "The service is currently unavailable.")
    if reason == "rateLimitExceeded" and status != 429 and spec.quota_limit:
        spec = ErrorReason(  # the 403 form: usageLimits and the quota sentence
            status, "usageLimits", _quota_message(spec.quota_limit[0]), None, spec.info_reason, spec.quota_limit
        )
    item_message = message or spec.message
    fallback = phrase[:1].lower() + phrase.title().replace(" ", "")[1:]  # 409 "Conflict" -> "conflict"
    item: dict[str, Any] = {"message": item_message, "domain": spec.domain, "reason": reason or fallback}
    if spec.location:
        item.update({"location": "Authorization", "locationType": "header"})
    error: dict[str, Any] = {
        "code": status,
        "message": message or spec.top_message or spec.message,
        "errors": [item],
        "status": GOOGLE_STATUS.get(status, "UNKNOWN"),
    }
    details: list[dict[str, Any]] = []
    if spec.info_reason:
        metadata: dict[str, str] = {"service": SERVICE}
        method = _rpc_method()
        if method and not spec.quota_limit:
            metadata["method"] = method
        if spec.quota_limit:
            metadata.update(
                {
                    "quota_metric": f"{SERVICE}/default",
                    "quota_limit": spec.quota_limit[1],
                    "quota_limit_value": spec.quota_limit[2],
                    "quota_location": "global",
                    "consumer": f"projects/{SANDBOX_PROJECT_NUMBER}",
                }
            )
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": spec.info_reason,
                "domain": "googleapis.com",
                "metadata": metadata,
            }
        )
    if status == 429 and spec.info_reason:
        seconds = _seconds(retry_after)
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"})
    if spec.quota_limit:
        details.append(_HELP_QUOTA)
    if details:
        error["details"] = details
    return {"error": error}


def _seconds(retry_after: str | None) -> str:
    """A Retry-After value as google.protobuf.Duration seconds ("7", "2.5"); 7 when it is absent or a date."""
    try:
        value = float(retry_after) if retry_after is not None else 7.0
    except ValueError:
        value = 7.0
    return f"{value:g}"


def _google_error(status: int, message: str, reason: str) -> GmailApiError:
    return GmailApiError(status, error_body(status, reason, message=message))


def _invalid_argument(message: str) -> GmailApiError:
    return _google_error(400, message, "invalidArgument")


def _not_found() -> GmailApiError:
    return GmailApiError(404, error_body(404, "notFound"))


@blueprint.errorhandler(GmailApiError)
def gmail_error(error: GmailApiError) -> Response:
    return json_response(error.body, error.status, error.headers)


def _mailbox(user_id: str) -> Mailbox:
    """The mailbox the request's Bearer token opens, checked against `user_id` ("me" or the address)."""
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    st = sandbox_state()
    address = token_address(st, token) if token else None
    if address is None:
        raise GmailApiError(
            401,
            error_body(401, "authError" if token else "required"),
            {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'},
        )
    if user_id != "me" and user_id.lower() != address:
        raise _google_error(403, f"Delegation denied for {address}", "forbidden")
    return mailbox_ensure(st, address)


def _int_arg(name: str, default: int, maximum: int) -> int:
    value = request.args.get(name)
    if value is None:
        return default
    if not value.isdigit() or int(value) < 1:
        raise _invalid_argument(f"Invalid value for {name}: {value}")
    return min(int(value), maximum)


def _page_token_decode(token: str) -> int:
    try:
        return int(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise _invalid_argument("Invalid pageToken") from exc


def _page_token_encode(position: int) -> str:
    return _b64(str(position).encode(), pad=False)


# Routes ----------------------------------------------------------------------------------------------
@blueprint.get("/gmail/v1/users/<user_id>/profile")
def profile(user_id: str) -> Response:
    mailbox = _mailbox(user_id)
    with sandbox_state().lock:
        return json_response(
            {
                "emailAddress": mailbox.address,
                "messagesTotal": len(mailbox.messages),
                "threadsTotal": len({m.thread_id for m in mailbox.messages.values()}),
                "historyId": str(mailbox.history_id),
            }
        )


def _history_view(record: HistoryRecord, types: set[str], label_id: str | None) -> dict[str, Any] | None:
    """`record` as history.list returns it, keeping only the entries of `types` whose message carried
    `label_id` when that change happened: after it for messageAdded and labelAdded, before it for
    labelRemoved and messageDeleted. So archiving (INBOX removed) shows under labelId=INBOX, and of a
    "Not spam" (SPAM removed, INBOX added) only the labelsAdded entry does. None when nothing is left."""
    message = {"id": record.message_id, "threadId": record.thread_id, "labelIds": list(record.after)}
    entries: dict[str, Any] = {}
    if record.kind == "messageAdded" and "messageAdded" in types and (not label_id or label_id in record.after):
        entries["messagesAdded"] = [{"message": message}]
    if record.kind == "messageDeleted" and "messageDeleted" in types and (not label_id or label_id in record.before):
        entries["messagesDeleted"] = [{"message": message}]
    if record.added and "labelAdded" in types and (not label_id or label_id in record.after):
        entries["labelsAdded"] = [{"message": message, "labelIds": list(record.added)}]
    if record.removed and "labelRemoved" in types and (not label_id or label_id in record.before):
        entries["labelsRemoved"] = [{"message": message, "labelIds": list(record.removed)}]
    if not entries:
        return None
    return {"id": str(record.id), "messages": [{"id": record.message_id, "threadId": record.thread_id}], **entries}


@blueprint.get("/gmail/v1/users/<user_id>/history")
def history_list(user_id: str) -> Response:
    mailbox = _mailbox(user_id)
    start_text = request.args.get("startHistoryId", "")
    if not start_text.isdigit():
        raise _invalid_argument("Missing/invalid parameter: startHistoryId")
    start = int(start_text)
    max_results = _int_arg("maxResults", 100, 500)
    history_types = request.args.getlist("historyTypes")
    unknown = [t for t in history_types if t not in HISTORY_TYPES]
    if unknown:
        raise _invalid_argument(f"Invalid value at 'history_types' (type.googleapis.com/HistoryType), \"{unknown[0]}\"")
    types = set(history_types or HISTORY_TYPES)
    label_id = request.args.get("labelId") or None
    after = _page_token_decode(request.args["pageToken"]) if request.args.get("pageToken") else start
    with sandbox_state().lock:
        if start < mailbox.history_floor:
            raise _not_found()
        views = [(r.id, _history_view(r, types, label_id)) for r in mailbox.history if r.id > after]
        wanted = [(record_id, view) for record_id, view in views if view is not None]
        page = wanted[:max_results]
        answer: dict[str, Any] = {"historyId": str(mailbox.history_id)}
    if page:
        answer["history"] = [view for _, view in page]
    if len(wanted) > max_results:
        answer["nextPageToken"] = _page_token_encode(page[-1][0])
    return json_response(answer)


_QUERY_TERM = re.compile(r"^(after|before|newer_than|older_than):(\S+)$")


def _query_bounds(q: str) -> tuple[int, int]:
    """(after_ms, before_ms) for the supported search terms; any other term is refused."""
    after_ms, before_ms = 0, 2**63
    now = datetime.now(UTC)
    for term in q.split():
        match = _QUERY_TERM.match(term)
        if not match:
            raise _invalid_argument(
                f"Invalid query: the sandbox supports only after:, before:, newer_than:, older_than: ({term})"
            )
        op, value = match.groups()
        try:
            if op in ("after", "before"):
                when = (
                    datetime.fromtimestamp(int(value), UTC)
                    if value.isdigit()
                    else datetime.strptime(value.replace("-", "/"), "%Y/%m/%d").replace(tzinfo=UTC)
                )
            else:
                amount, unit = int(value[:-1]), value[-1]
                when = now - timedelta(days=amount * {"d": 1, "m": 30, "y": 365}[unit])
        except (ValueError, KeyError, OverflowError) as exc:
            raise _invalid_argument(f"Invalid query: {term}") from exc
        ms = int(when.timestamp() * 1000)
        if op in ("after", "newer_than"):
            after_ms = max(after_ms, ms)
        else:
            before_ms = min(before_ms, ms)
    return after_ms, before_ms


@blueprint.get("/gmail/v1/users/<user_id>/messages")
def messages_list(user_id: str) -> Response:
    mailbox = _mailbox(user_id)
    label_ids = request.args.getlist("labelIds")
    max_results = _int_arg("maxResults", 100, 500)
    after_ms, before_ms = _query_bounds(request.args.get("q", ""))
    include_spam_trash = request.args.get("includeSpamTrash", "false").lower() == "true"
    offset = _page_token_decode(request.args["pageToken"]) if request.args.get("pageToken") else 0
    with sandbox_state().lock:
        matching = [
            m
            for m in mailbox.messages.values()
            if all(label in m.label_ids for label in label_ids)
            and after_ms < m.internal_date < before_ms
            and (include_spam_trash or not {"SPAM", "TRASH"} & set(m.label_ids))
        ]
    matching.sort(key=lambda m: (m.internal_date, m.id), reverse=True)  # newest first, as Gmail lists
    page = matching[offset : offset + max_results]
    answer: dict[str, Any] = {"resultSizeEstimate": len(matching)}
    if page:
        answer["messages"] = [{"id": m.id, "threadId": m.thread_id} for m in page]
    if offset + max_results < len(matching):
        answer["nextPageToken"] = _page_token_encode(offset + max_results)
    return json_response(answer)


def _message(mailbox: Mailbox, message_id: str) -> StoredMessage:
    with sandbox_state().lock:
        message = mailbox.messages.get(message_id)
    if message is None:
        raise _not_found()
    return message


@blueprint.get("/gmail/v1/users/<user_id>/messages/<message_id>")
def messages_get(user_id: str, message_id: str) -> Response:
    mailbox = _mailbox(user_id)
    fmt = request.args.get("format", "full")
    if fmt not in ("minimal", "full", "raw", "metadata"):
        raise _invalid_argument(f"Invalid value at 'format', \"{fmt}\"")
    message = _message(mailbox, message_id)
    return json_response(message_resource(message, fmt, request.args.getlist("metadataHeaders")))


@blueprint.get("/gmail/v1/users/<user_id>/threads/<thread_id>")
def threads_get(user_id: str, thread_id: str) -> Response:
    """A thread: its messages in the order they arrived (internalDate), each in `format`."""
    mailbox = _mailbox(user_id)
    fmt = request.args.get("format", "full")
    if fmt not in ("minimal", "full", "metadata"):
        raise _invalid_argument(f"Invalid value at 'format', \"{fmt}\"")
    with sandbox_state().lock:
        members = sorted(
            (m for m in mailbox.messages.values() if m.thread_id == thread_id), key=lambda m: (m.internal_date, m.id)
        )
    if not members:
        raise _not_found()
    headers = request.args.getlist("metadataHeaders")
    return json_response(
        {
            "id": thread_id,
            "historyId": str(max(m.history_id for m in members)),
            "messages": [message_resource(m, fmt, headers) for m in members],
        }
    )


@blueprint.get("/gmail/v1/users/<user_id>/messages/<message_id>/attachments/<attachment_id>")
def attachments_get(user_id: str, message_id: str, attachment_id: str) -> Response:
    mailbox = _mailbox(user_id)
    message = _message(mailbox, message_id)
    if not attachment_id.startswith(_ATTACHMENT_PREFIX):
        raise _invalid_argument("Invalid attachment token")
    try:
        owner, _, part_id = _b64_text(attachment_id[len(_ATTACHMENT_PREFIX) :]).partition("/")
    except ValueError as exc:
        raise _invalid_argument("Invalid attachment token") from exc
    parsed = email.message_from_bytes(message.raw, policy=email.policy.default)
    part = _find_part(parsed, part_id) if owner == message_id else None
    if part is None or part.is_multipart():
        raise _invalid_argument("Invalid attachment token")
    data = _leaf_bytes(part)
    return json_response({"attachmentId": attachment_id, "size": len(data), "data": _b64(data, pad=False)})


def _b64_text(value: str) -> str:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(value) from exc


@blueprint.post("/gmail/v1/users/<user_id>/watch")
def watch(user_id: str) -> Response:
    """Start (or renew, or replace) the mailbox's watch for 7 days."""
    mailbox = _mailbox(user_id)
    body = request.get_json(silent=True) or {}
    if not isinstance(body, dict):
        raise _invalid_argument("Invalid JSON payload received.")
    topic = str(body.get("topicName", ""))
    if not re.match(r"^projects/[^/]+/topics/[^/]+$", topic):
        raise _invalid_argument("Invalid topicName does not match projects/SOME-PROJECT/topics/SOME-TOPIC")
    label_ids = body.get("labelIds") or []
    if not isinstance(label_ids, list) or not all(isinstance(label, str) and label for label in label_ids):
        raise _invalid_argument("Invalid value at 'label_ids'")
    behaviour = str(body.get("labelFilterBehavior") or body.get("labelFilterAction") or "include")
    if behaviour.lower() not in ("include", "exclude"):
        field_name = "label_filter_behavior" if "labelFilterBehavior" in body else "label_filter_action"
        raise _invalid_argument(f"Invalid value at '{field_name}', \"{behaviour}\"")
    expiration = int((time.time() + WATCH_LIFETIME_S) * 1000)
    with sandbox_state().lock:
        mailbox.watch = Watch(topic, list(dict.fromkeys(label_ids)), behaviour.lower() == "exclude", expiration)
        history_id = mailbox.history_id
    return json_response({"historyId": str(history_id), "expiration": str(expiration)})


@blueprint.post("/gmail/v1/users/<user_id>/stop")
def stop(user_id: str) -> Response:
    mailbox = _mailbox(user_id)
    with sandbox_state().lock:
        mailbox.watch = None
    return Response(status=204)


# Batch -----------------------------------------------------------------------------------------------
def _split_http(text: str) -> tuple[str, list[tuple[str, str]], str]:
    """(request line, headers, body) of an HTTP message whose lines end in LF or CRLF."""
    pieces = re.split(r"\r?\n\r?\n", text, maxsplit=1)
    head, body = pieces[0], (pieces[1] if len(pieces) > 1 else "")
    lines = head.splitlines()
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return (lines[0] if lines else ""), headers, body


def _dispatch(method: str, target: str, headers: list[tuple[str, str]], body: str) -> TestResponse:
    """Run one inner request through the whole app (hooks included) in a fresh context of its own."""
    client = current_app.test_client()
    environ = {"REMOTE_ADDR": request.remote_addr or "127.0.0.1", _BATCH_PART: True}
    skip = {"host", "content-length"}
    kept = [(k, v) for k, v in headers if k.lower() not in skip]
    response: TestResponse = contextvars.Context().run(
        client.open, target, method=method, headers=kept, data=body.encode(), environ_base=environ
    )
    return response


@blueprint.after_request
def mark_batch_part(response: Response) -> Response:
    """Mark the log entry of an inner request, so the log tells HTTP requests from batch parts.

    An after_request hook, as it also runs when a fault answered the part before its route did.
    """
    logged = g.get("logged")
    if logged is not None and request.environ.get(_BATCH_PART):
        logged.batch_part = True
    return response


@blueprint.post("/batch/gmail/v1")
@blueprint.post("/batch")
def batch() -> Response:
    content_type = request.headers.get("Content-Type", "")
    if not content_type.lower().startswith("multipart/mixed") or "boundary=" not in content_type:
        raise _invalid_argument("Batch requests must be multipart/mixed with a boundary")
    outer = BytesParser(policy=email.policy.compat32).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + request.get_data()
    )
    parts = outer.get_payload()
    if not outer.is_multipart() or not isinstance(parts, list) or not parts:
        raise _invalid_argument("The batch request has no parts")
    if len(parts) > MAX_BATCH_PARTS:
        raise _invalid_argument(f"Too many requests in batch: {len(parts)}; at most {MAX_BATCH_PARTS} are allowed")
    outer_auth = request.headers.get("Authorization")
    boundary = f"batch_{secrets.token_urlsafe(18)}"
    chunks = []
    for number, part in enumerate(parts, start=1):
        payload = part.get_payload()
        request_line, headers, body = _split_http(payload if isinstance(payload, str) else "")
        pieces = request_line.split()
        if len(pieces) < 2 or not pieces[1].startswith("/"):
            raise _invalid_argument(f"Part {number} is not an HTTP request with a path")
        if outer_auth and not any(k.lower() == "authorization" for k, _ in headers):
            headers.append(("Authorization", outer_auth))
        inner = _dispatch(pieces[0].upper(), pieces[1], headers, body)
        content_id = str(part.get("Content-ID", f"<{number}>")).strip().strip("<>")
        # The client splits each part's HTTP response on its first CRLF blank line (§A.7): keep one header.
        inner_headers = (
            "".join(f"{k}: {v}\r\n" for k, v in inner.headers.items() if k.lower() != "content-length")
            or "Content-Type: text/plain\r\n"
        )
        chunks.append(
            f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{content_id}>\r\n\r\n"
            f"HTTP/1.1 {inner.status}\r\n{inner_headers}\r\n{inner.get_data(as_text=True)}\r\n"
        )
    body_text = "".join(chunks) + f"--{boundary}--\r\n"
    return Response(body_text, status=200, content_type=f"multipart/mixed; boundary={boundary}")


# Control routes --------------------------------------------------------------------------------------
class MailboxIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    history_id_start: int | None = Field(default=None, ge=1, le=2**53)


class DeliveryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    raw: str | None = None
    raw_base64: str | None = None
    labels: list[str] | None = None
    internal_date: datetime | None = None

    @model_validator(mode="after")
    def one_raw(self) -> DeliveryIn:
        if (self.raw is None) == (self.raw_base64 is None):
            raise ValueError("give exactly one of raw (RFC 822 text) or raw_base64")
        if self.labels is not None and not all(label.strip() for label in self.labels):
            raise ValueError("labels must be non-empty strings")
        return self

    def raw_bytes(self) -> bytes:
        if self.raw is not None:
            return self.raw.encode("utf-8")
        value = (self.raw_base64 or "").strip().replace("-", "+").replace("_", "/")
        try:
            return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except binascii.Error as exc:
            raise ControlError("invalid_field", "raw_base64: not valid base64") from exc


class AddressIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)


def _existing(address: str) -> Mailbox:
    mailbox = _mailboxes(sandbox_state()).get(address.lower())
    if mailbox is None:
        raise ControlError("unknown_mailbox", f"address: no Gmail mailbox {address}; create it first", 404)
    return mailbox


@control_route("/gmail/mailboxes", methods=["POST"])
def control_create_mailbox() -> Response:
    """Create a mailbox (201), or answer the existing one (200)."""
    spec = parse_body(MailboxIn)
    st = sandbox_state()
    with st.lock:
        existed = spec.address.lower() in _mailboxes(st)
        mailbox = mailbox_ensure(st, spec.address, spec.history_id_start)
        answer = {"address": mailbox.address, "historyId": str(mailbox.history_id)}
    return json_response(answer, 200 if existed else 201)


@control_route("/gmail/messages", methods=["POST"])
def control_deliver() -> Response:
    spec = parse_body(DeliveryIn)
    _existing(spec.address)
    raw = spec.raw_bytes()
    headers = email.message_from_bytes(raw, policy=email.policy.compat32)
    if not raw.strip() or not headers.keys():
        raise ControlError("invalid_field", "raw: not an RFC 822 message (it has no header lines)")
    stored = message_deliver(sandbox_state(), spec.address, raw, labels=spec.labels, internal_date=spec.internal_date)
    return json_response({"id": stored.id, "threadId": stored.thread_id, "historyId": str(stored.history_id)}, 201)


@control_route("/gmail/messages", methods=["GET"])
def control_list_messages() -> Response:
    address = request.args.get("address", "")
    if not _ADDRESS.match(address):
        raise ControlError("invalid_field", "address: a mailbox address is required (?address=...)")
    mailbox = _existing(address)
    with sandbox_state().lock:
        messages = list(mailbox.messages.values())
        history_id = mailbox.history_id
    listed = []
    for m in messages:
        parsed = email.message_from_bytes(m.raw, policy=email.policy.default)
        listed.append(
            {
                "id": m.id,
                "threadId": m.thread_id,
                "labelIds": m.label_ids,
                "historyId": str(m.history_id),
                "internalDate": str(m.internal_date),
                "from": str(parsed.get("From", "")),
                "subject": str(parsed.get("Subject", "")),
            }
        )
    return json_response({"address": mailbox.address, "historyId": str(history_id), "messages": listed})


@control_route("/gmail/expire-history", methods=["POST"])
def control_expire_history() -> Response:
    spec = parse_body(AddressIn)
    _existing(spec.address)
    floor = mailbox_expire_history(sandbox_state(), spec.address)
    return json_response({"address": spec.address.lower(), "historyId": str(floor)})


class LabelsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    id: str = Field(min_length=1)
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def some_change(self) -> LabelsIn:
        if not self.add and not self.remove:
            raise ValueError("give labels to add and/or remove")
        if not all(label.strip() for label in [*self.add, *self.remove]):
            raise ValueError("labels must be non-empty strings")
        if set(self.add) & set(self.remove):
            raise ValueError("a label cannot be both added and removed")
        return self


class DeleteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    ids: list[str] = Field(min_length=1)


@control_route("/gmail/messages/labels", methods=["POST"])
def control_modify_labels() -> Response:
    """Add and remove labels of one message (as messages.modify): one labelsAdded/labelsRemoved record."""
    spec = parse_body(LabelsIn)
    mailbox = _existing(spec.address)
    st = sandbox_state()
    try:
        message = message_modify(st, spec.address, spec.id, add=spec.add, remove=spec.remove)
    except KeyError as exc:
        raise ControlError("unknown_message", f"id: no message {spec.id} in {spec.address}", 404) from exc
    with st.lock:
        answer = {
            "id": message.id,
            "threadId": message.thread_id,
            "labelIds": list(message.label_ids),
            "historyId": str(mailbox.history_id),
        }
    return json_response(answer)


@control_route("/gmail/messages/delete", methods=["POST"])
def control_delete_messages() -> Response:
    """Delete messages for good (not to Trash): one messagesDeleted record each; messages.get then 404s."""
    spec = parse_body(DeleteIn)
    mailbox = _existing(spec.address)
    st = sandbox_state()
    try:
        count = messages_delete(st, spec.address, spec.ids)
    except KeyError as exc:
        raise ControlError("unknown_message", f"ids: no message {exc.args[0]} in {spec.address}", 404) from exc
    with st.lock:
        return json_response({"deleted": count, "historyId": str(mailbox.history_id)})


@control_route("/gmail/watch", methods=["GET"])
def control_watch_get() -> Response:
    """The mailbox's watch as the app set it (null if none or stopped), with whether it is still active."""
    address = request.args.get("address", "")
    if not _ADDRESS.match(address):
        raise ControlError("invalid_field", "address: a mailbox address is required (?address=...)")
    mailbox = _existing(address)
    with sandbox_state().lock:
        return json_response({"address": mailbox.address, "watch": mailbox.watch.as_dict() if mailbox.watch else None})


@control_route("/gmail/watch/expire", methods=["POST"])
def control_watch_expire() -> Response:
    """Let the mailbox's watch expire now: no more pushes until the app calls watch again."""
    spec = parse_body(AddressIn)
    mailbox = _existing(spec.address)
    with sandbox_state().lock:
        if mailbox.watch is not None:
            mailbox.watch.expiration = min(mailbox.watch.expiration, int(time.time() * 1000))
        return json_response({"address": mailbox.address, "watch": mailbox.watch.as_dict() if mailbox.watch else None})
