"""What the two OAuth 2.0 stand-ins (google_oauth.py, microsoft.py) have in common.

The token store (codes, access and refresh tokens per provider, under the sandbox lock), PKCE S256, the
consent page's shared steps, client authentication at the token endpoint, and the control API's token
models and helpers. Everything a client can tell apart (token response shapes, error bodies, field names,
token formats, which checks apply) stays in the provider modules; these helpers take it as arguments.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, ParamSpec, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from flask import Response, render_template, request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox.app import json_response
from sandbox.control import ControlError
from sandbox.state import SandboxState

ACCESS_TOKEN_LIFETIME_S = 3600
CODE_LIFETIME_S = 600
ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
CODE_CHALLENGE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")


# Token store ------------------------------------------------------------------------------------------
@dataclass
class AuthCode:
    """An authorization code; providers add what they carry through to the token endpoint."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    address: str
    scope: str
    expires_at: float


@dataclass
class AccessToken:
    address: str
    client_id: str
    scope: str
    expires_at: float


@dataclass
class RefreshToken:
    address: str
    client_id: str
    scope: str


CodeT = TypeVar("CodeT", bound=AuthCode)
AccessT = TypeVar("AccessT", bound=AccessToken)


@dataclass
class TokenStore(Generic[CodeT, AccessT]):
    codes: dict[str, CodeT]
    access: dict[str, AccessT]
    refresh: dict[str, RefreshToken]


def token_store(state: SandboxState, key: str) -> TokenStore[Any, Any]:
    """The provider's store in the sandbox state (`key` is its service name); call with the lock held."""
    store: TokenStore[Any, Any] = state.data.setdefault(key, TokenStore({}, {}, {}))
    return store


def access_lookup(state: SandboxState, key: str, token: str) -> tuple[str | None, str]:
    """(the mailbox address an access token opens, or None with why: "unknown" or "expired")."""
    with state.lock:
        stored = token_store(state, key).access.get(token)
        if stored is None:
            return None, "unknown"
        if stored.expires_at <= time.time():
            return None, "expired"
        return stored.address, ""


def b64url(data: bytes) -> str:
    """base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def s256(verifier: str) -> str:
    """The PKCE S256 code challenge of `verifier` (RFC 7636 §4.2)."""
    return b64url(hashlib.sha256(verifier.encode()).digest())


# Consent page -------------------------------------------------------------------------------------------
class AuthorizeProblem(Exception):
    """A bad authorization request or consent form: the provider's error page names it (400)."""


Params = ParamSpec("Params")


def problem_page(
    template: str,
) -> Callable[[Callable[Params, Any]], Callable[Params, Any]]:
    """Make a view answer an AuthorizeProblem with `template` rendered with the problem, status 400."""

    def decorate(view: Callable[Params, Any]) -> Callable[Params, Any]:
        @functools.wraps(view)
        def wrapper(*args: Params.args, **kwargs: Params.kwargs) -> Any:
            try:
                return view(*args, **kwargs)
            except AuthorizeProblem as problem:
                return render_template(template, problem=str(problem)), 400

        return wrapper

    return decorate


def required(source: Mapping[str, Any], name: str, missing: str) -> str:
    """The stripped parameter `name` of `source`; AuthorizeProblem(`missing` with {name}) if absent or blank."""
    value = str(source.get(name, "")).strip()
    if not value:
        raise AuthorizeProblem(missing.format(name=name))
    return value


def is_absolute_http_url(url: str) -> bool:
    """An http(s) URL with a host and no fragment: what a redirect URI must be."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not parts.fragment


def with_query(url: str, params: dict[str, str]) -> str:
    """`url` with `params` appended to its query string."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


def consent_page(
    template: str, params: dict[str, str], mailboxes: list[str], *, address: str = "", **context: Any
) -> str:
    """The consent form, its address prefilled from login_hint or else the first existing mailbox."""
    default = address or params["login_hint"] or (mailboxes[0] if mailboxes else "")
    return render_template(template, params=params, address=default, mailboxes=mailboxes, **context)


