"""Google's OAuth 2.0 endpoints for a web app: consent page, token endpoint, revocation.

Speaks what google-auth-oauthlib's `Flow` and google-auth's `Credentials.refresh` send and expect
(reference §D): PKCE S256 on the code, HTTP Basic or body client authentication, Google's error bodies.
Tokens map to a mailbox address; `token_address` is how the Gmail API checks a Bearer token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from flask import Blueprint, Response, redirect, render_template, request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from werkzeug.wrappers import Response as BaseResponse

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.state import SandboxState

blueprint = Blueprint("google_oauth", __name__, url_prefix="/google")

# The OAuth clients the sandbox knows (config/settings.py uses this pair when GOOGLE_CLIENT_ID is unset).
CLIENTS = {"sandbox-google-client": "sandbox-google-secret"}
DEFAULT_SCOPE = "https://www.googleapis.com/auth/gmail.readonly"
KNOWN_SCOPES = frozenset(
    {
        "https://mail.google.com/",
        "https://www.googleapis.com/auth/gmail.readonly",
        "https://www.googleapis.com/auth/gmail.metadata",
        "https://www.googleapis.com/auth/gmail.modify",
        "https://www.googleapis.com/auth/userinfo.email",
        "https://www.googleapis.com/auth/userinfo.profile",
        "openid",
        "email",
        "profile",
    }
)
ACCESS_TOKEN_LIFETIME_S = 3600
CODE_LIFETIME_S = 600
EXPIRED_OR_REVOKED = "Token has been expired or revoked."
_CODE_CHALLENGE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass
class AuthCode:
    client_id: str
    redirect_uri: str
    code_challenge: str
    address: str
    scope: str
    offline: bool
    expires_at: float


@dataclass
class AccessToken:
    address: str
    client_id: str
    scope: str
    expires_at: float
    refresh_token: str | None


@dataclass
class RefreshToken:
    address: str
    client_id: str
    scope: str


@dataclass
class OAuthData:
    codes: dict[str, AuthCode]
    access: dict[str, AccessToken]
    refresh: dict[str, RefreshToken]


def _data(state: SandboxState) -> OAuthData:
    data: OAuthData = state.data.setdefault("google_oauth", OAuthData({}, {}, {}))
    return data


# Token store (used by the Gmail API and the control routes) ----------------------------------------
def token_address(state: SandboxState, access_token: str) -> str | None:
    """The mailbox an access token opens, or None if it is unknown, revoked or expired."""
    with state.lock:
        token = _data(state).access.get(access_token)
        if token is None or token.expires_at <= time.time():
            return None
        return token.address


def tokens_issue(
    state: SandboxState,
    *,
    address: str,
    client_id: str,
    scope: str,
    expires_in: int = ACCESS_TOKEN_LIFETIME_S,
    offline: bool = True,
) -> dict[str, Any]:
    """Issue an access token (and a refresh token if `offline`) for `address`; Google's token response."""
    refresh_token = f"1//sbx-{secrets.token_urlsafe(32)}" if offline else None
    with state.lock:
        data = _data(state)
        if refresh_token:
            data.refresh[refresh_token] = RefreshToken(address.lower(), client_id, scope)
        answer = _issue_access(data, address.lower(), client_id, scope, expires_in, refresh_token)
    if refresh_token:
        answer["refresh_token"] = refresh_token
    return answer


def _issue_access(
    data: OAuthData, address: str, client_id: str, scope: str, expires_in: int, refresh_token: str | None
) -> dict[str, Any]:
    access_token = f"ya29.sbx-{secrets.token_urlsafe(32)}"
    data.access[access_token] = AccessToken(address, client_id, scope, time.time() + expires_in, refresh_token)
    return {"access_token": access_token, "expires_in": expires_in, "scope": scope, "token_type": "Bearer"}


def _revoke_refresh(data: OAuthData, refresh_token: str) -> None:
    data.refresh.pop(refresh_token, None)
    for key in [k for k, v in data.access.items() if v.refresh_token == refresh_token]:
        del data.access[key]


def token_revoke(state: SandboxState, token: str) -> bool:
    """Revoke an access or refresh token together with its pair (as Google does). False if unknown."""
    with state.lock:
        data = _data(state)
        if token in data.refresh:
            _revoke_refresh(data, token)
            return True
        access = data.access.pop(token, None)
        if access is None:
            return False
        if access.refresh_token:
            _revoke_refresh(data, access.refresh_token)
        return True


# Consent page ---------------------------------------------------------------------------------------
class AuthorizeProblem(Exception):
    pass


