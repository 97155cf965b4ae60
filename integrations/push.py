"""Push: how a mailbox rings the doorbell, and how we know the ring is real.

A notification is a doorbell, never a delivery (DESIGN §2): it only says "read this mailbox"; the
cursor-driven run does the reading, so a duplicated, reordered, forged, late or lost notification can
neither create nor lose anything. This module opens, renews and closes the channels (a Gmail watch that
publishes to a Pub/Sub topic; a Graph subscription on the inbox's messages), checks the OIDC token of a
Pub/Sub push and the `clientState` of a Graph notification, and decodes what they say.

A mailbox whose Sent mail is read (it has a Sent cursor) rings for it too: its Gmail watch covers the INBOX
and SENT labels, and on Graph a second subscription, on `sentitems`, shares the inbox one's clientState and
is renewed, checked and closed with it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import google.auth.transport.requests
import requests
from cryptography import x509
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from google.auth import exceptions as google_exceptions
from google.auth import jwt as google_jwt

from config.crypto import SecretUnreadable, decrypt_json, encrypt_json
from config.trust import trusting_session
from integrations.models import Integration, PushChannel, SyncCursor
from integrations.providers.base import Folder, ProviderError, ProviderNotFound
from integrations.providers.gmail import GmailProvider
from integrations.providers.outlook import OutlookProvider

logger = logging.getLogger(__name__)

GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")


def push_enabled(provider: str) -> bool:
    """Whether mailboxes of `provider` get a push channel here."""
    if not settings.PUSH_ENABLED:
        return False
    if provider == Integration.Provider.GMAIL:
        return bool(settings.GMAIL_PUSH_TOPIC and settings.GMAIL_PUSH_SERVICE_ACCOUNT)
    # IMAP rings through the imap-idle process, a forward-to address as its mail is stored: neither has a channel.
    return provider == Integration.Provider.OUTLOOK


def outlook_notification_url() -> str:
    return f"{settings.PUSH_BASE_URL}/webhooks/outlook"


def outlook_lifecycle_url() -> str:
    return f"{settings.PUSH_BASE_URL}/webhooks/outlook/lifecycle"


# Channels -----------------------------------------------------------------------------------------


def push_folders(integration: Integration) -> tuple[Folder, ...]:
    """The folders the mailbox's channel rings for: the inbox, and Sent mail while it is read."""
    reads_sent = SyncCursor.objects.filter(integration=integration, purpose=SyncCursor.Purpose.SENT_MAIL).exists()
    return ("inbox", "sent") if reads_sent else ("inbox",)


def push_channel_open(*, integration: Integration) -> PushChannel | None:
    """Open (or open again) the mailbox's push channel, replacing any it had. None when push is off for its
    provider. Raises ProviderError when the provider refuses; the maintenance job tries again later."""
    from integrations.services import integration_provider

    if not push_enabled(integration.provider) or integration.status != Integration.Status.ACTIVE:
        return None
    provider = integration_provider(integration=integration)
    folders = push_folders(integration)
    sent_id, sent_expires_at = "", None
    if isinstance(provider, GmailProvider):
        expires_at = provider.watch(settings.GMAIL_PUSH_TOPIC, folders=folders)
        external_id, secret = settings.GMAIL_PUSH_TOPIC, ""
    else:
        assert isinstance(provider, OutlookProvider)
        _close_outlook(integration, provider)  # a subscription we can no longer check must not keep ringing
        client_state = secrets.token_urlsafe(48)  # 64 characters; Graph takes up to 128
        subscribe = functools.partial(
            provider.subscribe,
            notification_url=outlook_notification_url(),
            lifecycle_url=outlook_lifecycle_url(),
            client_state=client_state,
            expires_at=timezone.now() + timedelta(minutes=settings.GRAPH_SUBSCRIPTION_MINUTES),
        )
        external_id, expires_at = subscribe()
        if "sent" in folders:
            try:
                sent_id, sent_expires_at = subscribe(folder="sent")
            except ProviderError:
                provider.unsubscribe(external_id)  # both or neither: maintenance opens the channel again
                raise
        secret = encrypt_json({"client_state": client_state})
    channel, _ = PushChannel.objects.update_or_create(
        integration=integration,
        defaults={
            "external_id": external_id,
            "secret_encrypted": secret,
            "expires_at": expires_at,
            "sent_external_id": sent_id,
            "sent_expires_at": sent_expires_at,
            "last_error": "",
        },
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
    if ("sent" in push_folders(integration)) != bool(channel.sent_external_id):
        return push_channel_open(integration=integration)  # Sent mail is read now, or no longer
    wanted = timezone.now() + timedelta(minutes=settings.GRAPH_SUBSCRIPTION_MINUTES)
    try:
        expires_at = provider.renew_subscription(channel.external_id, wanted)
        sent_expires_at = (
            provider.renew_subscription(channel.sent_external_id, wanted) if channel.sent_external_id else None
        )
    except ProviderNotFound:
        logger.info("graph subscription gone integration=%s; making a new one", integration.pk)
        return push_channel_open(integration=integration)
    # The channel is due again when the first of its subscriptions is.
    PushChannel.objects.filter(pk=channel.pk).update(
        expires_at=min(expires_at, sent_expires_at or expires_at),
        sent_expires_at=sent_expires_at,
        last_error="",
        updated_at=timezone.now(),
    )
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
            if channel.sent_external_id:
                provider.unsubscribe(channel.sent_external_id)
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
    for subscription_id in [channel.external_id, channel.sent_external_id] if channel else []:
        if not subscription_id:
            continue
        try:
            provider.unsubscribe(subscription_id)
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
    signature against Google's certificates (GOOGLE_CERTS_URL), the expiry, a lifetime no longer than Google
    gives (GMAIL_PUSH_TOKEN_MAX_LIFETIME_SECONDS), the audience, the issuer, the push service account and
    that its email is verified. Raises PushRefused.

    The same token may come with several pushes (Pub/Sub reuses it for most of its hour): it is not refused
    for having been seen before; its short life is what bounds a replay."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise PushRefused(401, "no bearer token")
    claims = _decode(token, _certs_holding(_key_id(token)))
    lifetime = claims["exp"] - claims["iat"]  # both numbers: google-auth compared them with the clock
    if lifetime > settings.GMAIL_PUSH_TOKEN_MAX_LIFETIME_SECONDS:
        raise PushRefused(403, "token lives longer than Google's")
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise PushRefused(403, "wrong issuer")
    if claims.get("email") != settings.GMAIL_PUSH_SERVICE_ACCOUNT:
        raise PushRefused(403, "wrong service account")
    if claims.get("email_verified") is not True:
        raise PushRefused(403, "email not verified")
    return claims


def _key_id(token: str) -> str:
    try:
        header = google_jwt.decode_header(token)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, binascii.Error) as error:
        raise PushRefused(403, "malformed token") from error
    kid = header.get("kid") if isinstance(header, dict) else None
    if not isinstance(kid, str) or not kid:
        # Google names its key in every token; without a kid google-auth would try every certificate.
        raise PushRefused(403, "no key id")
    return kid