def demo_fill_page(
    template: str, params: dict[str, str], state: Any, provider: str, mailboxes: Any, **context: Any
) -> str:
    """The consent form's "Fill this mailbox with the demo mail": fill the typed address's mailbox (when it is
    empty), then the same consent form again, saying what was done, to allow or deny."""
    from sandbox.demo import demo_fill_if_empty

    address = consented_address()
    filled = demo_fill_if_empty(state, provider, address)
    note = (
        f"{address} now holds the {filled} demo emails. Allow to let Tasklift read them."
        if filled
        else f"{address} already holds mail: nothing was added."
    )
    return consent_page(template, params, mailboxes(), address=address, demo_note=note, **context)


def consented_address() -> str:
    """The address submitted on the consent form (lowercased); AuthorizeProblem if it is not one."""
    address = request.form.get("address", "").strip().lower()
    if not ADDRESS.match(address):
        raise AuthorizeProblem(f"'{address}' is not an email address.")
    return address


# Token endpoint -----------------------------------------------------------------------------------------
def client_credentials(*, percent_decoded: bool) -> tuple[str, str]:
    """(client_id, client_secret) from HTTP Basic or the form body; ("", "") if Basic cannot be decoded.

    `percent_decoded`: the Basic id and secret are form-urlencoded first (RFC 6749 §2.3.1), as Google
    reads them. A header that does not decode (bad base64, not ASCII, not UTF-8) is bad credentials.
    """
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors too
            return "", ""
        client_id, _, secret = decoded.partition(":")
        if percent_decoded:
            return unquote(client_id), unquote(secret)
        return client_id, secret
    return request.form.get("client_id", ""), request.form.get("client_secret", "")


def grant(
    client_id: str,
    *,
    authorization_code: Callable[[str], Response],
    refresh_token: Callable[[str], Response],
    missing: Callable[[], Response],
    unsupported: Callable[[str], Response],
) -> Response:
    """Dispatch the token request on its grant_type (the client already authenticated)."""
    grant_type = request.form.get("grant_type", "")
    if grant_type == "authorization_code":
        return authorization_code(client_id)
    if grant_type == "refresh_token":
        return refresh_token(client_id)
    if not grant_type:
        return missing()
    return unsupported(grant_type)


# Control routes -----------------------------------------------------------------------------------------
class TokenIssueIn(BaseModel):
    """What the providers' POST /_sandbox/<provider>/tokens share; each adds `scope` and `client_id`."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=ADDRESS.pattern)
    expires_in: int = Field(default=ACCESS_TOKEN_LIFETIME_S, ge=0, le=7 * 24 * 3600)


class TokenTargetIn(BaseModel):
    """Exactly one of: one token, or every token of a mailbox."""

    model_config = ConfigDict(extra="forbid")

    access_token: str | None = None
    refresh_token: str | None = None
    address: str | None = None

    @model_validator(mode="after")
    def exactly_one(self) -> TokenTargetIn:
        given = [name for name in ("access_token", "refresh_token", "address") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError("give exactly one of access_token, refresh_token, address")
        return self


def known_client(client_id: str, clients: Mapping[str, str]) -> None:
    if client_id not in clients:
        raise ControlError("invalid_field", f"client_id: unknown client {client_id!r}")


def issued(answer: dict[str, Any], spec: TokenIssueIn) -> Response:
    """The control answer to an issue: the token response plus `expiry` and `address`, 201."""
    answer["expiry"] = datetime.fromtimestamp(time.time() + spec.expires_in, UTC).isoformat()
    answer["address"] = spec.address.lower()
    return json_response(answer, 201)


def expire_access_tokens(state: SandboxState, key: str, spec: TokenTargetIn, *, refresh_refusal: str) -> Response:
    """Make access tokens expired now (the one given, or every one of a mailbox); `refresh_refusal` is the
    message for a refresh token, which does not expire."""
    if spec.refresh_token:
        raise ControlError("invalid_field", refresh_refusal)
    with state.lock:
        hits = [
            stored
            for token, stored in token_store(state, key).access.items()
            if token == spec.access_token or (spec.address and stored.address == spec.address.lower())
        ]
        for stored in hits:
            stored.expires_at = time.time() - 1
    if spec.access_token and not hits:
        raise ControlError("unknown_token", "access_token: no such access token", 404)
    return json_response({"expired": len(hits)})
