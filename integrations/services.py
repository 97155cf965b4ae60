"""Writes of the integrations app: connecting, disconnecting and keeping mailbox credentials."""

from __future__ import annotations

import hashlib
import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from google.oauth2.credentials import Credentials

from accounts.models import User
from config.crypto import SecretUnreadable, decrypt_json, encrypt_json, reencrypt
from integrations.models import FIRST_READ, Integration, PushChannel, SyncCursor
from integrations.oauth.google import google_revoke
from integrations.oauth.microsoft import MicrosoftTokenSource
from integrations.providers.base import (
    MailProvider,
    ProviderAuthError,
    ProviderError,
    ProviderRateLimited,
)
from integrations.providers.forward import ForwardProvider
from integrations.providers.gmail import GmailProvider, gmail_credentials
from integrations.providers.imap import ImapAccount, ImapProvider
from integrations.providers.outlook import OutlookProvider

logger = logging.getLogger(__name__)

# The query a cursor belongs to. A cursor saved for another query is not reused for this one: its
# mailbox is resynced (a new generation from the last successful read), as for an expired cursor.
# Gmail: history of messages added or labelled into INBOX, API v1. Outlook: the inbox message delta,
# unfiltered (so mail moved into the Inbox shows whatever its received time), ids and received times only.
# Sent mail has queries of its own (the SENT label; the sentitems folder's delta), so a cursor of one purpose
# never fits the other's.
GMAIL_FILTER = "gmail:v1:history:messageAdded,labelAdded:INBOX"
OUTLOOK_FILTER = "graph:v1.0:mailFolders/inbox/messages/delta:immutable-ids:select=receivedDateTime"
GMAIL_SENT_FILTER = "gmail:v1:history:messageAdded,labelAdded:SENT"
OUTLOOK_SENT_FILTER = "graph:v1.0:mailFolders/sentitems/messages/delta:immutable-ids:select=receivedDateTime"
# IMAP: the UIDs from a folder's UIDNEXT on (the Inbox; Sent mail's folder by SPECIAL-USE, else its usual names).
IMAP_FILTER = "imap:v1:uid-from-uidnext:INBOX"
IMAP_SENT_FILTER = "imap:v1:uid-from-uidnext:special-use-sent"
CURSOR_FILTERS: dict[tuple[str, str], str] = {
    (Integration.Provider.GMAIL, SyncCursor.Purpose.TASK_EXTRACTION): GMAIL_FILTER,
    (Integration.Provider.OUTLOOK, SyncCursor.Purpose.TASK_EXTRACTION): OUTLOOK_FILTER,
    (Integration.Provider.GMAIL, SyncCursor.Purpose.SENT_MAIL): GMAIL_SENT_FILTER,
    (Integration.Provider.OUTLOOK, SyncCursor.Purpose.SENT_MAIL): OUTLOOK_SENT_FILTER,
    (Integration.Provider.IMAP, SyncCursor.Purpose.TASK_EXTRACTION): IMAP_FILTER,
    (Integration.Provider.IMAP, SyncCursor.Purpose.SENT_MAIL): IMAP_SENT_FILTER,
    (Integration.Provider.FORWARD, SyncCursor.Purpose.FORWARDED): "forward:v1:stored",
}


def filter_hash(description: str) -> str:
    return hashlib.sha256(description.encode()).hexdigest()[:16]


def cursor_filter_hash(*, provider: str, purpose: str) -> str:
    """The filter hash of the query a cursor of `purpose` runs now for `provider`."""
    return filter_hash(CURSOR_FILTERS.get((provider, purpose), ""))


def cursor_fits(*, cursor: SyncCursor, integration: Integration) -> bool:
    """Whether the cursor was made for the query we run now (a cursor of another query must not be reused)."""
    return cursor.filter_hash == cursor_filter_hash(provider=integration.provider, purpose=cursor.purpose)


