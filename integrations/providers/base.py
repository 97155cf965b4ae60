"""What the rest of Tasklift sees of a mail provider: plain objects and typed errors.

Only the modules in `integrations/providers/` know a provider's wire format. Callers catch the errors
below, never an HTTP library's exception or a status code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

# The normalised email lives with the rest of mail's meaning; providers make it, and import it from here too.
from integrations.mail.message import Email as Email

# Which of a mailbox's mail a cursor follows: what entered the inbox, or what its owner sent (Gmail's SENT
# label, Graph's `sentitems` folder). Every cursor method takes one; "inbox" is the default.
Folder = Literal["inbox", "sent"]
FOLDERS: tuple[Folder, ...] = ("inbox", "sent")


@dataclass(frozen=True)
class Delta:
    """Mail of one folder (the inbox, or Sent) to read since a cursor, and the cursor that would follow it.
    Fetching saves nothing."""

    message_ids: list[str]  # mail that entered the folder since the cursor, oldest first, without repeats
    new_cursor: str
    # When the provider tells (Outlook): when each message was received, for the caller's bounds.
    received: dict[str, datetime] = field(default_factory=dict)
    # True for the first read of a mailbox (its whole inbox, not changes since a checkpoint): the caller
    # bounds the part received before the mailbox was connected.
    backfill: bool = False
    # A resync or a first read (`MailProvider.resync`, `first_read`): how many messages of the window were
    # not listed, over its bound.
    not_read: int = 0


@dataclass(frozen=True)
class Fetched:
    """What reading some messages by id gave: the emails read, in the order asked, and the messages that
    could not be read while the provider answered for the others, each with its error. A 404 is such a
    failure too (ProviderNotFound), however often it came: only the provider's record of a deletion, or a
    later run, tells a deleted message from a passing fault (DESIGN §6)."""

    emails: list[Email]
    failed: dict[str, ProviderError] = field(default_factory=dict)


class ProviderError(Exception):
    """A provider call failed. `message` is written for the person whose mailbox it is."""

    code = "provider_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderAuthError(ProviderError):
    """The credentials are refused (revoked, expired beyond refresh): the person must reconnect."""

    code = "provider_auth"


class ProviderRateLimited(ProviderError):
    """The provider asks us to slow down. `retry_after` is in seconds."""

    code = "provider_rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """A transient failure: 5xx, timeout, connection refused."""

    code = "provider_unavailable"


class ProviderNotFound(ProviderError):
    """The provider does not know the thing asked for (HTTP 404), e.g. a push subscription that expired."""

    code = "provider_not_found"


class CursorExpired(ProviderError):
    """The saved cursor is no longer accepted (Gmail 404 on history, Graph 410): a resync is needed."""

    code = "cursor_expired"


def cursor_for(folder: Folder, position: str) -> str:
    """The cursor of `folder` at a provider's `position` (a historyId, a delta link). An inbox cursor is the
    position itself, as it always was; any other carries its folder first ("sent:…"), because a position
    does not always say which folder it follows (Gmail's history ids are the mailbox's; Graph's links name
    their folder by an id only Graph can resolve), and reading one folder from another's position would
    skip its mail or read the wrong folder."""
    return position if folder == "inbox" else f"{folder}:{position}"


def cursor_position(folder: Folder, cursor: str) -> str:
    """The provider's position in a cursor of `folder`. Raises CursorExpired for a cursor of another folder
    (a resync, never a read from someone else's position)."""
    marked = next((f for f in FOLDERS if f != "inbox" and cursor.startswith(f"{f}:")), "inbox")
    if marked != folder:
        raise CursorExpired(
            f"This sync position belongs to the {marked} mail, not the {folder} mail; a resync is needed."
        )
    return cursor if folder == "inbox" else cursor[len(folder) + 1 :]


class MailProvider(Protocol):
    """A connected mailbox, ready to read. Implementations: gmail.GmailProvider, outlook.OutlookProvider.

    The cursor methods read one folder: the inbox (the default) or Sent mail, with the same semantics. A
    cursor is made for its folder and refused (CursorExpired) by the other (`cursor_position`)."""

    def current_cursor(self, folder: Folder = "inbox") -> str:
        """The cursor for "now": where incremental sync starts on connect."""
        ...

    def fetch_delta(self, cursor: str, *, folder: Folder = "inbox") -> Delta:
        """The ids of every email that entered `folder` since `cursor` (new, or moved or relabelled into
        it) and that the provider does not record as deleted since, and the cursor after them. Saves
        nothing. Raises CursorExpired when the provider no longer knows `cursor`, or it is another folder's."""
        ...

    def fetch_deltas(self, cursors: Mapping[Folder, str]) -> dict[Folder, Delta]:
        """fetch_delta of each folder's cursor, in as few provider calls as the provider allows (Gmail: one
        history listing for every folder; Graph: one delta per folder). CursorExpired when any is."""
        ...

    def resync(
        self,
        since: datetime,
        limit: int,
        *,
        cursor: str,
        handled: Callable[[list[str]], set[str]],
        folder: Folder = "inbox",
    ) -> Delta:
        """A new cursor for "now", and what to read so that nothing is lost across an expired `cursor`: the
        mail in `folder` now that the ledger (`handled`: which of these ids it holds) does not hold and
        that came into it after `cursor`, whatever its received time, or was received since `since`.
        At most the newest `limit`; how many more there were (or may be: not looked at) is `not_read`."""
        ...

    def first_read(self, since: datetime, limit: int, *, folder: Folder = "inbox") -> Delta:
        """The first read of `folder` (for Sent: after connect, or after consent to reading it): a cursor
        for now, taken first (mail arriving meanwhile is in its next delta, perhaps listed twice: the
        ledger drops repeats), and the mail of `folder` received since `since`, the newest `limit` of it,
        oldest first; how many more of that window there were is `not_read`."""
        ...

    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        """The given messages, in the order given, whichever folder listed them (ids are the mailbox's).
        One message failing does not fail the others: it is in `failed`. Raises only for what concerns the
        whole mailbox (its sign-in refused, throttling, the service unreachable)."""
        ...


def provider_close(provider: object) -> None:
    """Close what a provider holds open (an IMAP connection: its `close` never raises), if anything."""
    close = getattr(provider, "close", None)
    if callable(close):
        close()
