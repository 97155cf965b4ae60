"""Connecting and disconnecting Gmail through the pages, against the sandbox's OAuth consent screen."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
import requests
from django.test import Client

from accounts.models import User
from integrations.models import Integration, SyncCursor
from integrations.services import integration_credentials
from sandbox.client import SandboxClient
from tests.mail import ask

pytestmark = pytest.mark.django_db


def approve_on_sandbox(authorize_url: str, address: str, decision: str = "allow") -> dict[str, str]:
    """Drive the sandbox consent page like a person; returns the query of the redirect back to us."""
    http = requests.Session()
    http.trust_env = False
    page = http.get(authorize_url, timeout=5)
    assert page.status_code == 200
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    fields.update(address=address, decision=decision)
    answer = http.post(authorize_url.split("?")[0], data=fields, allow_redirects=False, timeout=5)
    assert answer.status_code in (302, 303)
    return {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["Location"]).query).items()}


def connect_through_pages(client: Client, address: str, decision: str = "allow") -> Any:
    start = client.post("/integrations/google/connect")
    assert start.status_code == 302
    authorize_url = start["Location"]
    query = parse_qs(urlsplit(authorize_url).query)
    assert query["scope"] == ["https://www.googleapis.com/auth/gmail.readonly"]
    assert query["access_type"] == ["offline"]
    assert query["code_challenge_method"] == ["S256"]
    params = approve_on_sandbox(authorize_url, address, decision)
    return client.get("/integrations/google/callback", params, follow=True)


def test_connect_gmail_stores_encrypted_tokens_and_starts_the_cursor_now(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox("me@example.com")
    old = sandbox.deliver("me@example.com", ask(1))  # recent mail: backfilled once
    client.force_login(consenting_user)

    response = connect_through_pages(client, "me@example.com")

    assert "Gmail me@example.com is connected" in response.content.decode()
    integration = Integration.objects.get(user=consenting_user)
    assert (integration.provider, integration.account_address, integration.status) == (
        "gmail",
        "me@example.com",
        "active",
    )
    credentials = integration_credentials(integration=integration)
    assert credentials["refresh_token"] and credentials["token"]
    assert credentials["token"] not in integration.credentials_encrypted
    assert credentials["refresh_token"] not in integration.credentials_encrypted
    cursor = SyncCursor.objects.get(integration=integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION)
    assert cursor.value == sandbox.call("GET", "/gmail/messages", params={"address": "me@example.com"})["historyId"]
    assert integration.backfill_pending == [old["id"]]


def test_the_backfill_is_bounded_by_the_settings(
    client: Client, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.MAIL_BACKFILL_MAX_MESSAGES = 2
    sandbox.create_mailbox("me@example.com")
    for n in range(4):
        sandbox.deliver("me@example.com", ask(n))
    client.force_login(consenting_user)
    connect_through_pages(client, "me@example.com")
    assert len(Integration.objects.get().backfill_pending) == 2


def test_denying_access_connects_nothing_and_says_so(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    response = connect_through_pages(client, "me@example.com", decision="deny")
    assert "access was not granted" in response.content.decode()
    assert not Integration.objects.exists()


def test_a_forged_callback_is_refused(client: Client, consenting_user: User, sandbox: SandboxClient) -> None:
    client.force_login(consenting_user)
    client.post("/integrations/google/connect")
    response = client.get("/integrations/google/callback", {"code": "stolen", "state": "not-ours"}, follow=True)
    assert "does not match your request" in response.content.decode()
    assert not Integration.objects.exists()


def test_a_callback_without_a_started_connect_is_a_message(client: Client, consenting_user: User) -> None:
    client.force_login(consenting_user)
    response = client.get("/integrations/google/callback", {"code": "x", "state": "y"}, follow=True)
    assert response.status_code == 200
    assert "expired" in response.content.decode()


def signed_out_callback_starts_again(client: Client, callback: str, params: dict[str, str], user: User) -> None:
    """A callback that arrives signed out (the session ended while the person was at the provider) sends them
    to log in with a `next` that carries nothing of the provider's answer, says to connect again, and after
    logging in lands on the Mailboxes page with nothing connected."""
    client.logout()
    answer = client.get(callback, params)

    assert answer.status_code == 302
    location = urlsplit(answer["Location"])
    assert location.path == "/login/" and parse_qs(location.query) == {"next": ["/mailboxes/"]}
    for name in ("code", "state", "session_state", "client_info"):
        if name in params:  # neither the value nor its URL-encoded form, anywhere in the redirect
            assert params[name] not in answer["Location"] and quote(params[name], safe="") not in answer["Location"]
    login_page = client.get(answer["Location"]).content.decode()
    assert "connect the mailbox again" in login_page

    after = client.post(
        answer["Location"], {"username": user.email, "password": "correct-horse-battery", "next": "/mailboxes/"}
    )
    assert after.status_code == 302 and after["Location"] == "/mailboxes/"
    assert not Integration.objects.exists()


def test_a_callback_arriving_signed_out_asks_to_log_in_without_carrying_its_code_and_state(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    start = client.post("/integrations/google/connect")
    params = approve_on_sandbox(start["Location"], "me@example.com")
    assert params["code"] and params["state"]

    signed_out_callback_starts_again(client, "/integrations/google/callback", params, consenting_user)


def test_disconnect_revokes_the_token_and_forgets_credentials_and_cursor(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    connect_through_pages(client, "me@example.com")
    integration = Integration.objects.get()
    sandbox.clear_requests()

    response = client.post(f"/mailboxes/{integration.pk}/disconnect", follow=True)

    assert "disconnected" in response.content.decode()
    integration.refresh_from_db()
    assert integration.status == "disconnected"
    assert integration.credentials_encrypted == ""
    assert not SyncCursor.objects.filter(integration=integration).exists()
    assert [r["path"] for r in sandbox.requests("google_oauth")] == ["/google/revoke"]


def test_someone_elses_mailbox_cannot_be_disconnected(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    from tests.factories import UserFactory

    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    connect_through_pages(client, "me@example.com")
    integration = Integration.objects.get()
    client.force_login(UserFactory())
    response = client.post(f"/mailboxes/{integration.pk}/disconnect", follow=True)
    assert "no such mailbox" in response.content.decode()
    integration.refresh_from_db()
    assert integration.status == "active"


def test_mailboxes_page_never_shows_tokens(client: Client, sandbox: SandboxClient, consenting_user: User) -> None:
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    connect_through_pages(client, "me@example.com")
    credentials = integration_credentials(integration=Integration.objects.get())
    body = client.get("/mailboxes/").content.decode()
    assert "me@example.com" in body
    assert credentials["token"] not in body and credentials["refresh_token"] not in body


def test_connecting_never_logs_tokens(client: Client, sandbox: SandboxClient, consenting_user: User, caplog) -> None:
    caplog.set_level("DEBUG")
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    connect_through_pages(client, "me@example.com")
    credentials = integration_credentials(integration=Integration.objects.get())
    assert credentials["token"] not in caplog.text
    assert credentials["refresh_token"] not in caplog.text


def test_an_error_answer_without_our_state_does_not_cancel_the_connect_in_progress(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox("me@example.com")
    client.force_login(consenting_user)
    start = client.post("/integrations/google/connect")
    params = approve_on_sandbox(start["Location"], "me@example.com")

    forged = client.get("/integrations/google/callback", {"error": "access_denied", "state": "not-ours"}, follow=True)
    assert "does not match your request" in forged.content.decode()

    response = client.get("/integrations/google/callback", params, follow=True)
    assert "is connected" in response.content.decode()
    assert Integration.objects.filter(account_address="me@example.com").exists()
