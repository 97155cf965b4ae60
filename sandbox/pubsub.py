"""Cloud Pub/Sub push, as far as Gmail's push notifications use it (reference §A.8, §F): push subscriptions
(what one configures in the GCP console, set here through the control API), the wrapped push envelope, the
OIDC token signed for every push, and Google's certificates to check that token against.

At start the sandbox makes an RSA key with a self-signed certificate. Its `kid` stays the same for the life of
the server (a reset keeps it), and `GET /oauth2/v1/certs` serves Google's v1 map `{kid: PEM certificate}`, the
form `google.oauth2.id_token.verify_token(token, request, audience=..., certs_url=<sandbox>/oauth2/v1/certs)`
reads. Each push carries `Authorization: Bearer <JWT>` (RS256, `kid` in the header) with Google's push claims:
`aud` (the subscription's audience, by default its push endpoint, as in Pub/Sub), `azp` and `sub` (the
service account's numeric id), `email` (the service account), `email_verified: true`, `iat`, `exp` (an hour
later) and `iss: "https://accounts.google.com"`. A fresh token is signed for every attempt.

Topics are not modelled: a message published to a topic goes to the push subscriptions naming it (none:
nowhere, as with a real topic that has no subscription), and a Gmail watch on any well-formed topic name
works (Gmail would refuse a topic that does not exist or that gmail-api-push@system.gserviceaccount.com may
not publish to).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from flask import Blueprint, Response
from google.auth import crypt, jwt
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.push import Delivery, deliveries_queue, delivery_drop_log, endpoint_problem
from sandbox.state import SandboxState

blueprint = Blueprint("pubsub", __name__)

ISSUER = "https://accounts.google.com"
TOKEN_LIFETIME_S = 3600
DEFAULT_SERVICE_ACCOUNT = "gmail-push@tasklift-sandbox.iam.gserviceaccount.com"  # the token route's `email`
USER_AGENT = "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"
TOPIC_PATTERN = r"^projects/[^/\s]+/topics/[^/\s]+$"
_KEYS = "pubsub_keys"  # in what outlives a reset
_STORE = "pubsub"


# Keys ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SigningKeys:
    kid: str
    key_pem: bytes
    cert_pem: bytes
    stranger_pem: bytes  # another key under the same kid: a token whose signature does not verify


def _rsa_key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _keys_generate() -> SigningKeys:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tasklift sandbox push token signer")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    public_der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return SigningKeys(
        kid=hashlib.sha1(public_der).hexdigest(),  # 40 hex digits, like Google's key ids
        key_pem=_rsa_key_pem(key),
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        stranger_pem=_rsa_key_pem(stranger),
    )


def signing_keys(state: SandboxState) -> SigningKeys:
    """The server's signing keys, made on first use (create_app asks at start)."""
    with state.lock:
        if _KEYS not in state.keep:
            state.keep[_KEYS] = _keys_generate()
        keys: SigningKeys = state.keep[_KEYS]
        return keys


_OWN_KID = object()  # token_sign's default: the header names the sandbox key's kid


def token_sign(state: SandboxState, claims: dict[str, Any], *, stranger: bool = False, kid: object = _OWN_KID) -> str:
    """A push token signed by the sandbox key (or the stranger's). `kid`: the header's key id, by default the
    sandbox key's; another string names a key Google never published; None leaves the kid out."""
    keys = signing_keys(state)
    key_id = keys.kid if kid is _OWN_KID else kid
    assert key_id is None or isinstance(key_id, str)
    signer = crypt.RSASigner.from_string(  # type: ignore[no-untyped-call]
        keys.stranger_pem if stranger else keys.key_pem, key_id=key_id
    )
    token: bytes = jwt.encode(signer, claims)  # type: ignore[no-untyped-call]
    return token.decode()


def service_account_id(email: str) -> str:
    """A service account's numeric unique id (the token's `sub` and `azp`): 21 digits, stable per email."""
    return "1" + str(int(hashlib.sha256(email.lower().encode()).hexdigest(), 16))[:20]


def push_claims(*, audience: str, service_account_email: str, now: int | None = None) -> dict[str, Any]:
    now = int(time.time()) if now is None else now
    account_id = service_account_id(service_account_email)
    return {
        "aud": audience,
        "azp": account_id,
        "email": service_account_email,
        "email_verified": True,
        "exp": now + TOKEN_LIFETIME_S,
        "iat": now,
        "iss": ISSUER,
        "sub": account_id,
    }


@blueprint.get("/oauth2/v1/certs")
def certs() -> Response:
    """Google's v1 certificates map, {kid: PEM x509 certificate}, as www.googleapis.com/oauth2/v1/certs."""
    keys = signing_keys(sandbox_state())
    return json_response(
        {keys.kid: keys.cert_pem.decode()}, headers={"Cache-Control": "public, max-age=19845, must-revalidate"}
    )