def sent_cursors_open(*, user: User, reopen_push: bool = True) -> int:
    """A Sent cursor for each of the person's mailboxes that has none, once their consent covers Sent mail
    (at connect, and when they agree to a text that says so). Its first read, by the next run, lists the
    Sent mail of MAIL_SENT_BACKFILL_DAYS before the cursor was made: no provider call here. A cursor kept
    from an earlier consent stays where it is (the Sent mail since it is owed, as a reconnect's inbox is).
    Their push channels are opened again to ring for Sent mail too (`reopen_push`; a connect opens its own).
    Returns how many were missing."""
    from accounts.selectors import consent_covers_sent

    if not consent_covers_sent(user_id=user.pk):
        return 0
    missing = list(
        Integration.objects.filter(user=user)
        .exclude(status=Integration.Status.DISCONNECTED)
        .exclude(provider=Integration.Provider.FORWARD)  # what is forwarded has no Sent mail
        .exclude(cursors__purpose=SyncCursor.Purpose.SENT_MAIL)
    )
    if reopen_push:
        for integration in missing:
            transaction.on_commit(lambda integration=integration: _push_open_later(integration))  # type: ignore[misc]
    made = SyncCursor.objects.bulk_create(
        [
            SyncCursor(
                integration=integration,
                purpose=SyncCursor.Purpose.SENT_MAIL,
                value=FIRST_READ,
                filter_hash=cursor_filter_hash(provider=integration.provider, purpose=SyncCursor.Purpose.SENT_MAIL),
            )
            for integration in missing
        ],
        ignore_conflicts=True,  # one made meanwhile by a connect or another grant
    )
    return len(made)


# Credentials --------------------------------------------------------------------------------------


def gmail_credentials_dump(credentials: Credentials) -> dict[str, Any]:
    expiry = credentials.expiry
    return {
        "token": credentials.token,
        "refresh_token": credentials.refresh_token,
        "expiry": expiry.replace(tzinfo=UTC).isoformat() if expiry else None,
        "scopes": list(credentials.scopes or settings.GMAIL_SCOPES),
    }


def gmail_credentials_load(data: dict[str, Any]) -> Credentials:
    expiry = data.get("expiry")
    return gmail_credentials(
        access_token=data.get("token"),
        refresh_token=data.get("refresh_token") or "",
        expiry=datetime.fromisoformat(expiry) if expiry else None,
        scopes=data.get("scopes"),
    )


def integration_credentials(*, integration: Integration) -> dict[str, Any]:
    return decrypt_json(integration.credentials_encrypted) if integration.credentials_encrypted else {}


def integration_provider(*, integration: Integration) -> MailProvider:
    """A ready client for the mailbox, from its decrypted credentials. Makes no network call."""
    try:
        credentials = integration_credentials(integration=integration)
    except SecretUnreadable as error:  # its key was removed: only a new sign-in can help
        raise ProviderAuthError(
            "Tasklift cannot read its stored sign-in for this mailbox. Connect it again."
        ) from error
    if integration.provider == Integration.Provider.GMAIL:
        return GmailProvider(gmail_credentials_load(credentials), address=integration.account_address)
    if integration.provider == Integration.Provider.OUTLOOK:
        return OutlookProvider(MicrosoftTokenSource(credentials), address=integration.account_address)
    if integration.provider == Integration.Provider.IMAP:
        return ImapProvider(ImapAccount.load(credentials), address=integration.account_address)
    if integration.provider == Integration.Provider.FORWARD:
        return ForwardProvider(integration_id=integration.pk)
    raise ProviderError(f"{integration.get_provider_display()} is not supported.")


def integration_save_refreshed_credentials(*, integration: Integration, provider: MailProvider) -> None:
    """Store the provider's credentials again if a refresh changed them."""
    fresh: dict[str, Any] | None = None
    if isinstance(provider, GmailProvider) and provider.credentials_refreshed:
        fresh = gmail_credentials_dump(provider.credentials)
    if isinstance(provider, OutlookProvider) and isinstance(provider.access_token, MicrosoftTokenSource):
        fresh = provider.access_token.dump() if provider.access_token.changed else None
    if fresh is not None:
        # Conditional: a mailbox disconnected during the run must not get its sign-in back.
        Integration.objects.filter(pk=integration.pk).exclude(credentials_encrypted="").exclude(
            status=Integration.Status.DISCONNECTED
        ).update(credentials_encrypted=encrypt_json(fresh), updated_at=timezone.now())


