"""The sandbox's Microsoft identity endpoints answer MSAL Python the way Azure AD does (reference §C), over
TLS with a certificate the client really verifies."""

from __future__ import annotations

import html
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msal
import pytest
import requests
from django.conf import settings

from sandbox.client import SandboxClient

# msal 1.39 recommends form_post on every initiate_auth_code_flow without it; the query mode is what we test.
pytestmark = pytest.mark.filterwarnings("ignore:response_mode='form_post' is recommended:UserWarning")

ADDRESS = "ada.lovelace@example.com"
REDIRECT_URI = "http://localhost:8000/integrations/outlook/callback"
SCOPES = ["Mail.Read", "User.Read"]


def trusted_session() -> requests.Session:
    """What reference §0 says works: the environment's CA bundle would override Session.verify."""
    session = requests.Session()
    session.trust_env = False
    session.verify = settings.MICROSOFT_CA_BUNDLE
    return session


def msal_app(session: requests.Session | None = None, **options: Any) -> msal.ConfidentialClientApplication:
    return msal.ConfidentialClientApplication(
        settings.MICROSOFT_CLIENT_ID,
        client_credential=settings.MICROSOFT_CLIENT_SECRET,
        authority=settings.MICROSOFT_AUTHORITY,
        http_client=session or trusted_session(),
        instance_discovery=False,
        **options,
    )


