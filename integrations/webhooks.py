"""The doorbells: Gmail's Pub/Sub push and Graph's change and lifecycle notifications.

Each answers fast (Graph wants 2xx within 3 s, Pub/Sub within its ack deadline) and does no reading: it
checks that the ring is genuine, finds the mailboxes it concerns and requests runs (extraction/scheduling.py).
Status codes follow what the sender does with them: Pub/Sub redelivers on anything but 102/200/201/202/204,
Graph retries on 5xx. A ring for a mailbox we do not know is acknowledged, so that it is not sent again.

While PostgreSQL or Redis is out of reach (a restart), a ring is answered 503 with Retry-After, never a 500:
the provider sends it again, and nothing is lost meanwhile, since a ring only requests a run. What a ring
writes before the failure is the doorbell's own note (`notified_at`), which makes beat's scan read the
mailbox; a run row whose job could not be sent is ended at once (extraction_run_send), never left queued.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from config.metrics import push_rings_count
from config.unavailable import RETRY_AFTER_S, UNAVAILABLE
from extraction.scheduling import extraction_doorbell, gmail_ring_covered, outlook_ring_covered
from integrations.jobs import push_channel_open_job, push_channel_renew_job
from integrations.models import Integration, PushChannel
from integrations.push import PushRefused, client_state_matches, pubsub_envelope_read, pubsub_token_verify

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1_000_000  # a Graph POST holds a few notifications; a Pub/Sub envelope is tiny


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _unavailable_is_503(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """The ring answered 503 with Retry-After while the database or Redis cannot be reached."""

    @wraps(view)
    def answer(request: HttpRequest) -> HttpResponse:
        try:
            return view(request)
        except UNAVAILABLE as error:
            logger.warning("webhook %s answered 503: %s.%s", request.path, type(error).__module__, type(error).__name__)
            response = _error(
                503, "unavailable", "Tasklift cannot take notifications for a moment; send this one again later."
            )
            response["Retry-After"] = str(RETRY_AFTER_S)
            return response

    return answer


@csrf_exempt
@_unavailable_is_503
@require_POST
def gmail_push(request: HttpRequest) -> HttpResponse:
    """Pub/Sub push of a Gmail watch: `{message: {data: base64 {emailAddress, historyId}}}` with an OIDC
    token. 401 without a token, 403 with a bad one, nothing requested either way."""
    try:
        pubsub_token_verify(request.headers.get("Authorization", ""))
    except PushRefused as refused:
        logger.warning("gmail push refused: %s", refused.reason)
        push_rings_count("gmail", refused=1)
        return _error(refused.status, "push_refused", "The push token was refused.")
    try:
        push = pubsub_envelope_read(request.body)
    except (ValueError, UnicodeDecodeError):
        push_rings_count("gmail", malformed=1)
        return _error(400, "bad_envelope", "The body is not a Pub/Sub envelope of a Gmail notification.")
    integrations = Integration.objects.filter(
        provider=Integration.Provider.GMAIL, account_address=push.address, status=Integration.Status.ACTIVE
    )
    rung = [i.pk for i in integrations if not gmail_ring_covered(integration=i, history_id=push.history_id)]
    push_rings_count("gmail", **{"accepted" if integrations else "unknown": 1})
    queued = extraction_doorbell(integration_ids=rung)
    logger.info(
        "gmail push history=%s mailboxes=%d rung=%d queued=%d", push.history_id, len(integrations), len(rung), queued
    )
    return HttpResponse(status=204)


@csrf_exempt
@_unavailable_is_503
def outlook_notify(request: HttpRequest) -> HttpResponse:
    """Graph change notifications (`{value: [...]}`), and the validation handshake of a new subscription."""
    checked = _checked(request)
    if isinstance(checked, HttpResponse):
        return checked
    genuine, items, refused = checked
    rung: list[int] = []
    for channel, notes in genuine.items():
        # Each subscription's messages against the ledger of its own purpose (the inbox's, or Sent mail's).
        by_purpose: dict[str, set[str]] = {}
        for note in notes:
            sent = channel.sent_external_id and str(note.get("subscriptionId", "")) == channel.sent_external_id
            data = note.get("resourceData")
            ids = by_purpose.setdefault("sent_mail" if sent else "task_extraction", set())
            if isinstance(data, dict) and data.get("id"):
                ids.add(str(data["id"]))
        if not all(
            outlook_ring_covered(integration=channel.integration, message_ids=ids, purpose=purpose)
            for purpose, ids in by_purpose.items()
        ):
            rung.append(channel.integration_id)
    queued = extraction_doorbell(integration_ids=rung)
    logger.info("graph notifications=%d refused=%d queued=%d", len(items), refused, queued)
    return HttpResponse(status=202)


@csrf_exempt
@_unavailable_is_503
def outlook_lifecycle(request: HttpRequest) -> HttpResponse:
    """Graph lifecycle notifications: `reauthorizationRequired` renews the subscription,
    `subscriptionRemoved` makes it again and reads the mailbox, `missed` reads the mailbox."""
    checked = _checked(request)
    if isinstance(checked, HttpResponse):
        return checked
    genuine, items, refused = checked
    read: list[int] = []
    for channel, notes in genuine.items():
        events = {str(n.get("lifecycleEvent", "")) for n in notes}
        if "subscriptionRemoved" in events:
            push_channel_open_job.delay(channel.integration_id)
            read.append(channel.integration_id)
        elif "reauthorizationRequired" in events:
            push_channel_renew_job.delay(channel.integration_id)
        if "missed" in events:
            read.append(channel.integration_id)
    queued = extraction_doorbell(integration_ids=read)
    logger.info("graph lifecycle notifications=%d refused=%d queued=%d", len(items), refused, queued)
    return HttpResponse(status=202)


Checked = tuple[dict[PushChannel, list[dict[str, Any]]], list[dict[str, Any]], int]


def _checked(request: HttpRequest) -> HttpResponse | Checked:
    """The answer to give at once (the handshake, a 400, a 403 when every notification was refused), or the
    genuine notifications by channel, all of them, and how many were refused."""
    handshake = _validation(request)
    if handshake is not None:
        return handshake
    items = _notifications(request)
    if items is None:
        push_rings_count("outlook", malformed=1)
        return _error(400, "bad_notification", "The body is not a Graph notification collection.")
    genuine, refused = _genuine(items)
    accepted = sum(len(notes) for notes in genuine.values())
    push_rings_count("outlook", accepted=accepted, refused=refused, unknown=len(items) - accepted - refused)
    if refused and not genuine:
        return _error(403, "client_state_refused", "No notification carried the subscription's clientState.")
    return genuine, items, refused


def _validation(request: HttpRequest) -> HttpResponse | None:
    """Graph's handshake: echo the (already URL-decoded) validationToken as text/plain."""
    token = request.GET.get("validationToken")
    if token is None:
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        return None
    return HttpResponse(token, content_type="text/plain; charset=utf-8")


