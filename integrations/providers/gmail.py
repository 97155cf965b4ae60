"""Gmail through google-api-python-client: history for the delta, batched messages.get for the bodies.

Everything Gmail-specific stays here: callers get `Delta`/`Email` and the typed errors of base.py.
An instance holds one httplib2 connection, which is not thread-safe: use one provider per job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import quote

import google_auth_httplib2
import httplib2
from django.conf import settings
from google.auth.exceptions import RefreshError, TransportError
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError
from googleapiclient.http import BatchHttpRequest

from config.trust import certificate_missing
from integrations.mail.bulk import bulk_headers
from integrations.mail.conversation import conversation_headers
from integrations.mail.mime import gmail_body_attachment_id, parse_gmail_payload
from integrations.providers.base import (
    CursorExpired,
    Delta,
    Email,
    Fetched,
    Folder,
    ProviderAuthError,
    ProviderError,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderUnavailable,
    cursor_for,
    cursor_position,
)

logger = logging.getLogger(__name__)

# Google's documented quota reasons, legacy (errors[].reason) and google.rpc (ErrorInfo.reason, status).
_RATE_LIMIT_REASONS = {
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "dailyLimitExceeded",
    "quotaExceeded",
    "concurrentLimitExceeded",
    "RATE_LIMIT_EXCEEDED",
    "RESOURCE_EXHAUSTED",
}
# What the Gmail error guide calls a credentials problem: only a new sign-in fixes it.
_AUTH_REASONS = {"authError", "insufficientPermissions", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "UNAUTHENTICATED"}
# A resync lists at most this many ids to count what it does not read (the ids of ~100k messages).
RESYNC_COUNT_LIMIT = 100_000
# Gmail's inbox categories (its tabs), as `Email.provider_category` names them.
_CATEGORIES = {
    "CATEGORY_PERSONAL": "personal",
    "CATEGORY_UPDATES": "updates",
    "CATEGORY_PROMOTIONS": "promotions",
    "CATEGORY_SOCIAL": "social",
    "CATEGORY_FORUMS": "forums",
}
# The system label each folder's mail carries: a sent message has SENT (and INBOX too when sent to oneself).
LABELS: dict[Folder, str] = {"inbox": "INBOX", "sent": "SENT"}
# OSError covers timeouts and refused or reset connections.
_TRANSPORT_ERRORS = (httplib2.HttpLib2Error, TransportError, OSError)


def gmail_credentials(
    *, access_token: str | None, refresh_token: str, expiry: datetime | None, scopes: list[str] | None = None
) -> Credentials:
    """Credentials from stored tokens, refreshed against settings.GOOGLE_TOKEN_URI.

    Built directly: `Credentials.from_authorized_user_info` always resets token_uri to Google's.
    `expiry` may be timezone-aware; google-auth wants naive UTC.
    """
    if expiry is not None and expiry.tzinfo is not None:
        expiry = expiry.astimezone(UTC).replace(tzinfo=None)
    return Credentials(  # type: ignore[no-untyped-call]
        token=access_token,
        refresh_token=refresh_token,
        token_uri=settings.GOOGLE_TOKEN_URI,
        client_id=settings.GOOGLE_CLIENT_ID,
        client_secret=settings.GOOGLE_CLIENT_SECRET,
        scopes=scopes or list(settings.GMAIL_SCOPES),
        expiry=expiry,
    )


def _retry_after(error: HttpError) -> float | None:
    value = error.resp.get("retry-after") if error.resp is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from Google, and the caller's backoff will do


def _entered(record: dict[str, Any], label: str) -> list[str]:
    """The messages a history record shows entering `label` (INBOX, SENT): added with the label, or
    labelled with it."""
    entered = [
        added.get("message") or {}
        for added in record.get("messagesAdded", [])
        if label in ((added.get("message") or {}).get("labelIds") or [label])  # no labels listed: as asked
    ]
    entered += [
        labelled.get("message") or {}
        for labelled in record.get("labelsAdded", [])
        if label in (labelled.get("labelIds") or [])
    ]
    return [str(message["id"]) for message in entered if message.get("id")]


def _reasons(error: HttpError) -> set[str]:
    """Every reason Google gives in the error body, in each shape it sends: the legacy `errors[].reason`
    (`rateLimitExceeded`), google.rpc `details[]` ErrorInfo `reason` (`RATE_LIMIT_EXCEEDED`) and the
    `status` (`RESOURCE_EXHAUSTED`). googleapiclient keeps only one of these lists, so read the body."""
    try:
        body = json.loads(error.content or b"{}")
    except (ValueError, UnicodeDecodeError):
        return set()
    payload = body.get("error") if isinstance(body, dict) else None
    if not isinstance(payload, dict):
        return set()
    reasons = {str(payload.get("status") or "")}
    for key in ("errors", "details"):
        items = payload.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("reason"):
                reasons.add(str(item["reason"]))
    reasons.discard("")
    return reasons


def _translate(error: Exception) -> ProviderError:
    """The typed error for whatever the client library raised."""
    if isinstance(error, HttpError):
        status = error.status_code
        reasons = _reasons(error)
        if status == 429 or (status == 403 and reasons & _RATE_LIMIT_REASONS):
            return ProviderRateLimited("Gmail asks us to slow down; syncing resumes shortly.", _retry_after(error))
        if status == 401 or (status == 403 and reasons & _AUTH_REASONS):
            return ProviderAuthError("Gmail no longer accepts Tasklift's access. Reconnect Gmail to continue.")
        if status == 403:  # neither a documented quota nor an auth reason: not the person's to fix
            return ProviderError(
                f"Gmail refused a request (HTTP 403{', ' + ', '.join(sorted(reasons)) if reasons else ''})."
            )
        if status >= 500:
            return ProviderUnavailable("Gmail is not answering right now; syncing will retry.")
        if status == 404:
            return ProviderNotFound("Gmail does not know this message (HTTP 404): deleted, or not readable yet.")
        return ProviderError(f"Gmail refused a request (HTTP {status}).")
    if isinstance(error, RefreshError):
        if error.retryable:
            return ProviderUnavailable("Google's sign-in service is not answering right now; syncing will retry.")
        return ProviderAuthError("Google revoked Tasklift's access to Gmail. Reconnect Gmail to continue.")
    if isinstance(error, _TRANSPORT_ERRORS):
        return ProviderUnavailable("Gmail could not be reached; syncing will retry.")
    raise error


class GmailProvider:
    """A connected Gmail mailbox (MailProvider). `address` only makes web links open the right account."""

    provider = "gmail"

    def __init__(self, credentials: Credentials, *, address: str | None = None) -> None:
        self._credentials = credentials
        self._initial_token = credentials.token
        self.address = address
        if missing := certificate_missing(settings.GOOGLE_CA_BUNDLE, service="Gmail"):
            raise ProviderUnavailable(missing)
        # httplib2 reads the CA file when this client first connects: a run trusts the certificate written last.
        plain = httplib2.Http(timeout=settings.GMAIL_HTTP_TIMEOUT_S, ca_certs=settings.GOOGLE_CA_BUNDLE or None)
        http = google_auth_httplib2.AuthorizedHttp(credentials, http=plain)
        self._service = build(
            "gmail",
            "v1",
            http=http,
            static_discovery=True,
            cache_discovery=False,
            client_options={"api_endpoint": settings.GMAIL_API_ENDPOINT},
        )

    # Credentials --------------------------------------------------------------------------------------
    @property
    def credentials(self) -> Credentials:
        """The live credentials: after a refresh they hold the new access token and expiry (to re-save)."""
        return self._credentials

    @property
    def credentials_refreshed(self) -> bool:
        """Whether the access token changed since construction, so the caller should save it again."""
        return bool(self._credentials.token) and self._credentials.token != self._initial_token

    # MailProvider ------------------------------------------------------------------------------------
    def current_cursor(self, folder: Folder = "inbox") -> str:
        """The mailbox's history id now, as a cursor of `folder` (history ids are the mailbox's, not a
        label's: the cursor carries its folder, `cursor_for`)."""
        profile = self._execute(self._users().getProfile(userId="me"))
        return cursor_for(folder, str(profile["historyId"]))

    def account_address(self) -> str:
        profile = self._execute(self._users().getProfile(userId="me"))
        return str(profile["emailAddress"])

    # Push (users.watch on INBOX, and SENT when asked, published to a Pub/Sub topic) --------------------
    def watch(self, topic: str, *, folders: Sequence[Folder] = ("inbox",)) -> datetime:
        """Ask Gmail to publish changes of `folders`' labels to `topic`; calling it again renews the watch
        (and replaces its labels). The labels decide which changes push: under INBOX alone, sent mail does
        not (the documented rule; live reports differ, and a push is only a doorbell either way). Returns
        when the watch expires (Gmail: in 7 days)."""
        labels = [LABELS[folder] for folder in dict.fromkeys(folders)]
        answer = self._execute(
            self._users().watch(
                userId="me", body={"topicName": topic, "labelIds": labels, "labelFilterBehavior": "include"}
            )
        )
        return datetime.fromtimestamp(int(answer["expiration"]) / 1000, tz=UTC)

    def stop_watch(self) -> None:
        self._execute(self._users().stop(userId="me"))

    def fetch_delta(self, cursor: str, *, folder: Folder = "inbox") -> Delta:
        """Every message that entered `folder`'s label (INBOX, SENT) after `cursor`, over all history
        pages: delivered or sent there, or labelled into it later (un-archived, "Not spam", moved from
        another label, a filter), and not deleted for good since (a messagesDeleted record: nothing to
        read). Saves nothing. A cursor of another folder is refused before any request."""
        return self.fetch_deltas({folder: cursor})[folder]

    def fetch_deltas(self, cursors: Mapping[Folder, str]) -> dict[Folder, Delta]:
        """What fetch_delta of each folder's cursor returns, from one history listing: filtered by the
        folder's label when there is one folder, over every label from the oldest cursor when there are
        more (Gmail's history ids are the mailbox's), each folder then taking the records after its own
        cursor. One call where an idle check would make one per folder."""
        starts = {folder: cursor_position(folder, cursor) for folder, cursor in cursors.items()}
        if not all(start.isdigit() for start in starts.values()):
            raise CursorExpired("This Gmail sync position is not a history id; a resync is needed.")
        only = next(iter(starts)) if len(starts) == 1 else None
        records, position = self._history(min(starts.values(), key=int), label=LABELS[only] if only else None)
        found: dict[Folder, dict[str, None]] = {folder: {} for folder in starts}
        for record in records:
            record_id = str(record.get("id", ""))
            for folder, start in starts.items():
                if record_id.isdigit() and int(record_id) <= int(start):
                    continue  # before this folder's cursor: its last read saw it
                message_ids = found[folder]
                for message_id in _entered(record, LABELS[folder]):
                    message_ids.setdefault(message_id, None)
                for deleted in record.get("messagesDeleted", []):
                    message_ids.pop(str((deleted.get("message") or {}).get("id", "")), None)
        return {
            folder: Delta(message_ids=list(found[folder]), new_cursor=cursor_for(folder, position or start))
            for folder, start in starts.items()
        }

    def _history(self, start: str, *, label: str | None) -> tuple[list[dict[str, Any]], str]:
        """Every history record after `start` (of `label`'s messages, or all), over all pages, and the
        mailbox's history id at the end."""
        records: list[dict[str, Any]] = []
        position = ""
        page_token: str | None = None
        while True:
            request = (
                self._users()
                .history()
                .list(
                    userId="me",
                    startHistoryId=start,
                    # Deletions too: they change nothing of which mail is listed (GMAIL_FILTER), and a
                    # message deleted before it is read is then known gone, not a 404 to wait out.
                    historyTypes=["messageAdded", "labelAdded", "messageDeleted"],
                    maxResults=500,
                    pageToken=page_token,
                    **({"labelId": label} if label else {}),
                )
            )
            try:
                page = self._execute(request, reraise_http=True)
            except HttpError as error:
                if error.status_code in (400, 404):  # too old, or a cursor Gmail cannot read: resync
                    raise CursorExpired("Gmail no longer has the history since the last sync.") from error
                raise _translate(error) from error
            records.extend(page.get("history", []))
            position = str(page.get("historyId", position))
            page_token = page.get("nextPageToken")
            if not page_token:
                return records, position

    def resync(
        self,
        since: datetime,
        limit: int,
        *,
        cursor: str,
        handled: Callable[[list[str]], set[str]],
        folder: Folder = "inbox",
    ) -> Delta:
        """The history id of now (taken first, so mail arriving meanwhile is in the next delta), and the
        mail of `folder`'s label the ledger (`handled`) does not hold that was received since `since` or
        came into the label after the old `cursor`: the newest `limit` of it, and how many more (`not_read`).

        Mail moved in keeps its received time, and the listing gives ids only, so each unhandled message
        received before `since` is looked at (format=minimal, in batches): its `historyId` is the last
        change to it, and one past the old cursor was delivered or relabelled since. One not past it was in
        the inbox, unchanged, when the old cursor was read: handled then, or there before the mailbox was
        connected (never owed). At most `limit` are looked at; those left are counted in `not_read` too
        (they may be owed: only looking would tell). An old cursor of another folder tells no position:
        only the mail received since `since` is then owed."""
        label = LABELS[folder]
        history_id = self.current_cursor(folder)
        try:
            floor = cursor_position(folder, cursor)
        except CursorExpired:
            floor = ""
        recent = set(self._label_ids(label, after=since, limit=RESYNC_COUNT_LIMIT))
        unhandled: list[str] = []  # newest first
        for page in self._label_pages(label, after=None, limit=RESYNC_COUNT_LIMIT):
            known = handled(page)
            unhandled.extend(m for m in page if m not in known)
        older = [m for m in unhandled if m not in recent]
        looked_at = older[:limit]
        moved_in = set(self._entered_since(looked_at, cursor=floor, since=since))
        owed = [m for m in unhandled if m in recent or m in moved_in]
        kept = owed[:limit]
        not_read = len(owed) - len(kept) + len(older) - len(looked_at)
        return Delta(list(reversed(kept)), history_id, not_read=not_read)

    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        """The messages in the order given (repeats dropped), in batches. A message whose part failed (a
        404 may be a deletion or a passing fault, a 5xx a passing fault) is read once more; a second
        failure is the message's own (`failed`), a 404 too: two reads a moment apart cannot tell a
        deletion from a fault that lasts a second (the history's messagesDeleted does, or a later run)."""
        wanted = list(dict.fromkeys(message_ids))
        found: dict[str, Email] = {}
        failed: dict[str, HttpError] = {}
        size = max(1, min(settings.GMAIL_BATCH_SIZE, 100))
        for start in range(0, len(wanted), size):
            batch_found, batch_failed = self._fetch_batch(wanted[start : start + size])
            found.update(batch_found)
            failed.update(batch_failed)
        if failed:
            again, failed = self._fetch_batch(list(failed))
            found.update(again)
        return Fetched(
            emails=[found[m] for m in wanted if m in found],
            failed={m: _translate(error) for m, error in failed.items()},
        )

    def first_read(self, since: datetime, limit: int, *, folder: Folder = "inbox") -> Delta:
        """The history id of now (taken first, so mail arriving meanwhile is in the next delta), and the
        newest `limit` messages of `folder`'s label received since `since`, oldest first; the rest of that
        window is counted (`not_read`, up to RESYNC_COUNT_LIMIT ids listed)."""
        history_id = self.current_cursor(folder)
        window = self._label_ids(LABELS[folder], after=since, limit=RESYNC_COUNT_LIMIT)
        kept = window[:limit]
        return Delta(list(reversed(kept)), history_id, not_read=len(window) - len(kept))

    def backfill_message_ids(self, after: datetime, limit: int) -> list[str]:
        """The newest `limit` inbox messages received after `after`, oldest first (the connect-time backfill)."""
        return list(reversed(self._label_ids("INBOX", after=after, limit=limit)))

    def _label_ids(self, label: str, *, after: datetime, limit: int) -> list[str]:
        """Ids of messages with `label` received after `after`, newest first, at most `limit`."""
        return [message_id for page in self._label_pages(label, after=after, limit=limit) for message_id in page]

    def _label_pages(self, label: str, *, after: datetime | None, limit: int) -> Iterator[list[str]]:
        """Ids of messages with `label` (received after `after`, if given), newest first, a page at a time,
        at most `limit` in all."""
        listed = 0
        page_token: str | None = None
        while listed < limit:
            request = (
                self._users()
                .messages()
                .list(
                    userId="me",
                    labelIds=[label],
                    q=f"after:{int(after.timestamp())}" if after is not None else None,
                    maxResults=min(limit - listed, 500),
                    pageToken=page_token,
                )
            )
            page = self._execute(request)
            ids = [str(m["id"]) for m in page.get("messages", [])][: limit - listed]
            listed += len(ids)
            if ids:
                yield ids
            page_token = page.get("nextPageToken")
            if not page_token:
                break

    def _entered_since(self, ids: list[str], *, cursor: str, since: datetime) -> list[str]:
        """Those of `ids` (in their order) changed after history id `cursor` (delivered or labelled into the
        inbox since) or received since `since`. A message whose look fails on its own is kept: reading it
        is the fetch's to tell (a failure of that message, or its mail)."""
        floor = int(cursor) if cursor.isdigit() else None
        since_ms = int(since.timestamp() * 1000)
        size = max(1, min(settings.GMAIL_BATCH_SIZE, 100))
        kept: list[str] = []
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            looks = self._minimal_batch(chunk)
            for message_id in chunk:
                look = looks.get(message_id)
                if look is None:
                    kept.append(message_id)
                    continue
                changed, received = str(look.get("historyId") or ""), str(look.get("internalDate") or "")
                changed_after = floor is not None and (not changed.isdigit() or int(changed) > floor)
                if changed_after or (received.isdigit() and int(received) >= since_ms):
                    kept.append(message_id)
        return kept

    # Internals ----------------------------------------------------------------------------------------
    def _users(self) -> Any:
        return self._service.users()

    def _execute(self, request: Any, *, reraise_http: bool = False) -> dict[str, Any]:
        num_retries = settings.GMAIL_NUM_RETRIES
        try:
            result: dict[str, Any] = request.execute(num_retries=num_retries)
        except HttpError as error:
            if reraise_http:
                raise
            raise _translate(error) from error
        except (RefreshError, *_TRANSPORT_ERRORS) as error:
            raise _translate(error) from error
        return result

    def _fetch_batch(self, ids: list[str]) -> tuple[dict[str, Email], dict[str, HttpError]]:
        """One batch: the emails read, and the parts that failed on their own. A part refused for the
        mailbox's sign-in or throttled concerns the whole mailbox and raises."""
        found: dict[str, Email] = {}
        failed: dict[str, HttpError] = {}
        apart: dict[str, dict[str, Any]] = {}  # messages whose body Gmail sent as an attachment

        def collect(message_id: str) -> Callable[[str, Any, HttpError | None], None]:
            def callback(_request_id: str, response: Any, error: HttpError | None) -> None:
                if error is not None:
                    failed[message_id] = error
                elif gmail_body_attachment_id(response.get("payload") or {}):
                    apart[message_id] = response
                else:
                    found[message_id] = self._email(response)

            return callback

        batch = BatchHttpRequest(batch_uri=settings.GMAIL_BATCH_URI)
        messages = self._users().messages()  # built once: each build re-reads the API description
        for message_id in ids:
            batch.add(messages.get(userId="me", id=message_id, format="full"), callback=collect(message_id))
        try:
            batch.execute()
        except (HttpError, RefreshError, *_TRANSPORT_ERRORS) as error:
            raise _translate(error) from error
        for message_id, message in apart.items():
            try:
                found[message_id] = self._email(message, body_data=self._body_apart(message))
            except HttpError as error:
                failed[message_id] = error
        mailbox_wide = [
            e for e in failed.values() if isinstance(_translate(e), ProviderAuthError | ProviderRateLimited)
        ]
        if mailbox_wide:
            self._raise_worst(mailbox_wide)
        logger.debug("gmail batch fetched %d of %d messages", len(found), len(ids))
        return found, failed

    def _minimal_batch(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """One batch of messages.get in format=minimal (labels, historyId, internalDate; no body): what came
        back, by id. A part that failed on its own is left out; one refused for the mailbox's sign-in, or
        throttled, concerns the whole mailbox and raises."""
        found: dict[str, dict[str, Any]] = {}
        failed: list[HttpError] = []

        def collect(message_id: str) -> Callable[[str, Any, HttpError | None], None]:
            def callback(_request_id: str, response: Any, error: HttpError | None) -> None:
                if error is not None:
                    failed.append(error)
                else:
                    found[message_id] = response

            return callback

        batch = BatchHttpRequest(batch_uri=settings.GMAIL_BATCH_URI)
        messages = self._users().messages()
        for message_id in ids:
            batch.add(messages.get(userId="me", id=message_id, format="minimal"), callback=collect(message_id))
        try:
            batch.execute()
        except (HttpError, RefreshError, *_TRANSPORT_ERRORS) as error:
            raise _translate(error) from error
        mailbox_wide = [e for e in failed if isinstance(_translate(e), ProviderAuthError | ProviderRateLimited)]
        if mailbox_wide:
            self._raise_worst(mailbox_wide)
        return found

    @staticmethod
    def _raise_worst(failures: list[HttpError]) -> NoReturn:
        """Auth beats rate limiting beats the rest: it decides what the caller must do."""
        errors = [_translate(f) for f in failures]
        for kind in (ProviderAuthError, ProviderRateLimited, ProviderUnavailable):
            chosen = [e for e in errors if isinstance(e, kind)]
            if chosen:
                if isinstance(chosen[0], ProviderRateLimited):
                    waits = [e.retry_after for e in chosen if isinstance(e, ProviderRateLimited) and e.retry_after]
                    raise ProviderRateLimited(chosen[0].message, max(waits) if waits else None)
                raise chosen[0]
        raise errors[0]

    def _body_apart(self, message: dict[str, Any]) -> str:
        """The body's data that Gmail sent as an attachment (a text part with a file name but no
        attachment disposition: still the text the person was sent)."""
        attachment_id = gmail_body_attachment_id(message.get("payload") or {})
        request = self._users().messages().attachments().get(userId="me", messageId=message["id"], id=attachment_id)
        return str(self._execute(request, reraise_http=True).get("data", ""))

    def _email(self, message: dict[str, Any], *, body_data: str | None = None) -> Email:
        text = parse_gmail_payload(message.get("payload") or {}, body_data=body_data)
        internal_ms = message.get("internalDate")
        received_at = (
            datetime.fromtimestamp(int(internal_ms) / 1000, UTC) if internal_ms else text.date or datetime.now(UTC)
        )
        headers = [
            (str(header.get("name", "")), str(header.get("value", "")))
            for header in (message.get("payload") or {}).get("headers") or []
            if isinstance(header, dict)
        ]
        conversation = conversation_headers(headers)
        return Email(
            provider=self.provider,
            message_id=str(message["id"]),
            thread_id=str(message.get("threadId", message["id"])),
            sender=text.sender,
            subject=text.subject,
            received_at=received_at,
            body_text=text.body_text,
            web_link=self.web_link(str(message["id"])),
            internet_message_id=text.message_id,
            list_headers=bulk_headers(headers),
            provider_category=gmail_category(message.get("labelIds") or []),
            in_reply_to=conversation.in_reply_to,
            references=conversation.references,
            to=conversation.to,
            cc=conversation.cc,
        )

    def web_link(self, message_id: str) -> str:
        return gmail_web_link(self.address, message_id)


def gmail_category(label_ids: list[str]) -> str:
    """The inbox category (tab) Gmail filed a message under, from its labels; "" when it has none."""
    return next((_CATEGORIES[label] for label in label_ids if label in _CATEGORIES), "")


def gmail_web_link(address: str | None, message_id: str) -> str:
    """Opens the message in Gmail, in the account of `address` when known."""
    if address:
        return f"https://mail.google.com/mail/?authuser={quote(address)}#all/{message_id}"
    return f"https://mail.google.com/mail/u/0/#all/{message_id}"
