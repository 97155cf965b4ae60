"""What the rest of Tasklift sees of a mail provider: plain objects and typed errors.

Only the modules in `integrations/providers/` know a provider's wire format. Callers catch the errors
below, never an HTTP library's exception or a status code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

# The normalised email lives with the rest of mail's meaning; providers make it, and import it from here too.
from integrations.mail.message import Email as Email


@dataclass(frozen=True)
class Delta:
    """Inbox mail to read since a cursor, and the cursor that would follow it. Fetching saves nothing."""

    message_ids: list[str]  # mail that entered the inbox since the cursor, oldest first, without repeats
    new_cursor: str
    # When the provider tells (Outlook): when each message was received, for the caller's bounds.
    received: dict[str, datetime] = field(default_factory=dict)
    # True for the first read of a mailbox (its whole inbox, not changes since a checkpoint): the caller
    # bounds the part received before the mailbox was connected.
    backfill: bool = False
    # A resync (`MailProvider.resync`): how many messages of the window were not listed, over its bound.
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


class MailProvider(Protocol):
    """A connected mailbox, ready to read. Implementations: gmail.GmailProvider, outlook.OutlookProvider."""

    def current_cursor(self) -> str:
        """The cursor for "now": where incremental sync starts on connect."""
        ...

    def fetch_delta(self, cursor: str) -> Delta:
        """The ids of every email that entered the inbox since `cursor` (new, or moved or relabelled into
        it) and that the provider does not record as deleted since, and the cursor after them. Saves
        nothing. Raises CursorExpired when the provider no longer knows `cursor`."""
        ...

    def resync(self, since: datetime, limit: int, *, cursor: str, handled: Callable[[list[str]], set[str]]) -> Delta:
        """A new cursor for "now", and what to read so that nothing is lost across an expired `cursor`: the
        mail in the inbox now that the ledger (`handled`: which of these ids it holds) does not hold and
        that came into the inbox after `cursor`, whatever its received time, or was received since `since`.
        At most the newest `limit`; how many more there were (or may be: not looked at) is `not_read`."""
        ...

    def fetch_emails(self, message_ids: list[str]) -> Fetched:
        """The given messages, in the order given. One message failing does not fail the others: it is
        in `failed`. Raises only for what concerns the whole mailbox (its sign-in refused, throttling, the
        service unreachable)."""
        ...
