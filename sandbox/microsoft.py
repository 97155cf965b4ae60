"""Microsoft identity platform (v2.0 endpoints) for a web app: OIDC discovery, consent page, token endpoint.

Speaks what MSAL Python's ConfidentialClientApplication sends and expects (reference §C): discovery at
/{tenant}/v2.0/.well-known/openid-configuration, the auth code flow with PKCE S256 and a nonce that comes back
in an unsigned id_token, `client_info` so MSAL can key the account, refresh with AAD's `invalid_grant` body.
MSAL itself talks to the sandbox's HTTPS listener (it refuses an http authority), so discovery, the token
endpoint and the issuer are https. The consent page is the one page a person's browser opens, and no browser
trusts the certificate generated at start, so discovery names the plain-http listener as the
authorization_endpoint: MSAL only builds the consent URL from it and never calls it.
Access tokens map to a mailbox address; `access_token_lookup` is how Graph checks a Bearer token.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, current_app, redirect, render_template, request
from pydantic import BaseModel, ConfigDict, Field
from werkzeug.wrappers import Response as BaseResponse

from sandbox import oauth
from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.oauth import (
    ACCESS_TOKEN_LIFETIME_S,
    CODE_LIFETIME_S,
    AccessToken,
    AuthorizeProblem,
    RefreshToken,
    TokenTargetIn,
    b64url,
)
from sandbox.state import SandboxState

blueprint = Blueprint("microsoft", __name__)

# The app registrations the sandbox knows (config/settings.py uses this pair when MICROSOFT_CLIENT_ID is unset).
CLIENTS = {"sandbox-microsoft-client": "sandbox-microsoft-secret"}
TENANT_ID = "5a1db0c5-7a5c-4d1e-9b8e-5a4db0c5f00d"  # the one directory every sandbox account lives in
DEFAULT_SCOPE = "Mail.Read User.Read openid profile offline_access"
STORE = "microsoft"  # this provider's key in the sandbox state (its service name)
_TENANT = re.compile(r"^[A-Za-z0-9.-]{1,64}$")


def account_oid(address: str) -> str:
    """The account's object id: stable for an address, so /me and the id_token agree across sign-ins."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tasklift-sandbox:{address.lower()}"))


def display_name(address: str) -> str:
    """ "grace.hopper@example.com" -> "Grace Hopper"."""
    local = address.split("@", 1)[0]
    return " ".join(word.capitalize() for word in re.split(r"[._+-]+", local) if word) or address


def tls_base_url() -> str:
    """The HTTPS base URL of the sandbox (falls back to how this request reached it)."""
    base: str = current_app.config.get("SANDBOX_TLS_BASE_URL") or request.host_url.rstrip("/")
    return base


def http_base_url() -> str:
    """The plain-http base URL of the sandbox, where a browser goes (falls back to how this request reached it)."""
    base: str = current_app.config.get("SANDBOX_BASE_URL") or request.host_url.rstrip("/")
    return base


# Storage --------------------------------------------------------------------------------------------
@dataclass
class AuthCode(oauth.AuthCode):
    nonce: str  # comes back in the id_token
    granted: str = ""  # the scope set the consent granted, when it is not the one the token request names


IdentityData = oauth.TokenStore[AuthCode, AccessToken]


def _data(state: SandboxState) -> IdentityData:
    return oauth.token_store(state, STORE)


def _next_grants(state: SandboxState) -> dict[str, str]:
    """Scope sets the next consent of an address grants instead of the requested one; call with the lock held."""
    grants: dict[str, str] = state.data.setdefault(f"{STORE}:next_grant", {})
    return grants


def access_token_lookup(state: SandboxState, token: str) -> tuple[str | None, str]:
    """(the mailbox address an access token opens, or None with why: "unknown" or "expired")."""
    return oauth.access_lookup(state, STORE, token)


# Tokens ---------------------------------------------------------------------------------------------


def _id_token(*, address: str, client_id: str, nonce: str | None, now: float) -> str:
    """An unsigned JWT (alg none): MSAL decodes the claims and checks the nonce, not a signature (§C.3)."""
    oid = account_oid(address)
    claims: dict[str, Any] = {
        "ver": "2.0",
        "aud": client_id,
        "iss": f"{tls_base_url()}/{TENANT_ID}/v2.0",
        "iat": int(now),
        "nbf": int(now),
        "exp": int(now) + ACCESS_TOKEN_LIFETIME_S,
        "oid": oid,
        "sub": b64url(hashlib.sha256(f"{oid}:{client_id}".encode()).digest()),  # pairwise, like AAD's
        "tid": TENANT_ID,
        "preferred_username": address,
        "name": display_name(address),
    }
    if nonce:
        claims["nonce"] = nonce
    header = {"typ": "JWT", "alg": "none"}
    return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}."


