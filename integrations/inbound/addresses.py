"""Forward-to addresses: each person's private `tasks+<token>@INBOUND_DOMAIN`, and whose mail it takes.

The address is an Integration of provider FORWARD (its `account_address`), so that what is forwarded is read as a
mailbox's mail: its cursor, ledger rows (purpose `forwarded`), batches and quarantine. It is made when the person
first sees it (Settings), and rotated by a new token: the old address is refused from that moment.

Mail is taken only from the person's own addresses: their account's, their connected mailboxes', and those they
added and confirmed by the link sent to each (ForwardSender).
"""

from __future__ import annotations

import base64
import logging
import secrets

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from integrations.models import FORWARD_CURSOR, ForwardSender, Integration, SyncCursor

logger = logging.getLogger(__name__)

LOCAL_PREFIX = "tasks+"
CONFIRM_SALT = "tasklift.forward-sender"
CONFIRM_MAX_AGE_S = 3 * 24 * 3600  # a confirmation link works for three days


def _new_address() -> str:
    """`tasks+<token>@domain`, the token 80 random bits in lower-case base32 (mail systems may fold case)."""
    token = base64.b32encode(secrets.token_bytes(10)).decode().lower().rstrip("=")
    return f"{LOCAL_PREFIX}{token}@{settings.INBOUND_DOMAIN}"


def forward_address(*, user: User) -> Integration:
    """The person's forward-to address, made on first use with its cursor."""
    from integrations.services import cursor_filter_hash

    existing = Integration.objects.filter(user=user, provider=Integration.Provider.FORWARD).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            integration = Integration.objects.create(
                user=user, provider=Integration.Provider.FORWARD, account_address=_new_address()
            )
            SyncCursor.objects.create(
                integration=integration,
                purpose=SyncCursor.Purpose.FORWARDED,
                value=FORWARD_CURSOR,
                filter_hash=cursor_filter_hash(provider=integration.provider, purpose=SyncCursor.Purpose.FORWARDED),
            )
    except IntegrityError:  # made meanwhile by another request of theirs
        return Integration.objects.get(user=user, provider=Integration.Provider.FORWARD)
    logger.info("forward address made integration=%s", integration.pk)
    return integration


def forward_address_rotate(*, user: User) -> Integration:
    """A new address in place of the old one, which is refused from now on. What was stored stays to be read."""
    integration = forward_address(user=user)
    Integration.objects.filter(pk=integration.pk).update(account_address=_new_address(), updated_at=timezone.now())
    integration.refresh_from_db()
    logger.info("forward address rotated integration=%s", integration.pk)
    return integration


def forward_recipient(address: str) -> Integration | None:
    """The active forward-to address `address` names (any case; a `+` part beyond the token is not one), or None."""
    address = address.strip().strip("<>").lower()
    local, _, domain = address.rpartition("@")
    if not local.startswith(LOCAL_PREFIX) or domain != settings.INBOUND_DOMAIN:
        return None
    return (
        Integration.objects.filter(
            provider=Integration.Provider.FORWARD, account_address=address, status=Integration.Status.ACTIVE
        )
        .select_related("user")
        .first()
    )


def sender_addresses(*, user: User) -> set[str]:
    """The addresses mail to the person's forward-to address is taken from (lower-cased)."""
    mailboxes = Integration.objects.filter(user=user).exclude(provider=Integration.Provider.FORWARD)
    confirmed = ForwardSender.objects.filter(user=user, confirmed_at__isnull=False)
    return {
        user.email.lower(),
        *(a.lower() for a in mailboxes.values_list("account_address", flat=True)),
        *confirmed.values_list("address", flat=True),
    }


def forward_sender_add(*, user: User, address: str) -> tuple[ForwardSender, str]:
    """Add an address of theirs, unconfirmed; returns it and the token of its confirmation link."""
    sender, _ = ForwardSender.objects.get_or_create(user=user, address=address.strip().lower())
    token = signing.dumps({"u": user.pk, "a": sender.address}, salt=CONFIRM_SALT)
    return sender, token


def forward_sender_confirm(*, token: str) -> ForwardSender | None:
    """Confirm the address a link names; None when the link is altered, expired, or its address was removed."""
    try:
        data = signing.loads(token, salt=CONFIRM_SALT, max_age=CONFIRM_MAX_AGE_S)
    except signing.BadSignature:
        return None
    sender = ForwardSender.objects.filter(user_id=data.get("u"), address=data.get("a")).first()
    if sender is not None and sender.confirmed_at is None:
        sender.confirmed_at = timezone.now()
        sender.save(update_fields=["confirmed_at"])
    return sender
