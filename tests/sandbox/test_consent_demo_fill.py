"""The sandbox's consent pages offer to fill the mailbox of any address with the demo mail (issue 23 point 11):
a newcomer who types their own address gets a mailbox with something to read instead of a silently empty one.
Filling is idempotent: a mailbox that holds mail already is left as it is."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
import requests
from django.conf import settings

from sandbox.client import SandboxClient
from sandbox.demo.messages import demo_mail

ADDRESS = "newcomer@example.org"
PKCE = "x" * 43


def session() -> requests.Session:
    http = requests.Session()
    http.trust_env = False
    return http


def google_url() -> str:
    query = {
        "client_id": settings.GOOGLE_CLIENT_ID,
        "redirect_uri": "http://tasklift.test/integrations/google/callback",
        "response_type": "code",
        "scope": "https://www.googleapis.com/auth/gmail.readonly",
        "state": "s1",
        "code_challenge": PKCE,
        "code_challenge_method": "S256",
        "access_type": "offline",
    }
    return f"{settings.SANDBOX_URL}/google/o/oauth2/auth?{urlencode(query)}"


def microsoft_url() -> str:
    query = {
        "client_id": settings.MICROSOFT_CLIENT_ID,
        "redirect_uri": "http://tasklift.test/integrations/microsoft/callback",
        "response_type": "code",
        "scope": "Mail.Read User.Read offline_access openid profile",
        "state": "s1",
        "code_challenge": PKCE,
        "code_challenge_method": "S256",
        "nonce": "n1",
        "response_mode": "query",
    }
    return f"{settings.SANDBOX_URL}/{settings.MICROSOFT_TENANT}/oauth2/v2.0/authorize?{urlencode(query)}"


def hidden_fields(page: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))


def gmail_count(sandbox: SandboxClient) -> int:
    listed = sandbox.call("GET", "/gmail/messages", params={"address": ADDRESS})
    return len(listed["messages"])


@pytest.mark.parametrize("provider", ["gmail", "outlook"])
def test_the_consent_page_fills_any_address_with_the_demo_mail_once(sandbox: SandboxClient, provider: str) -> None:
    http = session()
    url = google_url() if provider == "gmail" else microsoft_url()
    page = http.get(url, timeout=10)
    assert page.status_code == 200
    assert re.search(r'<button type="submit" name="decision" value="fill_demo"[^>]*>Fill this mailbox', page.text)
    action = re.search(r'<form method="post" action="([^"]+)"', page.text)[1]  # type: ignore[index]
    fields = {**hidden_fields(page.text), "address": ADDRESS.upper(), "decision": "fill_demo"}

    filled = http.post(f"{settings.SANDBOX_URL}{action}", data=fields, allow_redirects=False, timeout=10)

    assert filled.status_code == 200, filled.text  # the consent page again, to allow or deny
    expected = len(demo_mail(datetime.now(UTC)))  # the inbox and the Sent mail
    assert f"{ADDRESS} now holds the {expected} demo emails" in filled.text
    assert f'value="{ADDRESS}"' in filled.text  # the address stays typed in
    assert hidden_fields(filled.text) == hidden_fields(page.text)  # the same authorization request

    again = http.post(f"{settings.SANDBOX_URL}{action}", data=fields, allow_redirects=False, timeout=10)
    assert "already holds mail" in again.text
    if provider == "gmail":
        assert gmail_count(sandbox) == expected
    else:
        listed = sandbox.call("GET", "/graph/messages", params={"address": ADDRESS})
        assert len(listed["messages"]) == expected
