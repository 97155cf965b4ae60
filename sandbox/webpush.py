"""A Web Push service (RFC 8030), as a browser's push service (FCM, Mozilla's autopush) is to a server: it
takes a push message for a subscription, checks its VAPID authorization (RFC 8292), and delivers it. Here,
"delivered" is the request log: the message decrypted with the subscription's keys (RFC 8291, aes128gcm, by
http_ece), so that a test sees exactly what a browser's service worker would get.

What it checks, as the real services do:
- `TTL` is required (RFC 8030 §5.2: 400 without it); the body is `aes128gcm` (`Content-Encoding`), at most
  4096 bytes (413 beyond).
- `Authorization: vapid t=<JWT>, k=<public key>`: the JWT is ES256, signed by `k`; its `aud` is the endpoint's
  origin; its `exp` in the future and at most 24 hours ahead; its `sub` a `mailto:` or `https:` address. A
  subscription made with an applicationServerKey takes only that key (403 for another). Otherwise 401/403.
- A subscription the browser let go answers 404 or 410, as the test says (`/_sandbox/webpush/.../gone`).

Control: `POST /_sandbox/webpush/subscriptions` makes a subscription as a browser's pushManager.subscribe()
would (a P-256 key pair and a 16-byte auth secret; the private half stays here), `GET
/_sandbox/webpush/messages` lists what was delivered."""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any
from urllib.parse import urlsplit

import http_ece
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from flask import Blueprint, Response, request
from pydantic import BaseModel, ConfigDict, Field

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.state import SandboxState

blueprint = Blueprint("webpush", __name__, url_prefix="/webpush")

MAX_BODY = 4096  # RFC 8030 §7.2: a push service must accept at least this much
MAX_JWT_LIFETIME = 24 * 3600  # RFC 8292 §2


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _data(st: SandboxState) -> dict[str, Any]:
    return st.data.setdefault("webpush", {"subscriptions": {}, "messages": []})


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The applicationServerKey the browser subscribed with (base64url): only that key's JWTs are taken.
    application_server_key: str | None = None


class GoneIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int = Field(default=410, ge=404, le=410)


@control_route("/webpush/subscriptions", methods=["POST"])
def control_subscribe() -> Response:
    spec = parse_body(SubscriptionIn)
    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    auth = os.urandom(16)
    st = sandbox_state()
    with st.lock:
        sub_id = f"s{st.next_id()}"
        _data(st)["subscriptions"][sub_id] = {
            "private": private,
            "auth": auth,
            "server_key": spec.application_server_key,
            "gone": None,
        }
    base = request.host_url.rstrip("/")
    return json_response(
        {
            "id": sub_id,
            "endpoint": f"{base}/webpush/send/{sub_id}",
            "keys": {"p256dh": _b64(public), "auth": _b64(auth)},
        },
        201,
    )


@control_route("/webpush/subscriptions/<sub_id>/gone", methods=["POST"])
def control_gone(sub_id: str) -> Response:
    spec = parse_body(GoneIn)
    st = sandbox_state()
    with st.lock:
        subscription = _data(st)["subscriptions"].get(sub_id)
        if subscription is None:
            raise ControlError("not_found", f"No subscription {sub_id}", 404)
        subscription["gone"] = spec.status
    return json_response({"id": sub_id, "gone": spec.status})


@control_route("/webpush/messages", methods=["GET"])
def control_messages() -> Response:
    st = sandbox_state()
    with st.lock:
        return json_response({"messages": list(_data(st)["messages"])})


def _refused(status: int, reason: str) -> Response:
    return json_response({"error": {"code": status, "message": reason}}, status)


def _vapid(header: str, endpoint: str, server_key: str | None) -> tuple[dict[str, Any], Response | None]:
    """The VAPID JWT's claims, or the push service's refusal."""
    scheme, _, rest = header.partition(" ")
    if scheme.lower() != "vapid":
        return {}, _refused(401, "Authorization must be the vapid scheme (RFC 8292)")
    params = dict(part.strip().split("=", 1) for part in rest.split(",") if "=" in part)
    token, key = params.get("t", ""), params.get("k", "")
    if not token or not key:
        return {}, _refused(401, "vapid needs t= and k=")
    if server_key is not None and _unb64(key) != _unb64(server_key):
        return {}, _refused(403, "The VAPID key is not the one the subscription was made with")
    try:
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), _unb64(key))
        aud = f"{urlsplit(endpoint).scheme}://{urlsplit(endpoint).netloc}"
        claims = jwt.decode(token, public, algorithms=["ES256"], audience=aud, options={"require": ["exp", "aud"]})
    except (ValueError, jwt.PyJWTError) as error:
        return {}, _refused(403, f"VAPID token refused: {error}")
    if int(claims["exp"]) > time.time() + MAX_JWT_LIFETIME:
        return {}, _refused(403, "VAPID token lives longer than 24 hours")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
        return {}, _refused(403, "VAPID sub must be a mailto: or https: address")
    return claims, None


@blueprint.route("/send/<sub_id>", methods=["POST"])
def push_message(sub_id: str) -> Response:
    st = sandbox_state()
    with st.lock:
        subscription = _data(st)["subscriptions"].get(sub_id)
    if subscription is None:
        return _refused(404, "No such subscription")
    if subscription["gone"]:
        return _refused(int(subscription["gone"]), "The subscription has expired or been unsubscribed")
    if "TTL" not in request.headers or not request.headers["TTL"].isdigit():
        return _refused(400, "TTL header required")
    if request.headers.get("Content-Encoding", "").lower() != "aes128gcm":
        return _refused(415, "Content-Encoding must be aes128gcm")
    body = request.get_data()
    if len(body) > MAX_BODY:
        return _refused(413, "Payload too large")
    claims, refusal = _vapid(request.headers.get("Authorization", ""), request.url, subscription["server_key"])
    if refusal is not None:
        return refusal
    try:
        payload = http_ece.decrypt(
            body, private_key=subscription["private"], auth_secret=subscription["auth"], version="aes128gcm"
        )
    except Exception as error:  # http_ece raises its own and cryptography's errors alike
        return _refused(400, f"The payload does not decrypt with the subscription's keys: {error}")
    text = payload.decode()
    with st.lock:
        _data(st)["messages"].append(
            {
                "subscription": sub_id,
                "payload": json.loads(text) if text.startswith("{") else text,
                "ttl": int(request.headers["TTL"]),
                "urgency": request.headers.get("Urgency", "normal"),
                "topic": request.headers.get("Topic"),
                "vapid": {name: claims.get(name) for name in ("aud", "sub", "exp")},
            }
        )
    return Response(status=201, headers={"Location": f"{request.host_url.rstrip('/')}/webpush/message/{sub_id}"})