def _decode(token: str, certs: dict[str, str]) -> dict[str, Any]:
    try:
        claims = google_jwt.decode(  # type: ignore[no-untyped-call]
            token, certs=certs, audience=settings.GMAIL_PUSH_AUDIENCE
        )
    # ValueError: signature, expiry, audience; TypeError: an iat or exp that is not a number.
    except (ValueError, TypeError, google_exceptions.GoogleAuthError) as error:
        raise PushRefused(403, str(error).split(",")[0][:100]) from error
    if not isinstance(claims, dict):
        raise PushRefused(403, "malformed token")
    return claims


# Google's certificates ({kid: PEM}) live in the shared cache with when they were fetched, and stay there
# until a fetch replaces them: a refresh that fails keeps them. A fetch happens when they are over an hour
# old or a token names a kid they do not hold (Google rotated its keys), and then only by the one process,
# of every web process, that takes the refresh lock, at most once per GMAIL_PUSH_CERTS_REFRESH_SECONDS:
# anyone can send tokens with made-up kids, and each must not cost a request to Google.
CERTS_CACHE_KEY = "push:google-certs:v2"  # {"certs": {kid: PEM}, "fetched_at": epoch seconds}
CERTS_REFRESH_KEY = "push:google-certs:refresh"
CERTS_MAX_AGE_S = 3600
CERTS_FETCH_TIMEOUT_S = 10  # the webhook answers Pub/Sub within its ack deadline


def _certs_holding(kid: str) -> dict[str, str]:
    """Google's certificates, refreshed first if they are old or lack `kid` and the refresh lock allows.
    Raises PushRefused when they do not hold `kid` (or none could ever be fetched)."""
    held = cache.get(CERTS_CACHE_KEY)
    certs: dict[str, str] = held["certs"] if isinstance(held, dict) else {}
    fetched_at: float = held["fetched_at"] if isinstance(held, dict) else 0.0
    wanted = kid not in certs or time.time() - fetched_at > CERTS_MAX_AGE_S
    if wanted and cache.add(CERTS_REFRESH_KEY, 1, timeout=settings.GMAIL_PUSH_CERTS_REFRESH_SECONDS):
        certs = _certs_fetch(kept=certs, fetched_at=fetched_at) or certs
    if not certs:
        raise PushRefused(403, "signing certificates unavailable")
    if kid not in certs:
        raise PushRefused(403, "unknown signing key")
    return certs


def _certs_fetch(*, kept: dict[str, str], fetched_at: float) -> dict[str, str] | None:
    """Fetch Google's certificates and keep them in the cache; None (and a warning) when the answer is not
    a map of certificates, the ones kept staying in use."""
    try:
        session = trusting_session(settings.GOOGLE_CA_BUNDLE)
        response = google.auth.transport.requests.Request(session)(
            settings.GOOGLE_CERTS_URL, method="GET", timeout=CERTS_FETCH_TIMEOUT_S
        )
        if response.status != 200:
            raise ValueError(f"HTTP {response.status}")
        certs = _certs_read(json.loads(response.data))
    except (google_exceptions.TransportError, requests.RequestException, ValueError) as error:
        since = f"fetched {int(time.time() - fetched_at)} s ago" if kept else "none yet"
        logger.warning(
            "Google's signing certificates could not be refreshed from %s (%s); keeping the certificates we had "
            "(%d, %s)",
            settings.GOOGLE_CERTS_URL,
            str(error)[:200],
            len(kept),
            since,
        )
        return None
    cache.set(CERTS_CACHE_KEY, {"certs": certs, "fetched_at": time.time()}, timeout=None)
    logger.info("Google's signing certificates refreshed: %d keys", len(certs))
    return certs


def _certs_read(answer: object) -> dict[str, str]:
    """Google's v1 map {kid: PEM certificate}; ValueError for anything else (a JWKS, an empty map, text)."""
    if not isinstance(answer, dict) or not answer:
        raise ValueError("not a map of certificates")
    for kid, pem in answer.items():
        if not isinstance(pem, str):
            raise ValueError(f"certificate {kid!r} is not text")
        x509.load_pem_x509_certificate(pem.encode())  # ValueError when it is not one
    return {str(kid): str(pem) for kid, pem in answer.items()}


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
