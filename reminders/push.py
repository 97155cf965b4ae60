"""Web Push of reminders (RFC 8030, 8291, 8292) with pywebpush: each browser a person turned notifications on
in (on /settings/) gets a reminder as a notification, shown by the service worker (static/sw.js), which opens
the task when clicked.

The browser gives a push service's endpoint and its keys; reminders are encrypted to those keys (aes128gcm)
and signed with the server's VAPID key, whose public half the browser subscribed with. Only endpoints of the
push services in PUSH_SERVICE_HOSTS are kept (an endpoint is where this server POSTs). A push service that
answers 404 or 410 has let the subscription go: it is dropped. Any other failure is logged and the email of
the reminder stands."""

from __future__ import annotations

import base64
import json
import logging
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.utils import timezone
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

from accounts.models import User
from config.crypto import decrypt_json, encrypt_json
from config.errors import ApplicationError
from reminders.models import PushSubscription
from tasks.models import Task

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 20  # browsers per person
GONE = (404, 410)


@lru_cache(maxsize=4)
def _vapid(private_key: str) -> Vapid02:
    return Vapid02.from_raw(private_key.encode())


def vapid_public_key() -> str:
    """The server's VAPID public key as the browser's `applicationServerKey` wants it: the uncompressed P-256
    point, base64url without padding."""
    point = _vapid(settings.VAPID_PRIVATE_KEY).public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).decode().rstrip("=")


def _key_bytes(value: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (ValueError, TypeError):
        return b""


def _refuse(message: str) -> ApplicationError:
    return ApplicationError(message, code="invalid_subscription")


def _host_allowed(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    host = (parts.hostname or "").lower()
    sandbox = urlsplit(settings.SANDBOX_URL)
    if parts.scheme != "https" and not (parts.scheme == sandbox.scheme == "http" and host == sandbox.hostname):
        return False
    return any(
        host == allowed or (allowed.startswith(".") and host.endswith(allowed))
        for allowed in settings.PUSH_SERVICE_HOSTS
    )


def push_subscribe(*, user: User, endpoint: str, p256dh: str, auth: str, label: str = "") -> PushSubscription:
    """Keep a browser's subscription (again: the same endpoint is updated, and moves to this person when the
    browser is now theirs). Refused: an endpoint of no push service Tasklift sends to, keys that are none."""
    if len(endpoint) > 2000 or not _host_allowed(endpoint):
        raise _refuse("This browser's push service is not one Tasklift sends notifications through.")
    if len(_key_bytes(p256dh)) != 65 or len(_key_bytes(auth)) != 16:
        raise _refuse("The browser's notification keys are not valid.")
    if PushSubscription.objects.filter(user=user).exclude(endpoint=endpoint).count() >= MAX_SUBSCRIPTIONS:
        raise _refuse(f"At most {MAX_SUBSCRIPTIONS} browsers can have notifications: turn one off first.")
    subscription, _ = PushSubscription.objects.update_or_create(
        endpoint=endpoint,
        defaults={
            "user": user,
            "keys_encrypted": encrypt_json({"p256dh": p256dh, "auth": auth}),
            "label": label[:100],
        },
    )
    return subscription


def push_unsubscribe(*, user: User, endpoint: str) -> bool:
    return PushSubscription.objects.filter(user=user, endpoint=endpoint).delete()[0] > 0


def _payload(task: Task) -> str:
    assert task.due_time is not None
    return json.dumps(
        {
            "title": task.title[:200],
            "body": f"Due at {task.due_time:%H:%M}"
            + (f" · from {task.email_sender[:80]}" if task.email_sender else ""),
            "url": f"{settings.SITE_URL}/tasks/{task.pk}",
            "tag": f"reminder-{task.pk}",
        }
    )


def push_subscriptions_of(user_ids: list[int]) -> dict[int, list[PushSubscription]]:
    """The browsers of these people, in one statement (a chunk of reminders reads them once)."""
    found: dict[int, list[PushSubscription]] = {}
    for subscription in PushSubscription.objects.filter(user_id__in=user_ids):
        found.setdefault(subscription.user_id, []).append(subscription)
    return found


def push_send(*, task: Task, subscriptions: list[PushSubscription]) -> list[int]:
    """The reminder of `task` pushed to each of these browsers of its person; returns the subscriptions the push
    service took it for (the caller stamps them, a chunk at once). One the push service let go is dropped."""
    if not subscriptions:
        return []
    payload = _payload(task)
    vapid = _vapid(settings.VAPID_PRIVATE_KEY)
    ttl = settings.REMINDER_LATE_MINUTES * 60  # after that, a reminder is no use: the push service drops it
    pushed: list[int] = []
    for subscription in subscriptions:
        info: dict[str, Any] = {"endpoint": subscription.endpoint, "keys": decrypt_json(subscription.keys_encrypted)}
        try:
            webpush(
                info,
                data=payload,
                vapid_private_key=vapid,
                vapid_claims={"sub": settings.VAPID_SUBJECT},
                ttl=ttl,
                timeout=settings.PUSH_TIMEOUT_S,
                headers={"Urgency": "high", "Topic": f"reminder-{task.pk}"},
            )
        except WebPushException as error:
            status = error.response.status_code if error.response is not None else None
            if status in GONE:  # the browser let it go: so do we
                PushSubscription.objects.filter(pk=subscription.pk).delete()
                logger.info("push subscription %s gone (%s): dropped", subscription.pk, status)
            else:
                logger.warning("push of task=%s to subscription %s failed: %s", task.pk, subscription.pk, status)
            continue
        except OSError as error:  # the push service out of reach (requests' errors are OSErrors)
            name = type(error).__name__
            logger.warning("push of task=%s to subscription %s failed: %s", task.pk, subscription.pk, name)
            continue
        pushed.append(subscription.pk)
    return pushed


def push_stamp(subscription_ids: list[int]) -> None:
    if subscription_ids:
        PushSubscription.objects.filter(pk__in=subscription_ids).update(last_pushed_at=timezone.now())