def consent(session: requests.Session, auth_uri: str, *, address: str = ADDRESS, decision: str = "accept") -> dict:
    """Drive the consent page as a browser would: load it, submit its form, follow nothing."""
    page = session.get(auth_uri, timeout=10)
    assert page.status_code == 200, page.text
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.text).group(1))  # type: ignore[union-attr]
    fields = {
        html.unescape(name): html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
    }
    fields.update({"address": address, "decision": decision})
    base = "{0.scheme}://{0.netloc}".format(urlsplit(auth_uri))
    answer = session.post(base + action, data=fields, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    location = answer.headers["Location"]
    assert location.startswith(REDIRECT_URI)
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def sign_in(app: msal.ConfidentialClientApplication, session: requests.Session) -> dict[str, Any]:
    flow = app.initiate_auth_code_flow(scopes=SCOPES, redirect_uri=REDIRECT_URI)
    result: dict[str, Any] = app.acquire_token_by_auth_code_flow(flow, consent(session, flow["auth_uri"]))
    return result


@pytest.fixture(autouse=True)
def _sandbox(sandbox: SandboxClient) -> None:
    """Every test here starts from an empty sandbox."""


def test_auth_code_flow_gives_tokens_an_account_and_a_nonce_checked_id_token() -> None:
    session = trusted_session()
    app = msal_app(session)

    result = sign_in(app, session)

    assert "error" not in result, result
    assert result["token_type"] == "Bearer"
    assert result["access_token"] and result["refresh_token"]
    claims = result["id_token_claims"]
    assert claims["preferred_username"] == ADDRESS
    assert claims["aud"] == settings.MICROSOFT_CLIENT_ID
    assert claims["iat"] <= time.time() < claims["exp"]  # real time, not a fixed clock
    (account,) = app.get_accounts()
    assert account["username"] == ADDRESS
    assert account["home_account_id"] == f"{claims['oid']}.{claims['tid']}"  # from client_info


def test_the_authorize_request_carries_pkce_and_a_nonce_that_the_id_token_echoes(sandbox: SandboxClient) -> None:
    session = trusted_session()
    app = msal_app(session)
    flow = app.initiate_auth_code_flow(scopes=SCOPES, redirect_uri=REDIRECT_URI)
    query = {k: v[0] for k, v in parse_qs(urlsplit(flow["auth_uri"]).query).items()}

    result = app.acquire_token_by_auth_code_flow(flow, consent(session, flow["auth_uri"]))

    assert query["code_challenge_method"] == "S256"
    assert result["id_token_claims"]["nonce"] == query["nonce"]
    token_call = [r for r in sandbox.requests("microsoft") if r["path"].endswith("/oauth2/v2.0/token")][-1]
    form = parse_qs(token_call["body"])
    assert form["grant_type"] == ["authorization_code"] and form["code_verifier"]
    assert set(form["scope"][0].split()) >= {"Mail.Read", "User.Read", "offline_access", "openid", "profile"}


def test_silent_refresh_gets_a_new_access_token() -> None:
    session = trusted_session()
    app = msal_app(session)
    first = sign_in(app, session)
    (account,) = app.get_accounts()

    cached = app.acquire_token_silent(SCOPES, account=account)
    refreshed = app.acquire_token_silent(SCOPES, account=account, force_refresh=True)

    assert cached is not None and cached["access_token"] == first["access_token"]
    assert refreshed is not None and refreshed["token_source"] == "identity_provider"
    assert refreshed["access_token"] != first["access_token"]


def test_a_revoked_refresh_token_gets_invalid_grant(sandbox: SandboxClient) -> None:
    session = trusted_session()
    app = msal_app(session)
    sign_in(app, session)
    (account,) = app.get_accounts()
    assert sandbox.revoke_microsoft(address=ADDRESS) == 1

    assert app.acquire_token_silent(SCOPES, account=account, force_refresh=True) is None
    # MSAL serves an identical failed request from its cache for 60 s: ask through a fresh app with the
    # same token cache to see the error itself.
    fresh = msal_app(token_cache=app.token_cache)
    error = fresh.acquire_token_silent_with_error(SCOPES, account=fresh.get_accounts()[0], force_refresh=True)

    assert error is not None and error["error"] == "invalid_grant"
    assert error["error_codes"] == [70000]
    assert error["error_description"].startswith("AADSTS70000:")


def test_a_code_is_single_use_and_bound_to_its_verifier_and_redirect_uri() -> None:
    session = trusted_session()
    app = msal_app(session)
    flow = app.initiate_auth_code_flow(scopes=SCOPES, redirect_uri=REDIRECT_URI)
    answer = consent(session, flow["auth_uri"])
    token_url = f"{settings.MICROSOFT_AUTHORITY}/oauth2/v2.0/token"
    form = {
        "client_id": settings.MICROSOFT_CLIENT_ID,
        "client_secret": settings.MICROSOFT_CLIENT_SECRET,
        "grant_type": "authorization_code",
        "code": answer["code"],
        "redirect_uri": REDIRECT_URI,
        "code_verifier": "x" * 43,
    }

    wrong_verifier = session.post(token_url, data=form, timeout=10)
    replay = session.post(token_url, data={**form, "code_verifier": flow["code_verifier"]}, timeout=10)

    assert wrong_verifier.status_code == 400 and wrong_verifier.json()["error"] == "invalid_grant"
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"  # the code was used up


def test_a_wrong_client_secret_is_refused_with_invalid_client() -> None:
    session = trusted_session()
    answer = session.post(
        f"{settings.MICROSOFT_AUTHORITY}/oauth2/v2.0/token",
        data={
            "client_id": settings.MICROSOFT_CLIENT_ID,
            "client_secret": "wrong",
            "grant_type": "refresh_token",
            "refresh_token": "x",
        },
        timeout=10,
    )
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_client"


def test_cancel_on_the_consent_page_redirects_with_access_denied() -> None:
    session = trusted_session()
    app = msal_app(session)
    flow = app.initiate_auth_code_flow(scopes=SCOPES, redirect_uri=REDIRECT_URI)

    answer = consent(session, flow["auth_uri"], decision="cancel")
    result = app.acquire_token_by_auth_code_flow(flow, answer)

    assert answer["error"] == "access_denied" and answer["state"] == flow["state"]
    assert result["error"] == "access_denied"


def test_discovery_sends_the_browser_to_http_and_msal_to_https() -> None:
    """The consent page is the one a person's browser opens, and no browser trusts the certificate the sandbox
    generates, so it is on the plain-http listener; every endpoint MSAL calls itself stays on TLS."""
    config = trusted_session().get(f"{settings.MICROSOFT_AUTHORITY}/v2.0/.well-known/openid-configuration").json()

    assert settings.SANDBOX_URL.startswith("http://") and settings.SANDBOX_TLS_URL.startswith("https://")
    tenant = settings.MICROSOFT_TENANT
    assert config["authorization_endpoint"] == f"{settings.SANDBOX_URL}/{tenant}/oauth2/v2.0/authorize"
    assert config["token_endpoint"] == f"{settings.MICROSOFT_AUTHORITY}/oauth2/v2.0/token"
    assert config["token_endpoint"].startswith(f"{settings.SANDBOX_TLS_URL}/")
    assert config["issuer"].startswith(f"{settings.SANDBOX_TLS_URL}/")


def test_msal_sends_the_person_to_the_http_consent_page_and_redeems_the_code_over_tls() -> None:
    msal_calls: list[str] = []
    session = trusted_session()
    session.hooks["response"].append(lambda response, *args, **kwargs: msal_calls.append(response.url))
    app = msal_app(session)
    flow = app.initiate_auth_code_flow(scopes=SCOPES, redirect_uri=REDIRECT_URI)
    assert flow["auth_uri"].startswith(f"{settings.SANDBOX_URL}/{settings.MICROSOFT_TENANT}/oauth2/v2.0/authorize?")

    # A browser that trusts no certificate of ours: the consent page and its form are plain http.
    browser = requests.Session()
    browser.trust_env = False
    result = app.acquire_token_by_auth_code_flow(flow, consent(browser, flow["auth_uri"]))

    assert "error" not in result, result
    assert result["id_token_claims"]["preferred_username"] == ADDRESS
    assert f"{settings.MICROSOFT_AUTHORITY}/oauth2/v2.0/token" in msal_calls
    assert all(url.startswith(f"{settings.SANDBOX_TLS_URL}/") for url in msal_calls), msal_calls


def test_msal_refuses_a_plain_http_authority() -> None:
    http_authority = settings.MICROSOFT_AUTHORITY.replace("https://", "http://", 1)
    with pytest.raises(ValueError, match="https"):
        msal.ConfidentialClientApplication(
            settings.MICROSOFT_CLIENT_ID,
            client_credential=settings.MICROSOFT_CLIENT_SECRET,
            authority=http_authority,
            http_client=trusted_session(),
            instance_discovery=False,
        )


def test_the_certificate_is_really_verified() -> None:
    """Without the sandbox's certificate as trust anchor the TLS handshake fails: nothing skips verification."""
    untrusting = requests.Session()
    untrusting.trust_env = False  # the system bundle (requests' default) does not hold the sandbox's certificate

    with pytest.raises(requests.exceptions.SSLError):
        untrusting.get(f"{settings.MICROSOFT_AUTHORITY}/v2.0/.well-known/openid-configuration", timeout=10)
    with pytest.raises(requests.exceptions.ConnectionError):
        msal_app(untrusting)