def client_info(address: str) -> str:
    """base64url({"uid": oid, "utid": tid}): what MSAL keys the account by (home_account_id = uid.utid)."""
    return b64url(json.dumps({"uid": account_oid(address), "utid": TENANT_ID}).encode())


def tokens_issue(
    state: SandboxState,
    *,
    address: str,
    client_id: str,
    scope: str,
    nonce: str | None = None,
    expires_in: int = ACCESS_TOKEN_LIFETIME_S,
) -> dict[str, Any]:
    """AAD's token response for `address`: access token, refresh token (with offline_access), id_token."""
    now = time.time()
    address = address.lower()
    access_token = f"EwBsbx.{secrets.token_urlsafe(40)}"
    answer: dict[str, Any] = {
        "token_type": "Bearer",
        "scope": scope,
        "expires_in": expires_in,
        "ext_expires_in": expires_in,
        "access_token": access_token,
    }
    with state.lock:
        data = _data(state)
        data.access[access_token] = AccessToken(address, client_id, scope, now + expires_in)
        if "offline_access" in scope.split():
            refresh_token = f"M.C5sbx.{secrets.token_urlsafe(48)}"
            data.refresh[refresh_token] = RefreshToken(address, client_id, scope)
            answer["refresh_token"] = refresh_token
    if "openid" in scope.split():
        answer["id_token"] = _id_token(address=address, client_id=client_id, nonce=nonce, now=now)
    answer["client_info"] = client_info(address)
    return answer


# OIDC discovery ---------------------------------------------------------------------------------------
@blueprint.get("/<tenant>/v2.0/.well-known/openid-configuration")
def openid_configuration(tenant: str) -> Response:
    if not _TENANT.match(tenant):
        return _aad_error("invalid_tenant", 90002, f"Tenant '{tenant}' not found.", 400)
    base = f"{tls_base_url()}/{tenant}"
    return json_response(
        {
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "jwks_uri": f"{base}/discovery/v2.0/keys",
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": f"{tls_base_url()}/{TENANT_ID}/v2.0",
            "request_uri_parameter_supported": False,
            "userinfo_endpoint": f"{tls_base_url()}/oidc/userinfo",
            # Opened by the person's browser, not by MSAL: plain http, so no certificate warning (module doc).
            "authorization_endpoint": f"{http_base_url()}/{tenant}/oauth2/v2.0/authorize",
            "end_session_endpoint": f"{base}/oauth2/v2.0/logout",
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nonce", "preferred_username", "name", "tid"],
            "tenant_region_scope": "EU",
            "cloud_instance_name": "microsoftonline.com",
        }
    )


@blueprint.get("/<tenant>/discovery/v2.0/keys")
def jwks(tenant: str) -> Response:
    return json_response({"keys": []})  # id_tokens are unsigned (alg none): there is nothing to verify


# Consent page ---------------------------------------------------------------------------------------
def _authorize_params(source: Any) -> dict[str, str]:
    """The validated authorization request from `source` (query args or the consent form)."""

    def need(name: str) -> str:
        return oauth.required(
            source, name, "AADSTS900144: The request body must contain the following parameter: '{name}'."
        )

    client_id = need("client_id")
    if client_id not in CLIENTS:
        raise AuthorizeProblem(
            f"AADSTS700016: Application with identifier '{client_id}' was not found in the directory."
        )
    redirect_uri = need("redirect_uri")
    if not oauth.is_absolute_http_url(redirect_uri):
        raise AuthorizeProblem(f"AADSTS50011: The redirect URI '{redirect_uri}' is not an absolute http(s) URL.")
    response_type = need("response_type")
    if response_type != "code":
        raise AuthorizeProblem(f"AADSTS700054: response_type '{response_type}' is not enabled for the application.")
    scope = need("scope")
    code_challenge = str(source.get("code_challenge", ""))
    method = str(source.get("code_challenge_method", ""))
    if code_challenge and (method != "S256" or not oauth.CODE_CHALLENGE.match(code_challenge)):
        raise AuthorizeProblem("AADSTS501491: Invalid code_challenge or code_challenge_method (only S256 here).")
    response_mode = str(source.get("response_mode", "") or "query")
    if response_mode not in ("query", "form_post"):
        raise AuthorizeProblem(f"AADSTS900148: response_mode '{response_mode}' is not supported here.")
    return {
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "response_type": response_type,
        "response_mode": response_mode,
        "scope": scope,
        "state": str(source.get("state", "")),
        "nonce": str(source.get("nonce", "")),
        "code_challenge": code_challenge,
        "code_challenge_method": method,
        "client_info": str(source.get("client_info", "")),
        "login_hint": str(source.get("login_hint", "")),
        "prompt": str(source.get("prompt", "")),
    }