# Push subscriptions and publishing ------------------------------------------------------------------------
@dataclass(frozen=True)
class PushSubscription:
    name: str
    topic: str
    push_endpoint: str
    audience: str  # the push endpoint unless configured
    service_account_email: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic": self.topic,
            "push_endpoint": self.push_endpoint,
            "audience": self.audience,
            "service_account_email": self.service_account_email,
        }


def _subscriptions(state: SandboxState) -> list[PushSubscription]:
    subscriptions: list[PushSubscription] = state.data.setdefault(_STORE, [])
    return subscriptions


def _publish_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def topic_publish(state: SandboxState, topic: str, payload: dict[str, Any], *, dropped: str | None = None) -> str:
    """Publish `payload` (JSON) to `topic`: one push per push subscription of the topic, all with the same
    messageId. `dropped` names why the publisher drops it instead (logged, never sent). Returns the messageId."""
    now = time.time()
    with state.lock:
        message_id = str(2_070_443_601_311_540 + state.next_id())
        data = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()  # standard, padded
        published = _publish_time(now)
        deliveries = []
        for subscription in _subscriptions(state):
            if subscription.topic != topic:
                continue
            envelope = {
                "message": {
                    "attributes": {},
                    "data": data,
                    "messageId": message_id,
                    "message_id": message_id,
                    "publishTime": published,
                    "publish_time": published,
                },
                "subscription": subscription.name,
            }
            headers = _push_headers(state, subscription)
            deliveries.append(Delivery("pubsub", "push", subscription.push_endpoint, envelope, headers=headers))
        if dropped is not None:
            for delivery in deliveries:
                delivery_drop_log(state, delivery, dropped)
        else:
            deliveries_queue(state, deliveries)
    return message_id


def _push_headers(state: SandboxState, subscription: PushSubscription) -> Callable[[], dict[str, str]]:
    def headers() -> dict[str, str]:
        claims = push_claims(audience=subscription.audience, service_account_email=subscription.service_account_email)
        return {"Authorization": f"Bearer {token_sign(state, claims)}", "User-Agent": USER_AGENT}

    return headers


# Control routes --------------------------------------------------------------------------------------
class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(pattern=TOPIC_PATTERN)
    push_endpoint: str = Field(min_length=1, max_length=2000)
    audience: str | None = Field(default=None, min_length=1, max_length=2000)
    service_account_email: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")

    @field_validator("push_endpoint")
    @classmethod
    def usable_endpoint(cls, value: str) -> str:
        problem = endpoint_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claims: dict[str, Any] = Field(default_factory=dict)
    signer: Literal["sandbox", "stranger"] = "sandbox"
    kid: str | None = None  # left out: the sandbox key's kid; null: no kid in the header


@control_route("/pubsub/subscriptions", methods=["POST"])
def control_pubsub_subscription_create() -> Response:
    """Configure a push subscription on a topic (as in the GCP console): 201 with its generated name."""
    spec = parse_body(SubscriptionIn)
    project = spec.topic.split("/")[1]
    st = sandbox_state()
    with st.lock:
        subscription = PushSubscription(
            name=f"projects/{project}/subscriptions/sandbox-push-{st.next_id()}-{secrets.token_hex(3)}",
            topic=spec.topic,
            push_endpoint=spec.push_endpoint,
            audience=spec.audience or spec.push_endpoint,
            service_account_email=spec.service_account_email,
        )
        _subscriptions(st).append(subscription)
    return json_response(subscription.as_dict(), 201)


@control_route("/pubsub/subscriptions", methods=["GET"])
def control_pubsub_subscription_list() -> Response:
    st = sandbox_state()
    with st.lock:
        return json_response({"subscriptions": [s.as_dict() for s in _subscriptions(st)]})


@control_route("/pubsub/subscriptions", methods=["DELETE"])
def control_pubsub_subscription_clear() -> Response:
    st = sandbox_state()
    with st.lock:
        _subscriptions(st).clear()
    return json_response({"ok": True})


@control_route("/pubsub/token", methods=["POST"])
def control_pubsub_token() -> Response:
    """A push token built to order: the claims of a real push, overridden by `claims` (a null drops the claim),
    signed by the sandbox key or (`signer: "stranger"`) by another key under the same kid. `kid` names
    another key id in the header (one Google never published), or `null` leaves it out."""
    spec = parse_body(TokenIn)
    if "aud" not in spec.claims:
        raise ControlError("invalid_field", "claims.aud: give the audience the token is for (null leaves it out)")
    claims: dict[str, Any] = push_claims(audience="", service_account_email=DEFAULT_SERVICE_ACCOUNT)
    claims.update(spec.claims)
    claims = {name: value for name, value in claims.items() if value is not None}
    kid = spec.kid if "kid" in spec.model_fields_set else _OWN_KID
    token = token_sign(sandbox_state(), claims, stranger=spec.signer == "stranger", kid=kid)
    return json_response({"token": token, "claims": claims})