# Connect and disconnect ---------------------------------------------------------------------------


def gmail_connect(*, user: User, credentials: Credentials) -> Integration:
    """Store a newly authorised Gmail mailbox, start its cursor at "now", and list recent inbox mail
    (the backfill) for the next run."""
    provider = GmailProvider(credentials)
    address = provider.account_address()
    history_id = provider.current_cursor()
    backfill: list[str] = []
    if settings.MAIL_BACKFILL_DAYS and settings.MAIL_BACKFILL_MAX_MESSAGES:
        since = timezone.now() - timedelta(days=settings.MAIL_BACKFILL_DAYS)
        backfill = provider.backfill_message_ids(after=since, limit=settings.MAIL_BACKFILL_MAX_MESSAGES)
    return _integration_store(
        user=user,
        provider=Integration.Provider.GMAIL,
        address=address,
        credentials=gmail_credentials_dump(provider.credentials),
        cursor=history_id,
        backfill=backfill,
    )


def outlook_connect(*, user: User, msal_cache: str, home_account_id: str, access_token: str) -> Integration:
    """Store a newly authorised Outlook mailbox. Its first cursor is the inbox delta query: the first run
    lists the inbox, reads its recent mail (the backfill, bounded by the pipeline) and receives the first
    delta link."""
    provider = OutlookProvider(lambda force_refresh=False: access_token)
    address = provider.account_address()
    return _integration_store(
        user=user,
        provider=Integration.Provider.OUTLOOK,
        address=address,
        credentials={"msal_cache": msal_cache, "home_account_id": home_account_id},
        cursor=provider.initial_cursor(),
        backfill=[],
    )


def imap_connect(*, user: User, account: ImapAccount, address: str) -> Integration:
    """Store an IMAP mailbox whose sign-in was just tested: its Inbox cursor starts at the mail received in the
    last MAIL_BACKFILL_DAYS (the first run reads it as the backfill, bounded), its password encrypted with the
    rest of what the person gave."""
    provider = ImapProvider(account, address=address)
    try:
        cursor = provider.initial_cursor(timezone.now() - timedelta(days=settings.MAIL_BACKFILL_DAYS))
    finally:
        provider.close()
    return _integration_store(
        user=user,
        provider=Integration.Provider.IMAP,
        address=address,
        credentials=account.dump(),
        cursor=cursor,
        backfill=[],
    )


def _integration_store(
    *, user: User, provider: str, address: str, credentials: dict[str, Any], cursor: str, backfill: list[str]
) -> Integration:
    """Save a newly authorised mailbox: encrypted credentials, active again, and a cursor.

    A reconnect keeps the cursor in place: the mail since it is still owed to the person (were the cursor
    expired, the next run resyncs from it by itself).
    """
    with transaction.atomic():
        integration, created = Integration.objects.select_for_update().get_or_create(
            user=user, provider=provider, account_address=address.lower()
        )
        integration.credentials_encrypted = encrypt_json(credentials)
        integration.status = Integration.Status.ACTIVE
        integration.last_error_code = ""
        integration.last_error = ""
        integration.failure_count = 0
        current = SyncCursor.objects.filter(integration=integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION).first()
        if current is None:
            SyncCursor.objects.create(
                integration=integration,
                purpose=SyncCursor.Purpose.TASK_EXTRACTION,
                value=cursor,
                filter_hash=cursor_filter_hash(provider=provider, purpose=SyncCursor.Purpose.TASK_EXTRACTION),
            )
            integration.backfill_pending = backfill
        integration.save()
        sent_cursors_open(user=user, reopen_push=False)
        transaction.on_commit(lambda: _push_open_later(integration))
    logger.info("%s connected integration=%s created=%s backfill=%d", provider, integration.pk, created, len(backfill))
    return integration


def _push_open_later(integration: Integration) -> None:
    """Open the mailbox's push channel in a job: Graph validates our webhook while it creates a
    subscription, which a web worker busy with this very request could not answer."""
    from integrations.jobs import push_channel_open_job
    from integrations.push import push_enabled

    if not push_enabled(integration.provider):
        return
    try:
        push_channel_open_job.delay(integration.pk)
    except Exception:  # the broker is down: beat's maintenance opens it later
        logger.warning("push channel of integration=%s not queued; maintenance opens it later", integration.pk)


