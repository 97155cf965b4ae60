"""Push: how a mailbox rings the doorbell, and how we know the ring is real.

A notification is a doorbell, never a delivery (DESIGN §2): it only says "read this mailbox"; the
cursor-driven run does the reading, so a duplicated, reordered, forged, late or lost notification can
neither create nor lose anything. This module opens, renews and closes the channels (a Gmail watch that
publishes to a Pub/Sub topic; a Graph subscription on the inbox's messages), checks the OIDC token of a
Pub/Sub push and the `clientState` of a Graph notification, and decodes what they say.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import google.auth.transport.requests
import requests
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from google.auth import exceptions as google_exceptions
from google.auth import jwt as google_jwt

from config.crypto import SecretUnreadable, decrypt_json, encrypt_json
from config.trust import trusting_session
from integrations.models import Integration, PushChannel
from integrations.providers.base import ProviderError, ProviderNotFound
from integrations.providers.gmail import GmailProvider
from integrations.providers.outlook import OutlookProvider

logger = logging.getLogger(__name__)

GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
CERTS_CACHE_KEY = "push:google-certs"
CERTS_CACHE_SECONDS = 3600


def push_enabled(provider: str) -> bool:
    """Whether mailboxes of `provider` get a push channel here."""
    if not settings.PUSH_ENABLED:
        return False
    if provider == Integration.Provider.GMAIL:
        return bool(settings.GMAIL_PUSH_TOPIC and settings.GMAIL_PUSH_SERVICE_ACCOUNT)
    return True


def outlook_notification_url() -> str:
    return f"{settings.PUSH_BASE_URL}/webhooks/outlook"


def outlook_lifecycle_url() -> str:
    return f"{settings.PUSH_BASE_URL}/webhooks/outlook/lifecycle"


# Channels -----------------------------------------------------------------------------------------


def push_channel_open(*, integration: Integration) -> PushChannel | None:
    """Open (or open again) the mailbox's push channel, replacing any it had. None when push is off for its
    provider. Raises ProviderError when the provider refuses; the maintenance job tries again later."""
    from integrations.services import integration_provider

    if not push_enabled(integration.provider) or integration.status != Integration.Status.ACTIVE:
        return None
    provider = integration_provider(integration=integration)
    if isinstance(provider, GmailProvider):
        expires_at = provider.watch(settings.GMAIL_PUSH_TOPIC)
        external_id, secret = settings.GMAIL_PUSH_TOPIC, ""
    else:
        assert isinstance(provider, OutlookProvider)
        _close_outlook(integration, provider)  # a subscription we can no longer check must not keep ringing
        client_state = secrets.token_urlsafe(48)  # 64 characters; Graph takes up to 128
        external_id, expires_at = provider.subscribe(
            notification_url=outlook_notification_url(),
            lifecycle_url=outlook_lifecycle_url(),
            client_state=client_state,
            expires_at=timezone.now() + timedelta(minutes=settings.GRAPH_SUBSCRIPTION_MINUTES),
        )
        secret = encrypt_json({"client_state": client_state})
    channel, _ = PushChannel.objects.update_or_create(
        integration=integration,
        defaults={"external_id": external_id, "secret_encrypted": secret, "expires_at": expires_at, "last_error": ""},
    )
    logger.info("push channel opened integration=%s until %s", integration.pk, expires_at.isoformat())
    return channel


def push_channel_renew(*, channel: PushChannel) -> PushChannel | None:
    """Renew a channel before it expires (a Gmail watch is asked again; a Graph subscription gets a later
    expiry, or is made again when Graph no longer knows it)."""
    from integrations.services import integration_provider

    integration = channel.integration
    if integration.provider == Integration.Provider.GMAIL:
        return push_channel_open(integration=integration)
    provider = integration_provider(integration=integration)
    assert isinstance(provider, OutlookProvider)
    wanted = timezone.now() + timedelta(minutes=settings.GRAPH_SUBSCRIPTION_MINUTES)
    try:
        expires_at = provider.renew_subscription(channel.external_id, wanted)
    except ProviderNotFound:
        logger.info("graph subscription gone integration=%s; making a new one", integration.pk)
        return push_channel_open(integration=integration)
    PushChannel.objects.filter(pk=channel.pk).update(expires_at=expires_at, last_error="", updated_at=timezone.now())
    channel.refresh_from_db()
    return channel


def push_channel_close(*, integration: Integration) -> None:
    """Stop the mailbox's channel at the provider (best effort) and forget it. Called before the
    credentials are forgotten: they are what stops it."""
    from integrations.services import integration_provider

    channel = PushChannel.objects.filter(integration=integration).first()
    if channel is None:
        return
    try:
        provider = integration_provider(integration=integration)
        if isinstance(provider, GmailProvider):
            provider.stop_watch()
        else:
            assert isinstance(provider, OutlookProvider)
            provider.unsubscribe(channel.external_id)
    except (ProviderError, SecretUnreadable) as error:
        # It lapses by itself (a week for Gmail, days for Graph); its notifications find no channel.
        logger.warning("push channel of integration=%s not stopped at the provider: %s", integration.pk, error)
    PushChannel.objects.filter(pk=channel.pk).delete()


def push_channel_failed(*, integration: Integration, error: Exception) -> None:
    """Note why a channel could not be opened or renewed (shown in admin); polling covers the mailbox."""
    message = getattr(error, "message", "") or type(error).__name__
    PushChannel.objects.filter(integration=integration).update(last_error=message[:200])
    logger.warning("push channel of integration=%s failed: %s", integration.pk, message)


def _close_outlook(integration: Integration, provider: OutlookProvider) -> None:
    channel = PushChannel.objects.filter(integration=integration).first()
    if channel is not None:
        try:
            provider.unsubscribe(channel.external_id)
        except ProviderError as error:
            logger.info("old graph subscription of integration=%s not deleted: %s", integration.pk, error)


def push_channel_secret(channel: PushChannel) -> str:
    """The channel's Graph clientState ('' when it has none or no configured key reads it)."""
    if not channel.secret_encrypted:
        return ""
    try:
        return str(decrypt_json(channel.secret_encrypted).get("client_state", ""))
    except SecretUnreadable:
        return ""


