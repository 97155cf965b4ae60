"""The sandbox's Google OAuth works with the real google-auth-oauthlib Flow and google-auth refresh."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.conf import settings
from google.auth.exceptions import RefreshError
from google.auth.transport.requests import Request
from google.oauth2.credentials import Credentials
from google_auth_oauthlib.flow import Flow
from oauthlib.oauth2.rfc6749.errors import OAuth2Error

from sandbox.client import SandboxClient

ADDRESS = "ada@example.com"
SCOPE = "https://www.googleapis.com/auth/gmail.readonly"
REDIRECT_URI = "http://tasklift.test/integrations/google/callback"


class _Form(HTMLParser):
    """The consent form's action and fields."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.fields: dict[str, str] = {}
        self.buttons: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action = values.get("action", "")
        elif tag == "input" and values.get("name"):
            self.fields[values["name"]] = values.get("value", "")
        elif tag == "button":
            self.buttons.append(values.get("value", ""))


def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    return session


def make_flow() -> Flow:
    config = {
        "web": {
            "client_id": settings.GOOGLE_CLIENT_ID,
            "client_secret": settings.GOOGLE_CLIENT_SECRET,
            "auth_uri": settings.GOOGLE_AUTH_URI,
            "token_uri": settings.GOOGLE_TOKEN_URI,
        }
    }
    return Flow.from_client_config(config, scopes=[SCOPE], redirect_uri=REDIRECT_URI)


def consent_page(url: str) -> _Form:
    page = http().get(url, timeout=5)
    assert page.status_code == 200, page.text
    form = _Form()
    form.feed(page.text)
    return form