def _authorize_params(source: Any) -> dict[str, str]:
    """The validated authorization request parameters from `source` (query args or form)."""

    def need(name: str) -> str:
        value = str(source.get(name, "")).strip()
        if not value:
            raise AuthorizeProblem(f"Missing required parameter: {name}")
        return value

    client_id = need("client_id")
    if client_id not in CLIENTS:
        raise AuthorizeProblem(f"invalid_client: The OAuth client was not found (client_id={client_id}).")
    redirect_uri = need("redirect_uri")
    parts = urlsplit(redirect_uri)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        raise AuthorizeProblem(f"redirect_uri_mismatch: {redirect_uri} is not an absolute http(s) URL.")
    response_type = need("response_type")
    if response_type != "code":
        raise AuthorizeProblem(f"unsupported_response_type: response_type must be 'code', not '{response_type}'.")
    scope = need("scope")
    unknown = [s for s in scope.split() if s not in KNOWN_SCOPES]
    if unknown:
        raise AuthorizeProblem(f"invalid_scope: Some requested scopes were invalid: {', '.join(unknown)}")
    state = need("state")
    code_challenge = need("code_challenge")
    if not _CODE_CHALLENGE.match(code_challenge):
        raise AuthorizeProblem("invalid_request: code_challenge must be 43-128 characters of [A-Za-z0-9._~-].")
    method = need("code_challenge_method")
    if method != "S256":
        raise AuthorizeProblem(f"invalid_request: code_challenge_method must be 'S256', not '{method}'.")
    access_type = str(source.get("access_type", "online"))
    if access_type not in ("online", "offline"):
        raise AuthorizeProblem(f"invalid_request: access_type must be 'online' or 'offline', not '{access_type}'.")
    return {
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "response_type": response_type,
        "scope": scope,
        "state": state,
        "code_challenge": code_challenge,
        "code_challenge_method": method,
        "access_type": access_type,
        "login_hint": str(source.get("login_hint", "")),
        "prompt": str(source.get("prompt", "")),
        "include_granted_scopes": str(source.get("include_granted_scopes", "")),
    }


def _with_query(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


@blueprint.route("/o/oauth2/auth", methods=["GET", "POST"])
def authorize() -> BaseResponse | str | tuple[str, int]:
    source = request.args if request.method == "GET" else request.form
    try:
        params = _authorize_params(source)
    except AuthorizeProblem as problem:
        return render_template("google_error.html", problem=str(problem)), 400
    st = sandbox_state()
    if request.method == "GET":
        from sandbox.gmail import mailbox_addresses

        existing = mailbox_addresses(st)
        default = params["login_hint"] or (existing[0] if existing else "")
        return render_template("google_authorize.html", params=params, address=default, mailboxes=existing)

    if request.form.get("decision") != "allow":
        return redirect(_with_query(params["redirect_uri"], {"error": "access_denied", "state": params["state"]}))
    address = request.form.get("address", "").strip().lower()
    if not _ADDRESS.match(address):
        return render_template("google_error.html", problem=f"'{address}' is not an email address."), 400
    code = f"4/sbx-{secrets.token_urlsafe(32)}"
    with st.lock:
        _data(st).codes[code] = AuthCode(
            client_id=params["client_id"],
            redirect_uri=params["redirect_uri"],
            code_challenge=params["code_challenge"],
            address=address,
            scope=params["scope"],
            offline=params["access_type"] == "offline",
            expires_at=time.time() + CODE_LIFETIME_S,
        )
    target = _with_query(params["redirect_uri"], {"state": params["state"], "code": code, "scope": params["scope"]})
    return redirect(target)


# Token endpoint -------------------------------------------------------------------------------------
def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    return json_response({"error": error, "error_description": description}, status)


def _client_credentials() -> tuple[str, str]:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return "", ""
        client_id, _, secret = decoded.partition(":")
        return unquote(client_id), unquote(secret)
    return request.form.get("client_id", ""), request.form.get("client_secret", "")


@blueprint.post("/token")
def token() -> Response:
    client_id, client_secret = _client_credentials()
    if client_id not in CLIENTS:
        return _oauth_error("invalid_client", "The OAuth client was not found.", 401)
    if not secrets.compare_digest(CLIENTS[client_id], client_secret):
        return _oauth_error("invalid_client", "Unauthorized", 401)
    grant_type = request.form.get("grant_type", "")
    if grant_type == "authorization_code":
        return _exchange_code(client_id)
    if grant_type == "refresh_token":
        return _refresh(client_id)
    if not grant_type:
        return _oauth_error("invalid_request", "Missing required parameter: grant_type")
    return _oauth_error("unsupported_grant_type", f"Invalid grant_type: {grant_type}")


def _exchange_code(client_id: str) -> Response:
    code_value = request.form.get("code", "")
    if not code_value:
        return _oauth_error("invalid_request", "Missing required parameter: code")
    st = sandbox_state()
    with st.lock:
        data = _data(st)
        code = data.codes.pop(code_value, None)  # single use, whatever happens next
        if code is None or code.expires_at <= time.time() or code.client_id != client_id:
            return _oauth_error("invalid_grant", "Malformed auth code.")
        if request.form.get("redirect_uri", "") != code.redirect_uri:
            return _oauth_error("redirect_uri_mismatch", "Bad Request")
        verifier = request.form.get("code_verifier", "")
        if not verifier:
            return _oauth_error("invalid_grant", "Missing code verifier.")
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != code.code_challenge:
            return _oauth_error("invalid_grant", "Invalid code verifier.")
    answer = tokens_issue(st, address=code.address, client_id=client_id, scope=code.scope, offline=code.offline)
    return json_response(answer)


def _refresh(client_id: str) -> Response:
    refresh_token = request.form.get("refresh_token", "")
    if not refresh_token:
        return _oauth_error("invalid_request", "Missing required parameter: refresh_token")
    st = sandbox_state()
    with st.lock:
        data = _data(st)
        stored = data.refresh.get(refresh_token)
        if stored is None or stored.client_id != client_id:
            return _oauth_error("invalid_grant", EXPIRED_OR_REVOKED)
        answer = _issue_access(data, stored.address, client_id, stored.scope, ACCESS_TOKEN_LIFETIME_S, refresh_token)
    return json_response(answer)


@blueprint.post("/revoke")
def revoke() -> Response:
    value = request.args.get("token") or request.form.get("token", "")
    if not value:
        return _oauth_error("invalid_request", "Missing required parameter: token")
    if not token_revoke(sandbox_state(), value):
        return _oauth_error("invalid_token", "Token expired or revoked")
    return json_response({})


# Control routes -------------------------------------------------------------------------------------
class TokenIssueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=_ADDRESS.pattern)
    expires_in: int = Field(default=ACCESS_TOKEN_LIFETIME_S, ge=0, le=7 * 24 * 3600)
    scope: str = DEFAULT_SCOPE
    client_id: str = next(iter(CLIENTS))


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