def _answer(params: dict[str, str], values: dict[str, str]) -> BaseResponse | str:
    """Send the result to the redirect URI: as a query string, or as an auto-posted form (form_post)."""
    if params["state"]:
        values = {**values, "state": params["state"]}
    if params["response_mode"] == "form_post":
        return render_template("microsoft_form_post.html", action=params["redirect_uri"], values=values)
    return redirect(oauth.with_query(params["redirect_uri"], values))


@blueprint.route("/<tenant>/oauth2/v2.0/authorize", methods=["GET", "POST"])
@oauth.problem_page("microsoft_error.html")
def authorize(tenant: str) -> BaseResponse | str:
    params = _authorize_params(request.args if request.method == "GET" else request.form)
    st = sandbox_state()
    if request.method == "GET":
        from sandbox.graph import mailbox_addresses

        return oauth.consent_page("microsoft_authorize.html", params, mailbox_addresses(st), tenant=tenant)

    if request.form.get("decision") == "fill_demo":
        from sandbox.graph import mailbox_addresses

        return oauth.demo_fill_page(
            "microsoft_authorize.html", params, st, "outlook", lambda: mailbox_addresses(st), tenant=tenant
        )
    if request.form.get("decision") != "accept":
        return _answer(
            params,
            {
                "error": "access_denied",
                "error_description": "AADSTS65004: User declined to consent to access the app.",
            },
        )
    address = oauth.consented_address()
    code = f"M.C5sbx-code.{secrets.token_urlsafe(32)}"
    with st.lock:
        _data(st).codes[code] = AuthCode(
            client_id=params["client_id"],
            redirect_uri=params["redirect_uri"],
            code_challenge=params["code_challenge"],
            nonce=params["nonce"],
            scope=params["scope"],
            address=address,
            expires_at=time.time() + CODE_LIFETIME_S,
            granted=_next_grants(st).pop(address, ""),
        )
    values = {"code": code}
    if params["client_info"] == "1":
        values["client_info"] = client_info(address)
    return _answer(params, values)


# Token endpoint -------------------------------------------------------------------------------------
def _aad_error(error: str, code: int, description: str, status: int = 400) -> Response:
    """AAD's error body: `error`, `error_description` starting "AADSTSnnn:", `error_codes`, trace ids."""
    now = datetime.now(UTC)
    trace_id, correlation_id = str(uuid.uuid4()), str(uuid.uuid4())
    return json_response(
        {
            "error": error,
            "error_description": (
                f"AADSTS{code}: {description} Trace ID: {trace_id} Correlation ID: {correlation_id} "
                f"Timestamp: {now:%Y-%m-%d %H:%M:%SZ}"
            ),
            "error_codes": [code],
            "timestamp": f"{now:%Y-%m-%d %H:%M:%SZ}",
            "trace_id": trace_id,
            "correlation_id": correlation_id,
            "error_uri": f"https://login.microsoftonline.com/error?code={code}",
        },
        status,
    )


@blueprint.post("/<tenant>/oauth2/v2.0/token")
def token(tenant: str) -> Response:
    # Basic credentials are taken as they are; any decoding error counts as bad credentials.
    client_id, client_secret = oauth.client_credentials(percent_decoded=False)
    if client_id not in CLIENTS:
        return _aad_error(
            "unauthorized_client", 700016, f"Application with identifier '{client_id}' was not found.", 400
        )
    if not client_secret or not secrets.compare_digest(CLIENTS[client_id], client_secret):
        return _aad_error("invalid_client", 7000215, "Invalid client secret provided.", 401)
    return oauth.grant(
        client_id,
        authorization_code=_exchange_code,
        refresh_token=_refresh,
        missing=lambda: _aad_error(
            "invalid_request", 900144, "The request body must contain the parameter: 'grant_type'."
        ),
        unsupported=lambda grant_type: _aad_error(
            "unsupported_grant_type", 70003, f"The app requested an unsupported grant type '{grant_type}'."
        ),
    )