def client_state_matches(channel: PushChannel, offered: object) -> bool:
    """Constant-time comparison of a notification's clientState with the channel's."""
    expected = push_channel_secret(channel)
    return bool(expected) and isinstance(offered, str) and hmac.compare_digest(expected.encode(), offered.encode())


# Gmail: the Pub/Sub push ------------------------------------------------------------------------------


class PushRefused(Exception):
    """A push that is not from our Pub/Sub subscription. `status` is 401 (no token) or 403 (a bad one)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class GmailPush:
    address: str
    history_id: int


def pubsub_token_verify(authorization: str) -> dict[str, Any]:
    """The claims of the OIDC token in an `Authorization: Bearer` header, checked with google-auth: the
    signature against GOOGLE_CERTS_URL, the expiry, the audience, the issuer, the push service account
    and that its email is verified. Raises PushRefused."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise PushRefused(401, "no bearer token")
    try:
        claims = _decode(token.strip(), _certs())
    except _UnknownKey:
        claims = _decode(token.strip(), _certs(refresh=True))  # Google rotated its keys
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise PushRefused(403, "wrong issuer")
    if claims.get("email") != settings.GMAIL_PUSH_SERVICE_ACCOUNT:
        raise PushRefused(403, "wrong service account")
    if claims.get("email_verified") is not True:
        raise PushRefused(403, "email not verified")
    return claims


class _UnknownKey(Exception):
    pass


def _decode(token: str, certs: dict[str, str]) -> dict[str, Any]:
    try:
        header = google_jwt.decode_header(token)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, binascii.Error) as error:
        raise PushRefused(403, "malformed token") from error
    if not isinstance(header, dict) or header.get("kid") not in certs:
        raise _UnknownKey
    try:
        claims = google_jwt.decode(  # type: ignore[no-untyped-call]
            token, certs=certs, audience=settings.GMAIL_PUSH_AUDIENCE
        )
    except (ValueError, google_exceptions.GoogleAuthError) as error:  # signature, expiry, audience
        raise PushRefused(403, str(error).split(",")[0][:100]) from error
    if not isinstance(claims, dict):
        raise PushRefused(403, "malformed token")
    return claims


def _certs(*, refresh: bool = False) -> dict[str, str]:
    """Google's signing certificates ({kid: PEM}), kept in the shared cache for an hour."""
    certs = None if refresh else cache.get(CERTS_CACHE_KEY)
    if isinstance(certs, dict):
        return certs
    try:
        session = trusting_session(settings.GOOGLE_CA_BUNDLE)
        response = google.auth.transport.requests.Request(session)(settings.GOOGLE_CERTS_URL, method="GET")
        fetched = json.loads(response.data) if response.status == 200 else None
    except (google_exceptions.TransportError, requests.RequestException, ValueError) as error:
        raise PushRefused(403, "signing certificates unavailable") from error
    if not isinstance(fetched, dict) or "keys" in fetched:
        raise PushRefused(403, "signing certificates unreadable")
    cache.set(CERTS_CACHE_KEY, fetched, CERTS_CACHE_SECONDS)
    return {str(k): str(v) for k, v in fetched.items()}


def pubsub_envelope_read(body: bytes) -> GmailPush:
    """What a Pub/Sub push from Gmail says: the mailbox address and its new history id. Raises ValueError
    when the body is not such an envelope."""
    envelope = json.loads(body)
    message = envelope.get("message") if isinstance(envelope, dict) else None
    data = message.get("data") if isinstance(message, dict) else None
    if not isinstance(data, str) or not data:
        raise ValueError("no message.data")
    # Pub/Sub sends standard padded base64; the Gmail guide says base64url: accept both.
    decoded = base64.b64decode(data.replace("-", "+").replace("_", "/") + "=" * (-len(data) % 4), validate=True)
    payload = json.loads(decoded)
    if not isinstance(payload, dict):
        raise ValueError("message.data is not an object")
    address, history_id = payload.get("emailAddress"), payload.get("historyId")
    if not isinstance(address, str) or not address or not str(history_id).isdigit():
        raise ValueError("message.data lacks emailAddress or historyId")
    return GmailPush(address=address.lower(), history_id=int(str(history_id)))