@control_route("/google/tokens", methods=["POST"])
def control_issue_tokens() -> Response:
    spec = parse_body(TokenIssueIn)
    if spec.client_id not in CLIENTS:
        raise ControlError("invalid_field", f"client_id: unknown client {spec.client_id!r}")
    unknown = [s for s in spec.scope.split() if s not in KNOWN_SCOPES]
    if unknown or not spec.scope.split():
        raise ControlError("invalid_field", f"scope: unknown scopes {unknown}")
    st = sandbox_state()
    answer = tokens_issue(
        st, address=spec.address, client_id=spec.client_id, scope=spec.scope, expires_in=spec.expires_in
    )
    answer["expiry"] = datetime.fromtimestamp(time.time() + spec.expires_in, UTC).isoformat()
    answer["address"] = spec.address.lower()
    return json_response(answer, 201)


@control_route("/google/tokens/expire", methods=["POST"])
def control_expire_tokens() -> Response:
    """Make access tokens expired now (the one given, or every access token of a mailbox)."""
    spec = parse_body(TokenTargetIn)
    if spec.refresh_token:
        raise ControlError("invalid_field", "refresh_token: refresh tokens do not expire; revoke them instead")
    st = sandbox_state()
    with st.lock:
        data = _data(st)
        hits = [
            t
            for key, t in data.access.items()
            if key == spec.access_token or (spec.address and t.address == spec.address.lower())
        ]
        for t in hits:
            t.expires_at = time.time() - 1
    if spec.access_token and not hits:
        raise ControlError("unknown_token", "access_token: no such access token", 404)
    return json_response({"expired": len(hits)})


@control_route("/google/tokens/revoke", methods=["POST"])
def control_revoke_tokens() -> Response:
    """Revoke a token with its pair, or every token of a mailbox (the person removed the app's access)."""
    spec = parse_body(TokenTargetIn)
    st = sandbox_state()
    if spec.address:
        address = spec.address.lower()
        with st.lock:
            data = _data(st)
            tokens = [k for k, v in data.refresh.items() if v.address == address]
            tokens += [k for k, v in data.access.items() if v.address == address]
        revoked = sum(token_revoke(st, t) for t in tokens)
        return json_response({"revoked": revoked})
    token_value = spec.access_token or spec.refresh_token or ""
    if not token_revoke(st, token_value):
        raise ControlError("unknown_token", "token: no such token (or already revoked)", 404)
    return json_response({"revoked": 1})
