"""Any mailbox over IMAP (RFC 3501, with CONDSTORE and SPECIAL-USE where the server offers them), through
imapclient, read-only: folders are opened with EXAMINE and bodies fetched with BODY.PEEK[], so Tasklift never
sets a flag, moves, copies or deletes (the only commands sent are in READ_COMMANDS).

Everything IMAP-specific stays here: callers get `Delta`/`Email` and the typed errors of base.py.

- A message's id (the ledger's, the task's source id) is its Message-ID without brackets, the same in every
  folder and across UIDVALIDITY generations; a message without one gets a digest of its envelope
  ("imap-envelope:…"). IMAP has no thread id: conversations come from Message-ID, In-Reply-To, References.
- A cursor is a folder's position: "UIDVALIDITY:UIDNEXT:HIGHESTMODSEQ" (the modseq 0 where CONDSTORE is not
  offered), marked with its folder as every provider's is (`cursor_for`). New mail is the UIDs from UIDNEXT
  on: mail moved or copied into the folder gets a new UID there and is read like new mail, whatever its date.
  A changed UIDVALIDITY is a new generation (CursorExpired: the run resyncs, by Message-ID against the
  ledger). The cursor made at connect ends with ":first": its first delta is the mailbox's backfill.
- An idle check is one STATUS per folder on one connection: only a folder whose UIDNEXT or UIDVALIDITY moved
  is opened (EXAMINE) and listed.
- One connection per provider object, opened at its first call and kept (logged out by `close`); calls are
  serialised on it. Use one provider per job, as for the other providers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import imaplib
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import quote, unquote

from django.conf import settings
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError
from imapclient.util import to_unicode

from integrations.mail.message import email_from_rfc822
from integrations.mail.mime import message_id_key
from integrations.providers.base import (
    FOLDERS,
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

Security = Literal["tls", "starttls"]
T = TypeVar("T")
FETCH_CHUNK = 50  # bodies per UID FETCH
ENVELOPE_CHUNK = 500  # envelopes per UID FETCH when listing
# Sent mail's folder when the server does not mark it \Sent (SPECIAL-USE, RFC 6154): the usual names.
SENT_NAMES = ("Sent", "Sent Items", "Sent Messages", "Sent Mail", "INBOX.Sent", "INBOX/Sent", "[Gmail]/Sent Mail")
FIRST = "first"  # the mark of the cursor made at connect: its first delta is the backfill
ENVELOPE_PREFIX = "imap-envelope:"
# Every IMAP command Tasklift sends. None of them changes a mailbox (tests hold the wire to this list).
READ_COMMANDS = frozenset(
    {"CAPABILITY", "STARTTLS", "LOGIN", "AUTHENTICATE", "LIST", "STATUS", "EXAMINE", "UID SEARCH", "UID FETCH",
     "NOOP", "IDLE", "DONE", "LOGOUT", "ID"}
)  # fmt: skip


@dataclass(frozen=True)
class ImapAccount:
    """Where and as whom to sign in: what the person gave (the password is an app password)."""

    host: str
    port: int
    security: Security
    username: str
    password: str

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> ImapAccount:
        return cls(
            host=str(data["host"]),
            port=int(data["port"]),
            security="starttls" if data.get("security") == "starttls" else "tls",
            username=str(data["username"]),
            password=str(data["password"]),
        )

    def dump(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "security": self.security,
            "username": self.username,
            "password": self.password,
        }


@dataclass(frozen=True)
class Position:
    """A folder's position: its UIDVALIDITY, the UIDNEXT from which mail is new, its HIGHESTMODSEQ; for Sent
    mail, the folder's name (so a check needs no LIST); the connect-time mark of the Inbox's first cursor."""

    validity: int
    uidnext: int
    modseq: int = 0
    first: bool = False
    name: str = ""

    def __str__(self) -> str:
        tail = f":{FIRST}" if self.first else (f":@{quote(self.name, safe='')}" if self.name else "")
        return f"{self.validity}:{self.uidnext}:{self.modseq}{tail}"

    @classmethod
    def parse(cls, text: str) -> Position:
        parts = text.split(":", 3)
        try:
            validity, uidnext, modseq = (int(p) for p in parts[:3])
        except ValueError:
            raise CursorExpired("This IMAP sync position cannot be read; a resync is needed.") from None
        tail = parts[3] if len(parts) > 3 else ""
        return cls(validity, uidnext, modseq, first=tail == FIRST, name=unquote(tail[1:]) if tail[:1] == "@" else "")


def imap_tls_context() -> ssl.SSLContext:
    """Certificates always checked: the system's trust store, or settings.IMAP_CA_BUNDLE (a local CA in
    development and tests). There is no setting that turns checking off."""
    return ssl.create_default_context(cafile=settings.IMAP_CA_BUNDLE or None)


def _translate(error: BaseException, *, host: str) -> ProviderError:
    """An IMAP or socket failure as the typed error callers handle."""
    if isinstance(error, ProviderError):
        return error
    text = str(error)
    # imapclient raises LoginError for any NO to LOGIN: a server at its connection limit (RFC 5530 [LIMIT],
    # [INUSE]) or down for a moment ([UNAVAILABLE]) refused no password, and the person has nothing to do.
    if isinstance(error, LoginError) and "[UNAVAILABLE]" in text:
        return ProviderUnavailable(f"{host} cannot sign anyone in just now: {text[:200]}")
    if isinstance(error, LoginError) and not ("[LIMIT]" in text or "[INUSE]" in text):
        return ProviderAuthError(
            "The mail server refused the user name or app password. Enter them again on Mailboxes."
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return ProviderUnavailable(f"{host}'s certificate could not be verified ({error.verify_message}).")
    if isinstance(error, ssl.SSLError):
        return ProviderUnavailable(f"{host} refused a secure (TLS) connection.")
    if "[NONEXISTENT]" in text or "doesn't exist" in text.lower():
        return ProviderNotFound(f"{host} has no such folder: {text[:200]}")
    if "[LIMIT]" in text or "[INUSE]" in text or "connections" in text.lower():
        return ProviderRateLimited(f"{host} limits how often or how many times it can be reached: {text[:200]}")
    if isinstance(error, socket.timeout | TimeoutError):
        return ProviderUnavailable(f"{host} did not answer in time.")
    if isinstance(error, OSError | imaplib.IMAP4.abort):
        return ProviderUnavailable(f"{host} could not be reached or dropped the connection ({text[:200]}).")
    return ProviderUnavailable(f"{host} answered with an error: {text[:200]}")


def message_key(envelope: Any, internaldate: datetime | None) -> str:
    """The ledger's id of a message: its Message-ID, else a digest of its envelope (date, sender, subject,
    recipients and the time it was saved), the same in every folder it sits in."""
    raw = envelope.message_id if envelope is not None else None
    if raw:
        key = message_id_key(to_unicode(raw))
        if key:
            return key
    parts = [
        str(getattr(envelope, "date", "") or ""),
        repr(getattr(envelope, "from_", "") or ""),
        repr(getattr(envelope, "subject", b"") or b""),
        repr(getattr(envelope, "to", "") or ""),
        internaldate.isoformat() if internaldate else "",
    ]
    return ENVELOPE_PREFIX + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


def _whole(method: Callable[..., T]) -> Callable[..., T]:
    """One operation holds the connection throughout: a folder opened by EXAMINE is the one its UIDs are read
    in, though the run's fetcher threads read the Inbox's and Sent's mail through this one object."""

    @functools.wraps(method)
    def held(self: ImapProvider, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            return method(self, *args, **kwargs)

    return held


class ImapProvider:
    provider = "imap"

    def __init__(self, account: ImapAccount, *, address: str | None = None) -> None:
        self.account = account
        self.address = address or account.username
        self._client: IMAPClient | None = None
        self._lock = threading.RLock()
        self._folders: dict[Folder, str | None] | None = None
        self._selected: str | None = None
        # Where each message listed so far sits: id -> (folder name, UID). fetch_emails reads by it; an id
        # not listed by this object (a failed read of an earlier run) is looked up by its Message-ID.
        self._where: dict[str, tuple[str, int]] = {}
        self.commands = 0  # IMAP commands sent (for the benchmark)

    # The connection --------------------------------------------------------------------------------------
    def connect(self) -> IMAPClient:
        """The signed-in connection (opened at the first call). Raises ProviderAuthError when the server
        refuses the sign-in, ProviderUnavailable when it cannot be reached or TLS fails."""
        with self._lock:
            if self._client is not None:
                return self._client
            account = self.account
            timeout = settings.IMAP_TIMEOUT_SECONDS
            client: IMAPClient | None = None
            try:
                client = IMAPClient(
                    account.host,
                    port=account.port,
                    ssl=account.security == "tls",
                    ssl_context=imap_tls_context(),
                    timeout=timeout,
                )
                client.normalise_times = False  # INTERNALDATE with its zone, not as local naive time
                if account.security == "starttls":
                    client.starttls(imap_tls_context())
                client.login(account.username, account.password)
            except BaseException as error:
                if client is not None:  # refused or cut short: the connection is closed, not left to the server
                    with contextlib.suppress(OSError, imaplib.IMAP4.error):
                        client.shutdown()
                raise _translate(error, host=account.host) from error
            self.commands += 3 if account.security == "starttls" else 2
            self._client = client
            return client

    def close(self) -> None:
        """Log out (the connection is closed either way)."""
        with self._lock:
            client, self._client, self._selected = self._client, None, None
            if client is not None:
                with contextlib.suppress(IMAPClientError, OSError, imaplib.IMAP4.abort):
                    client.logout()

    @property
    def connected(self) -> bool:
        return self._client is not None

    def call(self, command: Callable[[IMAPClient], Any]) -> Any:
        """One command of the caller's (IDLE: integrations/imapidle.py) on the connection, as `_call`."""
        return self._call(command)

    def _call(self, command: Callable[[IMAPClient], Any]) -> Any:
        """One command on the connection, its failures translated. A connection that broke is dropped, so the
        next call opens a new one."""
        with self._lock:
            client = self.connect()
            self.commands += 1
            try:
                return command(client)
            except (OSError, imaplib.IMAP4.abort) as error:
                self._client, self._selected = None, None
                with contextlib.suppress(OSError, imaplib.IMAP4.error):
                    client.shutdown()  # not left open holding one of the server's connections per user
                raise _translate(error, host=self.account.host) from error
            except IMAPClientError as error:
                raise _translate(error, host=self.account.host) from error

    def _capable(self, capability: str) -> bool:
        """Whether the server offers `capability` (known since the sign-in: no command)."""
        with self._lock:
            try:
                return bool(self.connect().has_capability(capability))
            except (IMAPClientError, OSError, imaplib.IMAP4.abort) as error:
                raise _translate(error, host=self.account.host) from error

    def _examine(self, name: str) -> dict[bytes, Any]:
        """Open `name` read-only (EXAMINE); its UIDVALIDITY, UIDNEXT and HIGHESTMODSEQ."""
        answer: dict[bytes, Any] = self._call(lambda c: c.select_folder(name, readonly=True))
        self._selected = name
        return answer

    # Folders ---------------------------------------------------------------------------------------------
    def folder_name(self, folder: Folder) -> str | None:
        """The server's name of the inbox (always INBOX) or of Sent mail: the folder marked \\Sent, else the
        first of the usual names; None when the mailbox has no Sent folder (its Inbox is read alone)."""
        if folder == "inbox":
            return "INBOX"  # every server's, by RFC 3501: no LIST needed
        if self._folders is None:
            listed = self._call(lambda c: c.list_folders())
            names = {str(name): {to_unicode(f) for f in flags} for flags, _delimiter, name in listed}
            sent = next((n for n, flags in names.items() if "\\Sent" in flags), None)
            if sent is None:
                lowered = {n.lower(): n for n in names}
                sent = next((lowered[s.lower()] for s in SENT_NAMES if s.lower() in lowered), None)
            self._folders = {"inbox": "INBOX", "sent": sent}
        return self._folders[folder]

    def _status(self, name: str) -> Position:
        wanted = ["UIDNEXT", "UIDVALIDITY"]
        if self._capable("CONDSTORE"):
            wanted.append("HIGHESTMODSEQ")
        status = self._call(lambda c: c.folder_status(name, wanted))
        return Position(int(status[b"UIDVALIDITY"]), int(status[b"UIDNEXT"]), int(status.get(b"HIGHESTMODSEQ", 0)))

    # The MailProvider protocol ---------------------------------------------------------------------------
    def account_address(self) -> str:
        return self.address

    @_whole
    def current_cursor(self, folder: Folder = "inbox") -> str:
        name = self.folder_name(folder)
        if name is None:
            return cursor_for(folder, "0:1:0")  # no Sent folder: nothing to follow (made again if one comes)
        return cursor_for(folder, str(self._named(self._status(name), name)))

    @_whole
    def initial_cursor(self, since: datetime) -> str:
        """The Inbox's cursor at connect: its first delta lists the mail received since `since` and everything
        that comes after (a delta marked backfill, bounded by the caller)."""
        now = self._status("INBOX")
        self._examine("INBOX")
        uids = self._call(lambda c: c.search(["SINCE", since.date()]))
        first_uid = min(uids) if uids else now.uidnext
        return cursor_for("inbox", str(Position(now.validity, first_uid, now.modseq, first=True)))

    def fetch_delta(self, cursor: str, *, folder: Folder = "inbox") -> Delta:
        return self.fetch_deltas({folder: cursor})[folder]

    @_whole
    def fetch_deltas(self, cursors: Mapping[Folder, str]) -> dict[Folder, Delta]:
        """Each folder's new mail since its cursor: one STATUS per folder (a Sent cursor names its folder),
        and a folder whose UIDNEXT moved is opened and listed. CursorExpired when a folder's UIDVALIDITY
        changed, or it is gone (a renamed Sent folder is found again by its \\Sent mark)."""
        deltas: dict[Folder, Delta] = {}
        for folder, cursor in cursors.items():
            position = Position.parse(cursor_position(folder, cursor))
            name = position.name or self.folder_name(folder)
            if name is None:
                if position.validity:
                    raise CursorExpired("The Sent folder this cursor followed is gone; a resync is needed.")
                deltas[folder] = Delta([], cursor)
                continue
            try:
                now = self._status(name)
            except ProviderNotFound:  # renamed or deleted since
                name = self.folder_name(folder)
                if name is None or name == position.name:
                    raise CursorExpired(f"The folder {position.name} is gone; a resync is needed.") from None
                now = self._status(name)
            now = self._named(now, name if folder != "inbox" else "")
            if now.validity != position.validity:
                raise CursorExpired(f"The folder {name} was rebuilt on the server (UIDVALIDITY changed).")
            if now.uidnext <= position.uidnext:  # nothing new (a first cursor with nothing to read loses its mark)
                deltas[folder] = Delta([], cursor_for(folder, str(replace(now, uidnext=position.uidnext))))
                continue
            listing = self._list(name, ["UID", f"{position.uidnext}:*"])
            listing = [(uid, key, at) for uid, key, at in listing if uid >= position.uidnext]
            uidnext = max([now.uidnext, *(uid + 1 for uid, _, _ in listing)])
            deltas[folder] = self._delta(listing, replace(now, uidnext=uidnext), folder, position.first)
        return deltas

    def _named(self, position: Position, name: str) -> Position:
        return replace(position, name="" if name == "INBOX" else name)

    @_whole
    def resync(
        self,
        since: datetime,
        limit: int,
        *,
        cursor: str,
        handled: Callable[[list[str]], set[str]],
        folder: Folder = "inbox",
    ) -> Delta:
        """A cursor for now, and the folder's mail the ledger does not hold that was received or saved into
        the folder since `since` (IMAP's SEARCH counts days: a day more is listed, the ledger drops what was
        read): after a new UIDVALIDITY, UIDs say nothing of what came after the old cursor, the save date
        does (SAVEDATE, where offered; else the received date). The newest `limit`, oldest first."""
        name = self.folder_name(folder)
        if name is None:
            return Delta([], self.current_cursor(folder))
        now = self._named(self._status(name), name)
        day = since.date()
        criteria: list[Any] = ["OR", "SINCE", day, "SAVEDSINCE", day] if self._capable("SAVEDATE") else ["SINCE", day]
        listing = self._list(name, criteria)
        listing = [(uid, key, at) for uid, key, at in listing if uid < now.uidnext or not now.uidnext]
        unhandled_keys = set(_unhandled([key for _, key, _ in listing], handled))
        listing = [item for item in listing if item[1] in unhandled_keys]
        kept = listing[-limit:] if limit else []
        delta = self._delta(kept, now, folder, first=False)
        return Delta(delta.message_ids, delta.new_cursor, received=delta.received, not_read=len(listing) - len(kept))

    @_whole
    def first_read(self, since: datetime, limit: int, *, folder: Folder = "inbox") -> Delta:
        """A cursor for now (taken first), and the folder's mail received since `since`, the newest `limit`."""
        name = self.folder_name(folder)
        if name is None:
            return Delta([], self.current_cursor(folder))
        now = self._named(self._status(name), name)
        listing = self._list(name, ["SINCE", since.date()])
        listing = [item for item in listing if item[2] >= since and item[0] < now.uidnext]
        kept = listing[-limit:] if limit else []
        delta = self._delta(kept, now, folder, first=False)
        return Delta(delta.message_ids, delta.new_cursor, received=delta.received, not_read=len(listing) - len(kept))

    @_whole
    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        """The messages in the order given (repeats dropped), by UID FETCH BODY.PEEK[] in the folder that
        listed them. A message the server will not give (NO/BAD for it, or gone) is in `failed`; a failure
        of the connection or sign-in is raised."""
        wanted = list(dict.fromkeys(message_ids))
        for message_id in wanted:
            if message_id not in self._where:
                self._find(message_id)
        found: dict[str, Email] = {}
        failed: dict[str, ProviderError] = {}
        by_folder: dict[str, list[tuple[int, str]]] = {}
        for message_id in wanted:
            if message_id in self._where:
                name, uid = self._where[message_id]
                by_folder.setdefault(name, []).append((uid, message_id))
            else:
                failed[message_id] = ProviderNotFound("The message is no longer in the mailbox.")
        for name, items in by_folder.items():
            self._examine(name)
            for start in range(0, len(items), FETCH_CHUNK):
                chunk = items[start : start + FETCH_CHUNK]
                self._fetch_chunk(name, chunk, found, failed)
        return Fetched(emails=[found[m] for m in wanted if m in found], failed=failed)

    @_whole
    def check_folders(self) -> str | None:
        """For "Test the connection": signs in and finds the folders. Returns the Sent folder's name (None:
        the Inbox is read alone)."""
        self._status("INBOX")
        return self.folder_name("sent")

    # Internals -------------------------------------------------------------------------------------------
    def _list(self, name: str, criteria: list[Any]) -> list[tuple[int, str, datetime]]:
        """The messages a SEARCH by `criteria` finds in folder `name` (opened read-only): (UID, id, received),
        by UID, each id once (a copy of a message already listed is the same message)."""
        self._examine(name)
        uids = sorted(self._call(lambda c: c.search(criteria)))
        listed: list[tuple[int, str, datetime]] = []
        seen: set[str] = set()
        for start in range(0, len(uids), ENVELOPE_CHUNK):
            answer = self._envelopes(uids[start : start + ENVELOPE_CHUNK])
            chunk = uids[start : start + ENVELOPE_CHUNK]
            for uid in chunk:
                data = answer.get(uid)
                if data is None:  # expunged meanwhile
                    continue
                received = _aware(data.get(b"INTERNALDATE"))
                key = message_key(data.get(b"ENVELOPE"), received)
                if key in seen:
                    continue
                seen.add(key)
                self._where[key] = (name, uid)
                listed.append((uid, key, received))
        return listed

    def _envelopes(self, uids: list[int]) -> dict[int, dict[bytes, Any]]:
        answer: dict[int, dict[bytes, Any]] = self._call(lambda c: c.fetch(uids, ["ENVELOPE", "INTERNALDATE"]))
        return answer

    @staticmethod
    def _delta(listing: list[tuple[int, str, datetime]], position: Position, folder: Folder, first: bool) -> Delta:
        ordered = sorted(listing, key=lambda item: item[0])
        return Delta(
            [key for _, key, _ in ordered],
            cursor_for(folder, str(replace(position, first=False))),
            received={key: at for _, key, at in ordered},
            backfill=first,
        )

    def _find(self, message_id: str) -> None:
        """Where a message not listed by this object sits now: searched by its Message-ID in the Inbox, then
        in Sent. An envelope digest cannot be searched: such a message is not found."""
        if message_id.startswith(ENVELOPE_PREFIX):
            return
        for folder in FOLDERS:
            name = self.folder_name(folder)
            if name is None:
                continue
            self._examine(name)
            uids = self._call(lambda c: c.search(["HEADER", "Message-ID", message_id]))
            if uids:
                self._where[message_id] = (name, min(uids))
                return

    def _fetch_chunk(
        self, name: str, chunk: list[tuple[int, str]], found: dict[str, Email], failed: dict[str, ProviderError]
    ) -> None:
        uids = [uid for uid, _ in chunk]
        try:
            answer = self._call(lambda c: c.fetch(uids, ["BODY.PEEK[]", "INTERNALDATE"]))
        except ProviderUnavailable as error:
            if self._client is None or len(chunk) == 1:  # the connection broke, or the message itself fails
                if self._client is None:
                    raise
                failed[chunk[0][1]] = error
                return
            for item in chunk:  # one message the server will not give fails the chunk: each alone
                self._fetch_chunk(name, [item], found, failed)
            return
        for uid, message_id in chunk:
            data = answer.get(uid)
            body = data.get(b"BODY[]") if data else None
            if body is None:
                failed[message_id] = ProviderNotFound("The message is no longer in the mailbox.")
                continue
            found[message_id] = self._email(message_id, body, _aware(data.get(b"INTERNALDATE")))

    def _email(self, message_id: str, raw: bytes, received: datetime) -> Email:
        return email_from_rfc822(provider=self.provider, message_id=message_id, raw=raw, received_at=received)


def _aware(value: Any) -> datetime:
    if not isinstance(value, datetime):
        return datetime.now(UTC)
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _unhandled(keys: list[str], handled: Callable[[list[str]], set[str]]) -> Iterator[str]:
    for start in range(0, len(keys), 1000):
        chunk = keys[start : start + 1000]
        known = handled(chunk)
        yield from (key for key in chunk if key not in known)