def _notifications(request: HttpRequest) -> list[dict[str, Any]] | None:
    if len(request.body) > MAX_BODY_BYTES:
        return None
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return None
    value = body.get("value") if isinstance(body, dict) else None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None
    return value


def _genuine(items: list[dict[str, Any]]) -> tuple[dict[PushChannel, list[dict[str, Any]]], int]:
    """The notifications whose subscription we know and whose clientState matches it, by channel; and how
    many were refused. A notification of a subscription we do not know is neither (acknowledged, ignored)."""
    ids = {str(item.get("subscriptionId", "")) for item in items}
    ids.discard("")
    channels: dict[str, PushChannel] = {}
    for c in PushChannel.objects.select_related("integration").filter(
        Q(external_id__in=ids) | Q(sent_external_id__in=ids), integration__provider=Integration.Provider.OUTLOOK
    ):
        channels.update({i: c for i in (c.external_id, c.sent_external_id) if i})
    genuine: dict[PushChannel, list[dict[str, Any]]] = {}
    refused = 0
    for item in items:
        channel = channels.get(str(item.get("subscriptionId", "")))
        if channel is None:
            continue
        if not client_state_matches(channel, item.get("clientState")):
            refused += 1
            continue
        genuine.setdefault(channel, []).append(item)
    return genuine, refused


# The forward-to door's second way in --------------------------------------------------------------------------
INBOUND_SIGNATURE_MAX_AGE_S = 300  # a signed request older (or newer) than this is refused: no replay


def inbound_signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of "<timestamp>." and the body, with the webhook's shared secret."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


@csrf_exempt
@_unavailable_is_503
@require_POST
def inbound_webhook(request: HttpRequest) -> HttpResponse:
    """A provider's inbound service posting one message for a forward-to address: the raw MIME as the body, the
    envelope in headers (X-Tasklift-Recipient, -Mail-From, -Client-IP, -Helo), signed (X-Tasklift-Timestamp,
    X-Tasklift-Signature). 200 only once the message is stored; a refusal says why (code); 503 with
    Retry-After when it should be sent again later, as SMTP's 4xx."""
    from integrations.inbound.accept import inbound_accept

    secret = settings.INBOUND_WEBHOOK_SECRET
    if not secret:
        return _error(404, "not_found", "The inbound webhook is not enabled.")
    body = request.read(settings.INBOUND_MAX_BYTES + 1)
    timestamp = request.headers.get("X-Tasklift-Timestamp", "")
    signature = request.headers.get("X-Tasklift-Signature", "")
    if not timestamp or not signature:
        return _error(401, "signature_missing", "X-Tasklift-Timestamp and X-Tasklift-Signature are required.")
    try:
        fresh = abs(time.time() - int(timestamp)) <= INBOUND_SIGNATURE_MAX_AGE_S
    except ValueError:
        fresh = False
    if not fresh or not hmac.compare_digest(signature, inbound_signature(secret, timestamp, body)):
        logger.warning("inbound webhook refused: %s", "stale timestamp" if not fresh else "bad signature")
        return _error(403, "signature_refused", "The signature or its timestamp is not valid.")
    recipient = request.headers.get("X-Tasklift-Recipient", "")
    if not recipient:
        return _error(400, "recipient_missing", "X-Tasklift-Recipient names the forward-to address.")
    answer = inbound_accept(
        recipient=recipient,
        raw=body,
        client_ip=request.headers.get("X-Tasklift-Client-IP", ""),
        helo=request.headers.get("X-Tasklift-Helo", ""),
        mail_from=request.headers.get("X-Tasklift-Mail-From", ""),
        via="webhook",
    )
    if answer.taken:
        return JsonResponse({"accepted": True})
    if 400 <= answer.code < 500:
        response = _error(503, answer.outcome, answer.text)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return _error(413 if answer.outcome == "too_big" else 422, answer.outcome, answer.text)
