"""Outlook through Microsoft Graph over `requests`: inbox message delta for the delta (it brings the bodies
along), JSON $batch of messages by id for the rest.

Everything Graph-specific stays here: callers get `Delta`/`Email` and the typed errors of base.py.
The cursor is a Graph delta URL: the first one is built here (`initial_cursor`), every later one is the
`@odata.deltaLink` Graph handed out. An instance holds one requests.Session: use one provider per job.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol
from urllib.parse import quote, urlencode, urlsplit

import requests
from django.conf import settings

from config.trust import certificate_missing, trusting_session
from integrations.mail.bulk import bulk_headers
from integrations.mail.conversation import Recipient, conversation_headers, recipient_list
from integrations.mail.mime import html_to_text, message_id_key
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

# Only what Email needs: Graph then sends nothing else of the message. The internet headers (Graph sends
# them only when selected) are read for the few that say bulk mail (`Email.list_headers`) and for
# In-Reply-To and References (Graph has no property for them); the recipients come as Graph's own lists.
MESSAGE_FIELDS = (
    "subject", "from", "receivedDateTime", "body", "webLink", "conversationId", "internetMessageId",
    "inferenceClassification", "internetMessageHeaders", "toRecipients", "ccRecipients",
)  # fmt: skip
# The delta lists ids and received times only: bodies are read in $batch for the mail that is read, so a
# first sync of a large inbox, or a resync, holds ids, not bodies. Options are fixed by the first request
# of a delta (Graph encodes them in its links), and no $filter: a message moved into the Inbox must show
# whatever its received time.
DELTA_FIELDS = ("receivedDateTime",)
# A resync's round also asks when each message last changed (a move into the Inbox is a change). The field
# changes nothing of which mail the delta lists, so the cursor it ends with reads the same query
# (integrations.services.OUTLOOK_FILTER); later rounds only carry one more field.
RESYNC_FIELDS = (*DELTA_FIELDS, "lastModifiedDateTime")
RESYNC_LEDGER_CHUNK = 1000  # ids asked of the ledger at once
MAX_RETRY_SLEEP_S = 30.0  # a longer Retry-After goes back to the caller rather than holding a worker
BATCH_SIZE = 20  # Graph's limit per JSON batch
MAX_RECIPIENT_ENTRIES = 200  # of a recipient list looked at (repeats and bad entries dropped, then bounded)
# Each folder's well-known name at Graph: Sent mail is `sentitems`, with its own delta like any folder's.
FOLDER_NAMES: dict[Folder, str] = {"inbox": "inbox", "sent": "sentitems"}
# Graph's well-known folder names: a delta link naming one by name names that folder (Graph's own links name
# it by id, which only Graph resolves; the folder a cursor is for is then told by `cursor_for`'s mark).
_WELL_KNOWN = {
    "archive", "clutter", "conflicts", "conversationhistory", "deleteditems", "drafts", "inbox", "junkemail",
    "localfailures", "msgfolderroot", "outbox", "recoverableitemsdeletions", "scheduled", "searchfolders",
    "sentitems", "serverfailures", "syncissues",
}  # fmt: skip
_DELTA_FOLDER = re.compile(r"/mailfolders(?:/([^/()']+)|\('([^']+)'\))/messages/delta$", re.IGNORECASE)
_RESYNC_CODES = {"syncstatenotfound", "resyncrequired", "syncstateinvalid", "errorinvalidsyncstatedata"}
_RETRYABLE = (429, 503)


def graph_session() -> requests.Session:
    """A Session that trusts settings.MICROSOFT_CA_BUNDLE when it is set, never `verify=False`.

    trust_env is turned off with it: a REQUESTS_CA_BUNDLE in the environment would otherwise override
    Session.verify (reference §0), and the sandbox's certificate is in no system bundle.
    """
    return trusting_session(settings.MICROSOFT_CA_BUNDLE)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from Graph; the caller's backoff will do


def _error_code(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("code", "")) if isinstance(error, dict) else ""


class TokenSource(Protocol):
    """Gives the access token for Graph; `force_refresh` asks for a new one (the last was refused).
    May raise ProviderAuthError (only the person can fix it) or ProviderUnavailable."""

    def __call__(self, *, force_refresh: bool = False) -> str: ...


class OutlookProvider:
    """A connected Outlook mailbox (MailProvider).

    `access_token` is called before every request, so it can refresh (MSAL's acquire_token_silent); when the
    refresh is refused it raises ProviderAuthError, which goes through as is. It stays reachable as
    `provider.access_token`, so the caller can save what a refresh changed. `address` is the mailbox, if known.
    """

    provider = "outlook"

    def __init__(self, access_token: TokenSource, *, address: str | None = None) -> None:
        # requests would stop the run on an OSError naming no service; a real Microsoft's bundle is the operator's.
        sandbox_ca = settings.MICROSOFT_CA_BUNDLE if settings.MICROSOFT_SIMULATED else ""
        if missing := certificate_missing(sandbox_ca, service="Outlook"):
            raise ProviderUnavailable(missing)
        self.access_token = access_token
        self.address = address
        self._session = graph_session()
        self._endpoint = settings.GRAPH_API_ENDPOINT.rstrip("/")

    # MailProvider ------------------------------------------------------------------------------------
    def initial_cursor(self, folder: Folder = "inbox") -> str:
        """The first delta URL of `folder`. Not fetched here: the first fetch_delta GETs it, which lists the
        folder (for the backfill) and gives the first deltaLink."""
        return cursor_for(folder, self._initial_url(DELTA_FIELDS, folder))

    def _initial_url(self, fields: tuple[str, ...], folder: Folder = "inbox") -> str:
        query = urlencode({"$select": ",".join(fields)}, quote_via=quote, safe="$,:")
        return f"{self._endpoint}/me/mailFolders/{FOLDER_NAMES[folder]}/messages/delta?{query}"

    def current_cursor(self, folder: Folder = "inbox") -> str:
        return self.initial_cursor(folder)

    def account_address(self) -> str:
        me = self._request("GET", f"{self._endpoint}/me")
        return str(me.get("mail") or me.get("userPrincipalName") or "")

    def fetch_deltas(self, cursors: Mapping[Folder, str]) -> dict[Folder, Delta]:
        """What fetch_delta of each folder's cursor returns, the first page of every folder's delta in one
        JSON $batch (a delta link follows one folder; the batch asks both in one call). Further pages are
        followed on their own; a folder whose part failed is asked again on its own (fetch_delta: retries,
        Retry-After), except a part that says the sync state is gone (CursorExpired, as fetch_delta)."""
        links = {folder: _folder_link(folder, cursor) for folder, cursor in cursors.items()}
        for link in links.values():
            self._check_url(link, expired_if_foreign=True)
        batchable = len(links) > 1 and all(
            link.startswith(f"{self._endpoint}/") and not _is_initial(link) for link in links.values()
        )
        if not batchable:  # one folder, or a first query: nothing to save
            return {folder: self.fetch_delta(cursor, folder=folder) for folder, cursor in cursors.items()}
        parts = [
            {
                "id": folder,
                "method": "GET",
                "url": link[len(self._endpoint) :],
                "headers": {"Prefer": self._prefer(page_size=True)},
            }
            for folder, link in links.items()
        ]
        answer = self._request("POST", f"{self._endpoint}/$batch", json={"requests": parts})
        pages = {str(part.get("id", "")): part for part in answer.get("responses") or [] if isinstance(part, dict)}
        deltas: dict[Folder, Delta] = {}
        for folder, link in links.items():
            part = pages.get(folder) or {}
            status, body = int(part.get("status", 0) or 0), part.get("body")
            if status == 410 or _part_code(body).lower() in _RESYNC_CODES:
                raise CursorExpired("Outlook no longer has the sync state of the last sync; a full resync is needed.")
            if status != 200 or not isinstance(body, dict):
                deltas[folder] = self.fetch_delta(cursors[folder], folder=folder)
                continue
            found, delta_link = self._round(link, first_page=body)
            received = {m: _received(item.get("receivedDateTime")) for m, item in found.items()}
            deltas[folder] = self._delta(received, cursor_for(folder, delta_link), backfill=False)
        return deltas

    def fetch_delta(self, cursor: str, *, folder: Folder = "inbox") -> Delta:
        """Every message that entered `folder` (the inbox, `sentitems`) or changed since `cursor`, over all
        pages, oldest first. Saves nothing. A cursor of another folder is refused before any request.

        A message that comes back only because it was read or flagged is listed too (the pipeline's ledger
        drops what it has seen); removed ones are not. Pages are followed however many there are; a link
        that comes back again is a loop and ends the fetch.
        """
        link = _folder_link(folder, cursor)
        found, delta_link = self._round(link)
        received = {m: _received(item.get("receivedDateTime")) for m, item in found.items()}
        return self._delta(received, cursor_for(folder, delta_link), backfill=_is_initial(link))

    def resync(
        self,
        since: datetime,
        limit: int,
        *,
        cursor: str,
        handled: Callable[[list[str]], set[str]],
        folder: Folder = "inbox",
    ) -> Delta:
        """A fresh delta of `folder` from the start: its deltaLink is the new cursor, and what to read is
        the folder's mail the ledger (`handled`) does not hold that was received, or last changed, since
        `since` (the newest `limit`; how many more is `not_read`).

        Mail moved into the Inbox keeps its receivedDateTime, but a move changes it (Exchange makes the
        item anew in the folder it enters), so `lastModifiedDateTime` tells mail moved in after the last
        read; mail unchanged since was in the inbox then: handled, or there before the mailbox was
        connected (never owed). `cursor` (the old delta link) tells no time: it is not needed here."""
        found, link = self._round(self._initial_url(RESYNC_FIELDS, folder))
        delta_link = cursor_for(folder, link)
        unhandled: dict[str, dict[str, Any]] = {}
        ids = list(found)
        for start in range(0, len(ids), RESYNC_LEDGER_CHUNK):
            chunk = ids[start : start + RESYNC_LEDGER_CHUNK]
            known = handled(chunk)
            unhandled.update((m, found[m]) for m in chunk if m not in known)

        def entered(item: dict[str, Any]) -> bool:
            times = [_received(item.get(name)) for name in ("receivedDateTime", "lastModifiedDateTime")]
            told = [when for when in times if when is not None]
            return not told or any(when >= since for when in told)

        owed = {m: _received(item.get("receivedDateTime")) for m, item in unhandled.items() if entered(item)}
        listed = self._delta(owed, delta_link, backfill=False)
        kept = listed.message_ids[-limit:] if limit else []
        return Delta(kept, delta_link, listed.received, not_read=len(listed.message_ids) - len(kept))

    def first_read(self, since: datetime, limit: int, *, folder: Folder = "inbox") -> Delta:
        """A first delta round of `folder` (unfiltered, the query of every later delta): its deltaLink is
        the cursor, and what to read is the newest `limit` of its mail received since `since`, oldest
        first; the rest of that window is counted (`not_read`). Mail arriving during the round is in the
        next delta. An item Graph gives no time for is taken as in the window (never dropped unseen)."""
        found, link = self._round(self._initial_url(DELTA_FIELDS, folder))
        times = {m: _received(item.get("receivedDateTime")) for m, item in found.items()}
        window = {m: when for m, when in times.items() if when is None or when >= since}
        listed = self._delta(window, cursor_for(folder, link), backfill=False)
        kept = listed.message_ids[-limit:] if limit else []
        received = {m: listed.received[m] for m in kept if m in listed.received}
        return Delta(kept, listed.new_cursor, received, not_read=len(listed.message_ids) - len(kept))

    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        """The messages in the order given (repeats dropped), in $batch requests of at most 20. A part that
        failed on its own (a 404 may be a deletion or a passing fault) is read once more; a second failure
        is the message's own (`failed`), a 404 too: two reads a moment apart cannot tell a deletion from a
        fault that lasts a second (the delta's @removed does, or a later run)."""
        wanted = list(dict.fromkeys(message_ids))
        found: dict[str, Email] = {}
        failed: dict[str, tuple[int, ProviderError]] = {}
        for start in range(0, len(wanted), BATCH_SIZE):
            batch_found, batch_failed = self._fetch_batch(wanted[start : start + BATCH_SIZE])
            found.update(batch_found)
            failed.update(batch_failed)
        if failed:
            first = list(failed)
            failed = {}
            for start in range(0, len(first), BATCH_SIZE):
                batch_found, batch_failed = self._fetch_batch(first[start : start + BATCH_SIZE])
                found.update(batch_found)
                failed.update(batch_failed)
        return Fetched(
            emails=[found[m] for m in wanted if m in found],
            failed={m: error for m, (_, error) in failed.items()},
        )

    # Internals ----------------------------------------------------------------------------------------
    def _round(self, cursor: str, *, first_page: dict[str, Any] | None = None) -> tuple[dict[str, dict[str, Any]], str]:
        """One delta round from `cursor` over all its pages (the first already fetched, when given): the
        items listed (removed ones dropped), in arrival order, by id, and the deltaLink that ends it."""
        self._check_url(cursor, expired_if_foreign=True)
        found: dict[str, dict[str, Any]] = {}
        url, seen = cursor, {cursor}
        while True:
            page = (
                first_page if first_page is not None else self._request("GET", url, prefer=self._prefer(page_size=True))
            )
            first_page = None
            for item in page.get("value") or []:
                if not isinstance(item, dict) or not item.get("id"):
                    continue
                message_id = str(item["id"])
                if "@removed" in item:
                    found.pop(message_id, None)  # added, then removed in the same round: nothing to read
                    continue
                found[message_id] = item
            delta_link = page.get("@odata.deltaLink")
            if delta_link:
                self._check_url(str(delta_link))
                return found, str(delta_link)
            next_link = page.get("@odata.nextLink")
            if not next_link:
                raise ProviderUnavailable("Outlook ended a sync without a link to continue from; syncing will retry.")
            url = str(next_link)
            self._check_url(url)
            if url in seen:
                raise ProviderUnavailable("Outlook sent the same sync page twice; syncing will retry.")
            seen.add(url)

    @staticmethod
    def _delta(found: dict[str, datetime | None], delta_link: str, *, backfill: bool) -> Delta:
        # Graph does not promise an order: oldest first by receivedDateTime, arrival order among equals
        # (an item without the field, which Graph may send for an update, keeps its place at the end).
        latest = datetime.max.replace(tzinfo=UTC)
        ranked = sorted(enumerate(found.items()), key=lambda pair: (pair[1][1] or latest, pair[0]))
        ids = [message_id for _, (message_id, _received) in ranked]
        received = {m: when for m, when in found.items() if when is not None}
        return Delta(message_ids=ids, new_cursor=delta_link, received=received, backfill=backfill)

    def _check_url(self, url: str, *, expired_if_foreign: bool = False) -> None:
        """Only ever send the token to the Graph endpoint (a cursor or link elsewhere is not followed)."""
        target, endpoint = urlsplit(url), urlsplit(self._endpoint)
        if (target.scheme, target.netloc) != (endpoint.scheme, endpoint.netloc):
            if expired_if_foreign:
                raise CursorExpired("The saved Outlook sync position is not a Graph link; a full resync is needed.")
            raise ProviderError(f"Outlook sent a link to another host ({target.netloc}); it was not followed.")

    @staticmethod
    def _prefer(*, page_size: bool = False) -> str:
        # Immutable ids stay the same when a message moves; the header applies only to the request that
        # carries it, so it goes on every one.
        prefer = ['IdType="ImmutableId"', 'outlook.body-content-type="text"']
        if page_size:
            prefer.insert(0, f"odata.maxpagesize={settings.GRAPH_PAGE_SIZE}")
        return ", ".join(prefer)

    def _request(
        self, method: str, url: str, *, prefer: str | None = None, json: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One Graph call, retried on 429/503 honouring Retry-After; the answer's JSON or a typed error."""
        headers = {"Prefer": prefer or self._prefer(), "Accept": "application/json"}
        refresh, refreshed = False, False
        for attempt in range(settings.GRAPH_MAX_RETRIES + 2):
            headers["Authorization"] = f"Bearer {self.access_token(force_refresh=refresh)}"
            refresh = False  # a forced renewal is asked for once, not on every later retry
            try:
                response = self._session.request(
                    method, url, headers=headers, json=json, timeout=settings.GRAPH_HTTP_TIMEOUT_S
                )
            except requests.Timeout as error:
                raise ProviderUnavailable("Outlook did not answer in time; syncing will retry.") from error
            except requests.RequestException as error:  # refused, reset, TLS failure
                raise ProviderUnavailable("Outlook could not be reached; syncing will retry.") from error
            if response.status_code == 401 and not refreshed:
                # The token was refused before its expiry (revoked, or the clocks disagree): renew it once.
                refresh = refreshed = True
                continue
            if response.status_code in _RETRYABLE and attempt < settings.GRAPH_MAX_RETRIES:
                wait = _retry_after(response)
                wait = wait if wait is not None else float(2**attempt)
                if wait <= MAX_RETRY_SLEEP_S:
                    logger.info("graph answered %s; retrying in %.1f s", response.status_code, wait)
                    time.sleep(wait)
                    continue
            if response.status_code >= 400:
                self._raise_for(response)
            if response.status_code == 204 or not response.content:
                return {}  # a DELETE, a reauthorize
            try:
                body = response.json()
            except ValueError as error:
                raise ProviderUnavailable("Outlook sent an answer that is not JSON; syncing will retry.") from error
            return body if isinstance(body, dict) else {}
        raise AssertionError("unreachable: the last attempt returns or raises")

    # Push (a subscription on the inbox's messages) ---------------------------------------------------
    def subscribe(
        self,
        *,
        notification_url: str,
        lifecycle_url: str,
        client_state: str,
        expires_at: datetime,
        folder: Folder = "inbox",
    ) -> tuple[str, datetime]:
        """Ask Graph to notify `notification_url` of mail created in `folder` (the inbox, or `sentitems`).
        Graph validates both URLs before it answers. Returns the subscription id and when it expires."""
        resource = "me/mailFolders('Inbox')/messages" if folder == "inbox" else "me/mailFolders('sentitems')/messages"
        answer = self._request(
            "POST",
            f"{self._endpoint}/subscriptions",
            prefer='IdType="ImmutableId"',  # notifications then name messages by the ids our delta reads
            json={
                "changeType": "created",
                "notificationUrl": notification_url,
                "lifecycleNotificationUrl": lifecycle_url,
                "resource": resource,
                "expirationDateTime": _graph_time(expires_at),
                "clientState": client_state,
                "latestSupportedTlsVersion": "v1_2",
            },
        )
        return str(answer["id"]), _received(answer.get("expirationDateTime")) or expires_at

    def renew_subscription(self, subscription_id: str, expires_at: datetime) -> datetime:
        """Push a subscription's expiry to `expires_at`. Raises ProviderNotFound when it is gone."""
        answer = self._request(
            "PATCH",
            f"{self._endpoint}/subscriptions/{quote(subscription_id, safe='')}",
            json={"expirationDateTime": _graph_time(expires_at)},
        )
        return _received(answer.get("expirationDateTime")) or expires_at

    def unsubscribe(self, subscription_id: str) -> None:
        """Delete a subscription; one already gone is fine."""
        with contextlib.suppress(ProviderNotFound):
            self._request("DELETE", f"{self._endpoint}/subscriptions/{quote(subscription_id, safe='')}")

    @staticmethod
    def _raise_for(response: requests.Response) -> NoReturn:
        status, code = response.status_code, _error_code(response)
        if status == 410 or code.lower() in _RESYNC_CODES:
            raise CursorExpired("Outlook no longer has the sync state of the last sync; a full resync is needed.")
        raise _status_error(status, code, _retry_after(response))

    def _fetch_batch(self, ids: list[str]) -> tuple[dict[str, Email], dict[str, tuple[int, ProviderError]]]:
        """One $batch for `ids`: the emails read, and the parts that failed on their own (status, error).
        Parts answered 429/503 are sent again (as their own smaller batch); throttling that persists, or a
        part refused for the mailbox's sign-in, concerns the whole mailbox and raises."""
        found: dict[str, Email] = {}
        own: dict[str, tuple[int, ProviderError]] = {}
        pending = list(ids)
        for attempt in range(settings.GRAPH_MAX_RETRIES + 1):
            parts = [
                {
                    "id": str(index),
                    "method": "GET",
                    "url": f"/me/messages/{quote(message_id, safe='')}?$select={','.join(MESSAGE_FIELDS)}",
                    "headers": {"Prefer": self._prefer()},
                }
                for index, message_id in enumerate(pending)
            ]
            answer = self._request("POST", f"{self._endpoint}/$batch", json={"requests": parts})
            retry: dict[str, ProviderError] = {}
            waits: list[float] = []
            failures: list[ProviderError] = []
            for part in answer.get("responses") or []:
                index = int(part.get("id", -1)) if str(part.get("id", "")).isdigit() else -1
                if not 0 <= index < len(pending):
                    continue
                status, body = int(part.get("status", 0)), part.get("body")
                if status == 200 and isinstance(body, dict):
                    found[pending[index]] = self._email(body)
                elif status == 404 or (status >= 500 and status not in _RETRYABLE):
                    # Deleted since the delta, or a fault of this one message: the caller reads it again.
                    own[pending[index]] = (status, _status_error(status, _part_code(body), None))
                elif status in _RETRYABLE:
                    headers = {str(k).lower(): str(v) for k, v in (part.get("headers") or {}).items()}
                    try:
                        asked: float | None = max(float(headers.get("retry-after", "")), 0.0)
                    except ValueError:
                        asked = None
                    waits.append(asked if asked is not None else float(2**attempt))
                    retry[pending[index]] = _status_error(status, _part_code(body), asked)
                elif status == 403:
                    # One message we may not read: not the mailbox's sign-in (that fails the whole batch).
                    own[pending[index]] = (
                        status,
                        ProviderError(f"Outlook refused access to one message ({_part_code(body)})."),
                    )
                elif status == 401:
                    failures.append(_status_error(status, _part_code(body), None))
                else:
                    own[pending[index]] = (status, _status_error(status, _part_code(body), None))
            answered = {int(part["id"]) for part in answer.get("responses") or [] if str(part.get("id", "")).isdigit()}
            if len(answered & set(range(len(pending)))) < len(pending):
                # A part with no answer is not a deleted message: never record it as handled.
                raise ProviderUnavailable("Outlook left part of a batch unanswered; syncing will retry.")
            hard = [f for f in failures if not isinstance(f, ProviderRateLimited | ProviderUnavailable)]
            if hard:
                raise _worst(hard)
            if not retry:
                break
            wait = max(waits) if waits else 1.0
            if attempt == settings.GRAPH_MAX_RETRIES or wait > MAX_RETRY_SLEEP_S:
                throttled: list[ProviderError] = [e for e in retry.values() if isinstance(e, ProviderRateLimited)]
                if throttled:
                    raise _worst(throttled)  # the mailbox is throttled (429, or 503 with Retry-After): it waits
                # 503 for a message while the batch itself was answered: its own failure, read again later.
                own.update({m: (503, error) for m, error in retry.items()})
                break
            logger.info("graph batch: %d parts throttled; retrying them in %.1f s", len(retry), wait)
            time.sleep(wait)
            pending = list(retry)
        logger.debug("graph batch fetched %d of %d messages", len(found), len(ids))
        return found, own

    def _email(self, message: dict[str, Any]) -> Email:
        sender = (message.get("from") or message.get("sender") or {}).get("emailAddress") or {}
        name, address = str(sender.get("name") or ""), str(sender.get("address") or "")
        body = message.get("body") or {}
        content = str(body.get("content") or "")
        text = html_to_text(content) if str(body.get("contentType", "")).lower() == "html" else content
        received_at = _received(message.get("receivedDateTime")) or datetime.now(UTC)
        message_id = str(message["id"])
        headers = [
            (str(header.get("name", "")), str(header.get("value", "")))
            for header in message.get("internetMessageHeaders") or []
            if isinstance(header, dict)
        ]
        conversation = conversation_headers(headers)
        return Email(
            provider=self.provider,
            message_id=message_id,
            thread_id=str(message.get("conversationId") or message_id),
            sender=f"{name} <{address}>" if name and name != address else address,
            subject=str(message.get("subject") or ""),
            received_at=received_at,
            body_text=text.replace("\r\n", "\n").strip(),
            web_link=_web_link(message.get("webLink"), message_id),
            internet_message_id=message_id_key(str(message.get("internetMessageId") or "")),
            list_headers=bulk_headers(headers),
            provider_category=_inference(message.get("inferenceClassification")),
            in_reply_to=conversation.in_reply_to,
            references=conversation.references,
            to=_recipients(message.get("toRecipients")),
            cc=_recipients(message.get("ccRecipients")),
        )


def _recipients(value: Any) -> tuple[Recipient, ...]:
    """Graph's toRecipients / ccRecipients ([{"emailAddress": {"name", "address"}}]), bounded."""
    entries = value if isinstance(value, list) else []
    pairs = [
        (str(address.get("name") or ""), str(address.get("address") or ""))
        for entry in entries[:MAX_RECIPIENT_ENTRIES]
        if isinstance(entry, dict) and isinstance(address := entry.get("emailAddress"), dict)
    ]
    return recipient_list(pairs)


# Outlook on the web's hosts: a webLink elsewhere (or not https, e.g. "javascript:") is never shown.
OUTLOOK_WEB_HOSTS = {"outlook.office365.com", "outlook.office.com", "outlook.live.com"}


def _web_link(value: Any, message_id: str) -> str:
    """Graph's webLink when it is an https link to Outlook on the web; else one built from the message id."""
    link = str(value or "")
    parts = urlsplit(link)
    if parts.scheme == "https" and (parts.hostname or "") in OUTLOOK_WEB_HOSTS and not parts.username:
        return link
    return outlook_web_link(message_id)


def outlook_web_link(message_id: str) -> str:
    """Opens the message in Outlook on the web."""
    item = quote(message_id, safe="")
    return f"https://outlook.office365.com/owa/?ItemID={item}&exvsurl=1&viewmodel=ReadMessageItem"


def _inference(value: Any) -> str:
    """Outlook's Focused/Other sorting, as `Email.provider_category` names it; "" when Graph gave none."""
    name = str(value or "").lower()
    return name if name in ("focused", "other") else ""


def _received(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _graph_time(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _folder_link(folder: Folder, cursor: str) -> str:
    """The delta link in a cursor of `folder`. Raises CursorExpired for a cursor of another folder: one
    marked for it, or a link that names another well-known folder by name."""
    link = cursor_position(folder, cursor)
    named = _DELTA_FOLDER.search(urlsplit(link).path)
    ref = (named.group(1) or named.group(2) or "").lower() if named else ""
    if ref in _WELL_KNOWN and ref != FOLDER_NAMES[folder]:
        raise CursorExpired(
            f"The saved Outlook sync position reads {ref}, not {FOLDER_NAMES[folder]}; a resync is needed."
        )
    return link


def _is_initial(cursor: str) -> bool:
    """Whether the cursor is the first query of a mailbox (from initial_cursor), not a link Graph gave."""
    query = urlsplit(cursor).query.lower()
    return "deltatoken" not in query and "skiptoken" not in query


def _part_code(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("code", "")) if isinstance(error, dict) else ""


def _status_error(status: int, code: str, retry_after: float | None) -> ProviderError:
    """The typed error for a Graph status (410 is handled by the caller: only a delta can expire)."""
    if status == 429 or (status == 503 and retry_after is not None):  # a 503 with Retry-After is throttling
        return ProviderRateLimited("Outlook asks us to slow down; syncing resumes shortly.", retry_after)
    if status in (401, 403):
        return ProviderAuthError("Outlook no longer accepts Tasklift's access. Reconnect Outlook to continue.")
    if status >= 500:
        return ProviderUnavailable("Outlook is not answering right now; syncing will retry.")
    if status == 404:
        return ProviderNotFound(f"Outlook does not know this (HTTP 404{f', {code}' if code else ''}).")
    return ProviderError(f"Outlook refused a request (HTTP {status}{f', {code}' if code else ''}).")


def _worst(errors: list[ProviderError]) -> ProviderError:
    """Auth beats rate limiting beats the rest: it decides what the caller must do."""
    for kind in (ProviderAuthError, ProviderRateLimited, ProviderUnavailable):
        chosen = [e for e in errors if isinstance(e, kind)]
        if chosen:
            if isinstance(chosen[0], ProviderRateLimited):
                waits = [e.retry_after for e in chosen if isinstance(e, ProviderRateLimited) and e.retry_after]
                return ProviderRateLimited(chosen[0].message, max(waits) if waits else None)
            return chosen[0]
    return errors[0]