def answer_consent(url: str, decision: str = "allow", address: str | None = None) -> dict[str, str]:
    """Drive the consent page like a person would; the query of the redirect back to the app."""
    form = consent_page(url)
    fields = {**form.fields, "decision": decision}
    if address is not None:
        fields["address"] = address
    action = f"{settings.SANDBOX_URL}{form.action}"
    response = http().post(action, data=fields, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    location = response.headers["Location"]
    assert location.startswith(REDIRECT_URI)
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def gmail_profile(access_token: str | None) -> requests.Response:
    return http().get(
        f"{settings.GMAIL_API_ENDPOINT}/gmail/v1/users/me/profile",
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=5,
    )


def connect(sandbox: SandboxClient) -> Credentials:
    sandbox.create_mailbox(ADDRESS)
    flow = make_flow()
    url, state = flow.authorization_url(prompt="consent", login_hint=ADDRESS)
    answer = answer_consent(url)
    assert answer["state"] == state
    flow.fetch_token(code=answer["code"])
    credentials: Credentials = flow.credentials
    return credentials


def test_consent_and_code_exchange_give_credentials_that_open_the_mailbox(sandbox: SandboxClient) -> None:
    credentials = connect(sandbox)

    assert credentials.token and credentials.refresh_token and credentials.expiry
    assert credentials.token_uri == settings.GOOGLE_TOKEN_URI
    profile = gmail_profile(credentials.token)
    assert profile.status_code == 200
    assert profile.json()["emailAddress"] == ADDRESS


def test_code_exchange_sends_pkce_and_client_auth_the_way_google_expects(sandbox: SandboxClient) -> None:
    connect(sandbox)

    token_calls = [r for r in sandbox.requests("google_oauth") if r["path"] == "/google/token"]
    assert len(token_calls) == 1
    body = parse_qs(token_calls[0]["body"])
    assert body["grant_type"] == ["authorization_code"]
    assert len(body["code_verifier"][0]) == 128


def test_refresh_gives_a_new_working_access_token(sandbox: SandboxClient) -> None:
    credentials = connect(sandbox)
    old_token = credentials.token

    credentials.refresh(Request())

    assert credentials.token != old_token
    assert gmail_profile(credentials.token).status_code == 200


def test_revoked_refresh_token_cannot_refresh_and_its_access_token_stops_working(sandbox: SandboxClient) -> None:
    credentials = connect(sandbox)

    revoked = http().post(f"{settings.GOOGLE_REVOKE_URI}?{urlencode({'token': credentials.refresh_token})}")
    assert revoked.status_code == 200

    assert gmail_profile(credentials.token).status_code == 401
    with pytest.raises(RefreshError, match="invalid_grant"):
        credentials.refresh(Request())


def test_tokens_issued_through_the_control_api_refresh_until_revoked(sandbox: SandboxClient) -> None:
    tokens = sandbox.issue_token(ADDRESS)
    credentials = Credentials(
        token=tokens["access_token"],
        refresh_token=tokens["refresh_token"],
        token_uri=settings.GOOGLE_TOKEN_URI,
        client_id=settings.GOOGLE_CLIENT_ID,
        client_secret=settings.GOOGLE_CLIENT_SECRET,
        scopes=[SCOPE],
    )
    credentials.refresh(Request())
    assert gmail_profile(credentials.token).status_code == 200

    sandbox.revoke(refresh_token=tokens["refresh_token"])

    with pytest.raises(RefreshError) as caught:
        credentials.refresh(Request())
    assert caught.value.retryable is False


def test_expired_access_token_is_refused(sandbox: SandboxClient) -> None:
    tokens = sandbox.issue_token(ADDRESS)
    assert gmail_profile(tokens["access_token"]).status_code == 200

    sandbox.expire_token(access_token=tokens["access_token"])

    assert gmail_profile(tokens["access_token"]).status_code == 401


def test_a_code_verifier_that_does_not_match_the_challenge_is_refused(sandbox: SandboxClient) -> None:
    flow = make_flow()
    url, _ = flow.authorization_url(prompt="consent", login_hint=ADDRESS)
    answer = answer_consent(url)
    flow.code_verifier = "x" * 64

    with pytest.raises(OAuth2Error, match="code verifier"):
        flow.fetch_token(code=answer["code"])


def test_a_code_works_only_once(sandbox: SandboxClient) -> None:
    flow = make_flow()
    url, _ = flow.authorization_url(login_hint=ADDRESS)
    answer = answer_consent(url)
    flow.fetch_token(code=answer["code"])

    with pytest.raises(OAuth2Error):
        flow.fetch_token(code=answer["code"])


def test_deny_sends_access_denied_back_to_the_app(sandbox: SandboxClient) -> None:
    flow = make_flow()
    url, state = flow.authorization_url(login_hint=ADDRESS)

    answer = answer_consent(url, decision="deny")

    assert answer == {"error": "access_denied", "state": state}


def test_consent_page_offers_the_first_sandbox_mailbox_without_a_login_hint(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox("first@example.com")
    sandbox.create_mailbox("second@example.com")
    url, _ = make_flow().authorization_url()

    form = consent_page(url)

    assert form.fields["address"] == "first@example.com"
    assert set(form.buttons) == {"allow", "deny", "fill_demo"}  # and "Fill this mailbox with the demo mail"


def test_a_wrong_client_secret_is_invalid_client(sandbox: SandboxClient) -> None:
    response = http().post(
        settings.GOOGLE_TOKEN_URI,
        data={"grant_type": "refresh_token", "refresh_token": "x"},
        auth=(settings.GOOGLE_CLIENT_ID, "wrong"),
        timeout=5,
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_an_unknown_refresh_token_is_google_s_invalid_grant(sandbox: SandboxClient) -> None:
    response = http().post(
        settings.GOOGLE_TOKEN_URI,
        data={
            "grant_type": "refresh_token",
            "refresh_token": "1//nope",
            "client_id": settings.GOOGLE_CLIENT_ID,
            "client_secret": settings.GOOGLE_CLIENT_SECRET,
        },
        timeout=5,
    )
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"client_id": None}, "client_id"),
        ({"client_id": "someone-else"}, "invalid_client"),
        ({"redirect_uri": "not-a-url"}, "redirect_uri"),
        ({"response_type": "token"}, "response_type"),
        ({"scope": "https://www.googleapis.com/auth/drive"}, "invalid_scope"),
        ({"state": None}, "state"),
        ({"code_challenge": None}, "code_challenge"),
        ({"code_challenge_method": "plain"}, "code_challenge_method"),
        ({"access_type": "forever"}, "access_type"),
    ],
)
def test_bad_authorize_parameters_get_a_400_page_naming_the_problem(
    sandbox: SandboxClient, change: dict[str, str | None], problem: str
) -> None:
    url, _ = make_flow().authorization_url(access_type="offline")
    params = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    for key, value in change.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value

    response = http().get(settings.GOOGLE_AUTH_URI, params=params, timeout=5)

    assert response.status_code == 400
    assert problem in response.text