def integration_disconnect(*, integration: Integration) -> None:
    """Stop the push channel and revoke the token at the provider, then forget the credentials and the
    cursor."""
    from integrations.push import push_channel_close

    push_channel_close(integration=integration)
    if integration.provider == Integration.Provider.GMAIL and integration.credentials_encrypted:
        try:
            data = integration_credentials(integration=integration)
        except SecretUnreadable:
            data = {}  # nothing to revoke with; the grant lapses at Google when unused
            logger.warning("gmail credentials unreadable integration=%s; deleted without revoking", integration.pk)
        if data and not google_revoke(data.get("refresh_token") or data.get("token") or ""):
            logger.warning("gmail token revoke failed integration=%s; credentials deleted anyway", integration.pk)
    with transaction.atomic():
        SyncCursor.objects.filter(integration=integration).delete()
        integration.credentials_encrypted = ""
        integration.backfill_pending = []
        integration.status = Integration.Status.DISCONNECTED
        integration.save(update_fields=["credentials_encrypted", "backfill_pending", "status", "updated_at"])


def integration_mark_failed(*, integration: Integration, error: ProviderError) -> None:
    """Record a failed fetch; refused credentials mean the person must reconnect."""
    changes: dict[str, Any] = {
        "failure_count": F("failure_count") + 1,
        "last_error_code": error.code,
        "last_error": error.message,
        "updated_at": timezone.now(),
    }
    if isinstance(error, ProviderAuthError):
        changes["status"] = Integration.Status.NEEDS_REAUTH  # only a new connect can help
    if isinstance(error, ProviderRateLimited):
        # The mailbox waits (DESIGN §6): Retry-After when given, else 30 s doubling up to an hour.
        steps = Integration.objects.filter(pk=integration.pk).values_list("throttle_count", flat=True).first() or 0
        wait = error.retry_after if error.retry_after else backoff_seconds(steps)
        changes["retry_after"] = timezone.now() + timedelta(seconds=wait)
        changes["throttle_count"] = F("throttle_count") + 1
    # Conditional: a mailbox disconnected meanwhile stays disconnected.
    Integration.objects.filter(pk=integration.pk).exclude(status=Integration.Status.DISCONNECTED).update(**changes)


def backoff_seconds(step: int) -> float:
    """The wait after `step` throttles in a row without a Retry-After: PROVIDER_BACKOFF_INITIAL_S doubled
    per step up to PROVIDER_BACKOFF_MAX_S, less up to a tenth (jitter, so that mailboxes throttled
    together do not all come back at once)."""
    base = min(settings.PROVIDER_BACKOFF_INITIAL_S * 2 ** min(step, 32), settings.PROVIDER_BACKOFF_MAX_S)
    return float(base - random.uniform(0, base / 10))


def integration_reencrypt_all() -> tuple[int, list[int]]:
    """Re-encrypt every stored credential under the newest key (after a key was put in front).
    Returns how many were re-encrypted, and the ids of those no configured key can read."""
    count, unreadable = 0, []
    for integration in Integration.objects.exclude(credentials_encrypted="").only("pk", "credentials_encrypted"):
        old = integration.credentials_encrypted
        try:
            new = reencrypt(old)
        except SecretUnreadable:
            unreadable.append(integration.pk)
            continue
        # Conditional: credentials refreshed or deleted meanwhile are left as they are now.
        count += Integration.objects.filter(pk=integration.pk, credentials_encrypted=old).update(
            credentials_encrypted=new
        )
    for channel in PushChannel.objects.exclude(secret_encrypted="").only("pk", "integration_id", "secret_encrypted"):
        try:
            new = reencrypt(channel.secret_encrypted)
        except SecretUnreadable:  # its notifications could not be checked: maintenance opens a new one
            PushChannel.objects.filter(pk=channel.pk).delete()
            continue
        PushChannel.objects.filter(pk=channel.pk, secret_encrypted=channel.secret_encrypted).update(
            secret_encrypted=new
        )
    return count, unreadable
