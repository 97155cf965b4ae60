"""Google's OAuth 2.0 endpoints for a web app: consent page, token endpoint, revocation.

Speaks what google-auth-oauthlib's `Flow` and google-auth's `Credentials.refresh` send and expect
(reference §D): PKCE S256 on the code, HTTP Basic or body client authentication, Google's error bodies.
Tokens map to a mailbox address; `token_address` is how the Gmail API checks a Bearer token.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Response, redirect, request
from pydantic import BaseModel, ConfigDict, Field
from werkzeug.wrappers import Response as BaseResponse

from sandbox import oauth
from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.oauth import ACCESS_TOKEN_LIFETIME_S, CODE_LIFETIME_S, AuthorizeProblem, RefreshToken, TokenTargetIn
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
EXPIRED_OR_REVOKED = "Token has been expired or revoked."
STORE = "google_oauth"  # this provider's key in the sandbox state (its service name)


@dataclass
class AuthCode(oauth.AuthCode):
    offline: bool  # access_type=offline: the code exchange also issues a refresh token


@dataclass
class AccessToken(oauth.AccessToken):
    refresh_token: str | None  # Google revokes an access token and its refresh token together


OAuthData = oauth.TokenStore[AuthCode, AccessToken]


def _data(state: SandboxState) -> OAuthData:
    return oauth.token_store(state, STORE)


def _next_grants(state: SandboxState) -> dict[str, str]:
    """Scope sets the next consent of an address grants instead of the requested one; call with the lock held."""
    grants: dict[str, str] = state.data.setdefault(f"{STORE}:next_grant", {})
    return grants


# Token store (used by the Gmail API and the control routes) ----------------------------------------
def token_address(state: SandboxState, access_token: str) -> str | None:
    """The mailbox an access token opens, or None if it is unknown, revoked or expired."""
    return oauth.access_lookup(state, STORE, access_token)[0]


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
def _authorize_params(source: Any) -> dict[str, str]:
    """The validated authorization request parameters from `source` (query args or form)."""

    def need(name: str) -> str:
        return oauth.required(source, name, "Missing required parameter: {name}")

    client_id = need("client_id")
    if client_id not in CLIENTS:
        raise AuthorizeProblem(f"invalid_client: The OAuth client was not found (client_id={client_id}).")
    redirect_uri = need("redirect_uri")
    if not oauth.is_absolute_http_url(redirect_uri):
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
    if not oauth.CODE_CHALLENGE.match(code_challenge):
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


@blueprint.route("/o/oauth2/auth", methods=["GET", "POST"])
@oauth.problem_page("google_error.html")
def authorize() -> BaseResponse | str:
    params = _authorize_params(request.args if request.method == "GET" else request.form)
    st = sandbox_state()
    if request.method == "GET":
        from sandbox.gmail import mailbox_addresses

        return oauth.consent_page("google_authorize.html", params, mailbox_addresses(st))

    if request.form.get("decision") == "fill_demo":
        from sandbox.gmail import mailbox_addresses

        return oauth.demo_fill_page("google_authorize.html", params, st, "gmail", lambda: mailbox_addresses(st))
    if request.form.get("decision") != "allow":
        return redirect(oauth.with_query(params["redirect_uri"], {"error": "access_denied", "state": params["state"]}))
    address = oauth.consented_address()
    code = f"4/sbx-{secrets.token_urlsafe(32)}"
    with st.lock:
        scope = _next_grants(st).pop(address, params["scope"])
        _data(st).codes[code] = AuthCode(
            client_id=params["client_id"],
            redirect_uri=params["redirect_uri"],
            code_challenge=params["code_challenge"],
            address=address,
            scope=scope,
            offline=params["access_type"] == "offline",
            expires_at=time.time() + CODE_LIFETIME_S,
        )
    values = {"state": params["state"], "code": code, "scope": scope}
    return redirect(oauth.with_query(params["redirect_uri"], values))


# Token endpoint -------------------------------------------------------------------------------------
def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    return json_response({"error": error, "error_description": description}, status)


@blueprint.post("/token")
def token() -> Response:
    # Basic credentials are form-urlencoded first; only base64 errors count as bad credentials.
    client_id, client_secret = oauth.client_credentials(percent_decoded=True)
    if client_id not in CLIENTS:
        return _oauth_error("invalid_client", "The OAuth client was not found.", 401)
    if not secrets.compare_digest(CLIENTS[client_id], client_secret):
        return _oauth_error("invalid_client", "Unauthorized", 401)
    return oauth.grant(
        client_id,
        authorization_code=_exchange_code,
        refresh_token=_refresh,
        missing=lambda: _oauth_error("invalid_request", "Missing required parameter: grant_type"),
        unsupported=lambda grant_type: _oauth_error("unsupported_grant_type", f"Invalid grant_type: {grant_type}"),
    )


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
        if oauth.s256(verifier) != code.code_challenge:
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
class TokenIssueIn(oauth.TokenIssueIn):
    scope: str = DEFAULT_SCOPE
    client_id: str = next(iter(CLIENTS))


@control_route("/google/tokens", methods=["POST"])
def control_issue_tokens() -> Response:
    spec = parse_body(TokenIssueIn)
    oauth.known_client(spec.client_id, CLIENTS)
    unknown = [s for s in spec.scope.split() if s not in KNOWN_SCOPES]
    if unknown or not spec.scope.split():
        raise ControlError("invalid_field", f"scope: unknown scopes {unknown}")
    st = sandbox_state()
    answer = tokens_issue(
        st, address=spec.address, client_id=spec.client_id, scope=spec.scope, expires_in=spec.expires_in
    )
    return oauth.issued(answer, spec)


@control_route("/google/tokens/expire", methods=["POST"])
def control_expire_tokens() -> Response:
    """Make access tokens expired now (the one given, or every access token of a mailbox)."""
    spec = parse_body(TokenTargetIn)
    refusal = "refresh_token: refresh tokens do not expire; revoke them instead"
    return oauth.expire_access_tokens(sandbox_state(), STORE, spec, refresh_refusal=refusal)


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


class NextGrantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=oauth.ADDRESS.pattern)
    scope: str = Field(min_length=1)


@control_route("/google/next-grant", methods=["POST"])
def control_next_grant() -> Response:
    """The next consent of `address` grants exactly `scope`, whatever the app asked for: as when the person
    unticks a permission on Google's granular consent screen, or Google adds scopes the account granted the
    app before. The redirect and the code exchange then answer with that scope set."""
    spec = parse_body(NextGrantIn)
    unknown = [s for s in spec.scope.split() if s not in KNOWN_SCOPES]
    if unknown:
        raise ControlError("invalid_field", f"scope: unknown scopes {unknown}")
    st = sandbox_state()
    with st.lock:
        _next_grants(st)[spec.address.lower()] = spec.scope
    return json_response({"address": spec.address.lower(), "scope": spec.scope}, 201)