def _exchange_code(client_id: str) -> Response:
    code_value = request.form.get("code", "")
    if not code_value:
        return _aad_error("invalid_request", 900144, "The request body must contain the parameter: 'code'.")
    st = sandbox_state()
    with st.lock:
        code = _data(st).codes.pop(code_value, None)  # single use, whatever happens next
    if code is None or code.client_id != client_id:
        return _aad_error("invalid_grant", 54005, "OAuth2 Authorization code was already redeemed or is not valid.")
    if code.expires_at <= time.time():
        return _aad_error("invalid_grant", 70008, "The provided authorization code or refresh token has expired.")
    if request.form.get("redirect_uri", "") != code.redirect_uri:
        return _aad_error(
            "invalid_grant", 50011, "The redirect URI does not match the one of the authorization request."
        )
    if code.code_challenge:
        verifier = request.form.get("code_verifier", "")
        if not verifier:
            return _aad_error("invalid_grant", 50148, "The code_verifier is missing.")
        if oauth.s256(verifier) != code.code_challenge:
            return _aad_error(
                "invalid_grant", 501481, "The Code_Verifier does not match the code_challenge supplied in the request."
            )
    scope = code.granted or request.form.get("scope", "") or code.scope
    answer = tokens_issue(st, address=code.address, client_id=client_id, scope=scope, nonce=code.nonce or None)
    return json_response(answer)


def _refresh(client_id: str) -> Response:
    refresh_token = request.form.get("refresh_token", "")
    if not refresh_token:
        return _aad_error("invalid_request", 900144, "The request body must contain the parameter: 'refresh_token'.")
    st = sandbox_state()
    with st.lock:
        stored = _data(st).refresh.get(refresh_token)
    if stored is None or stored.client_id != client_id:
        return _aad_error(
            "invalid_grant",
            70000,
            "The provided value for the 'refresh_token' is not valid: it was revoked, has expired, or was issued "
            "to another client. The user must sign in again.",
        )
    scope = request.form.get("scope", "") or stored.scope
    answer = tokens_issue(st, address=stored.address, client_id=client_id, scope=scope)
    return json_response(answer)


# Control routes -------------------------------------------------------------------------------------
class TokenIssueIn(oauth.TokenIssueIn):
    scope: str = Field(default=DEFAULT_SCOPE, min_length=1)
    client_id: str = next(iter(CLIENTS))


@control_route("/microsoft/tokens", methods=["POST"])
def control_microsoft_issue_tokens() -> Response:
    """AAD's token response for an address without the consent page, plus `expiry` and `address`."""
    spec = parse_body(TokenIssueIn)
    oauth.known_client(spec.client_id, CLIENTS)
    answer = tokens_issue(
        sandbox_state(), address=spec.address, client_id=spec.client_id, scope=spec.scope, expires_in=spec.expires_in
    )
    return oauth.issued(answer, spec)


@control_route("/microsoft/tokens/expire", methods=["POST"])
def control_microsoft_expire_tokens() -> Response:
    """Make access tokens expired now (the one given, or every one of a mailbox): Graph answers 401."""
    spec = parse_body(TokenTargetIn)
    refusal = "refresh_token: refresh tokens do not expire here; revoke them instead"
    return oauth.expire_access_tokens(sandbox_state(), STORE, spec, refresh_refusal=refusal)


@control_route("/microsoft/tokens/revoke", methods=["POST"])
def control_microsoft_revoke_tokens() -> Response:
    """Revoke a refresh token, or every refresh token of a mailbox (as revokeSignInSessions does: access
    tokens already issued keep working until they expire), or one access token (Graph answers 401)."""
    spec = parse_body(TokenTargetIn)
    st = sandbox_state()
    with st.lock:
        data = _data(st)
        if spec.access_token:
            revoked = 1 if data.access.pop(spec.access_token, None) else 0
        elif spec.refresh_token:
            revoked = 1 if data.refresh.pop(spec.refresh_token, None) else 0
        else:
            address = (spec.address or "").lower()
            keys = [k for k, v in data.refresh.items() if v.address == address]
            for key in keys:
                del data.refresh[key]
            revoked = len(keys)
    if (spec.access_token or spec.refresh_token) and not revoked:
        raise ControlError("unknown_token", "token: no such token (or already revoked)", 404)
    return json_response({"revoked": revoked})


class NextGrantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(pattern=oauth.ADDRESS.pattern)
    scope: str = Field(min_length=1)


@control_route("/microsoft/next-grant", methods=["POST"])
def control_microsoft_next_grant() -> Response:
    """The next consent of `address` grants exactly `scope` (give the reserved openid, profile and
    offline_access too), whatever the app asked for: AAD's token response lists every permission the account
    consented to for the resource, so one consented earlier, or by an admin for the whole tenant (say
    Mail.ReadWrite, Mail.Send), comes along. The code exchange then answers with that scope set."""
    spec = parse_body(NextGrantIn)
    st = sandbox_state()
    with st.lock:
        _next_grants(st)[spec.address.lower()] = spec.scope
    return json_response({"address": spec.address.lower(), "scope": spec.scope}, 201)
