"""The sandbox's Web Push service refuses what a real push service refuses (RFC 8030, 8292), so that our tests
are not blind where FCM or autopush would say no: no TTL, another encoding, a VAPID token for another audience,
living over 24 hours, signed by another key, or a payload that does not decrypt with the subscription's keys."""

from __future__ import annotations

import base64
import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from py_vapid import Vapid02
from pywebpush import WebPusher, webpush

from sandbox.client import SandboxClient


def _vapid() -> tuple[Vapid02, str]:
    key = Vapid02()
    key.generate_keys()
    point = key.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    return key, base64.urlsafe_b64encode(point).decode().rstrip("=")


def _headers(key: Vapid02, claims: dict[str, Any]) -> dict[str, str]:
    """RFC 8292's header, signed here with PyJWT (py_vapid would refuse the bad claims these tests send)."""
    token = jwt.encode(claims, key.private_key, algorithm="ES256")
    point = key.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    k = base64.urlsafe_b64encode(point).decode().rstrip("=")
    return {"Authorization": f"vapid t={token}, k={k}", "TTL": "60", "Content-Encoding": "aes128gcm"}


def _encrypted(subscription: dict[str, Any], data: bytes = b'{"title": "x"}') -> bytes:
    return bytes(WebPusher(subscription).encode(data, content_encoding="aes128gcm")["body"])


def test_webpush_service_delivers_what_pywebpush_sends_decrypted(sandbox: SandboxClient) -> None:
    key, public = _vapid()
    subscription = sandbox.webpush_subscribe(application_server_key=public)
    answer = webpush(
        subscription, data='{"title": "Call Bob"}', vapid_private_key=key, vapid_claims={"sub": "mailto:a@b.c"}, ttl=30
    )
    assert answer.status_code == 201 and answer.headers["Location"]
    [message] = sandbox.webpush_messages()
    assert message["payload"] == {"title": "Call Bob"} and message["ttl"] == 30


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ("no_ttl", 400),
        ("encoding", 415),
        ("audience", 403),
        ("long_lived", 403),
        ("other_key", 403),
        ("no_sub", 403),
        ("not_vapid", 401),
        ("garbled", 400),
    ],
)
def test_webpush_service_refuses_what_a_push_service_refuses(sandbox: SandboxClient, change: str, status: int) -> None:
    key, public = _vapid()
    subscription = sandbox.webpush_subscribe(application_server_key=public)
    endpoint = subscription["endpoint"]
    origin = sandbox.base_url
    claims: dict[str, Any] = {"sub": "mailto:a@b.c", "aud": origin, "exp": int(time.time()) + 3600}
    body = _encrypted(subscription)
    signer = key
    if change == "audience":
        claims["aud"] = "https://fcm.googleapis.com"
    elif change == "long_lived":
        claims["exp"] = int(time.time()) + 25 * 3600
    elif change == "other_key":
        signer, _ = _vapid()
    elif change == "no_sub":
        claims["sub"] = "someone"
    elif change == "garbled":
        body = body[:-5] + b"xxxxx"
    headers = _headers(signer, claims)
    if change == "no_ttl":
        del headers["TTL"]
    elif change == "encoding":
        headers["Content-Encoding"] = "aesgcm"
    elif change == "not_vapid":
        headers["Authorization"] = "Bearer nope"
    answer = requests.post(endpoint, data=body, headers=headers, timeout=10)
    assert answer.status_code == status, answer.text
    assert sandbox.webpush_messages() == []


def test_webpush_service_answers_a_subscription_let_go_with_its_status(sandbox: SandboxClient) -> None:
    key, public = _vapid()
    subscription = sandbox.webpush_subscribe(application_server_key=public)
    sandbox.webpush_gone(subscription["id"], 404)
    claims = {"sub": "mailto:a@b.c", "aud": sandbox.base_url, "exp": int(time.time()) + 3600}
    answer = requests.post(
        subscription["endpoint"], data=_encrypted(subscription), headers=_headers(key, claims), timeout=10
    )
    assert answer.status_code == 404
    unknown = subscription["endpoint"].rsplit("/", 1)[0] + "/s999999"
    assert requests.post(unknown, data=b"", headers={"TTL": "0"}, timeout=10).status_code == 404
