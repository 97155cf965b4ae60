"""Connecting and disconnecting Outlook through the pages, with MSAL and the sandbox's Microsoft consent page."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.test import Client

from accounts.models import User
from integrations.models import Integration, SyncCursor
from integrations.providers.outlook import graph_session
from integrations.services import integration_credentials
from sandbox.client import SandboxClient
from tests.conftest import approve_consent_page
from tests.integrations.test_connect import signed_out_callback_starts_again

pytestmark = pytest.mark.django_db

ADDRESS = "me@outlook.example.com"


def connect_through_pages(client: Client, decision: str = "accept") -> Any:
    start = client.post("/integrations/microsoft/connect")
    assert start.status_code == 302
    authorize_url = start["Location"]
    query = parse_qs(urlsplit(authorize_url).query)
    # The page a browser opens is the sandbox's plain listener (no certificate warning for a person);
    # MSAL itself reaches the token endpoint over TLS.
    assert authorize_url.startswith(f"{settings.SANDBOX_URL}/")
    assert set(query["scope"][0].split()) == {"Mail.Read", "User.Read", "offline_access", "openid", "profile"}
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    params = approve_consent_page(graph_session(), authorize_url, ADDRESS, decision)
    return client.get("/integrations/microsoft/callback", params, follow=True)


def test_connect_outlook_keeps_an_encrypted_token_cache_and_a_first_cursor(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    client.force_login(consenting_user)

    response = connect_through_pages(client)

    assert f"Outlook {ADDRESS} is connected" in response.content.decode()
    integration = Integration.objects.get(user=consenting_user)
    assert (integration.provider, integration.account_address, integration.status) == ("outlook", ADDRESS, "active")
    credentials = integration_credentials(integration=integration)
    assert "RefreshToken" in credentials["msal_cache"] and credentials["home_account_id"]
    assert "RefreshToken" not in integration.credentials_encrypted
    cursor = SyncCursor.objects.get(integration=integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION).value
    assert "/messages/delta" in cursor and "receivedDateTime" in cursor


def test_cancelling_on_the_microsoft_page_connects_nothing(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    client.force_login(consenting_user)
    response = connect_through_pages(client, decision="cancel")
    assert "access was not granted" in response.content.decode()
    assert not Integration.objects.exists()


def test_a_forged_outlook_callback_is_refused(client: Client, sandbox: SandboxClient, consenting_user: User) -> None:
    client.force_login(consenting_user)
    client.post("/integrations/microsoft/connect")
    response = client.get("/integrations/microsoft/callback", {"code": "stolen", "state": "not-ours"}, follow=True)
    assert "does not match your request" in response.content.decode()
    assert not Integration.objects.exists()


def test_an_outlook_callback_arriving_signed_out_asks_to_log_in_without_carrying_its_code_and_state(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    client.force_login(consenting_user)
    start = client.post("/integrations/microsoft/connect")
    params = approve_consent_page(graph_session(), start["Location"], ADDRESS, "accept")
    assert params["code"] and params["state"]

    signed_out_callback_starts_again(client, "/integrations/microsoft/callback", params, consenting_user)


def test_disconnecting_outlook_forgets_its_sign_in_and_says_how_to_remove_the_grant(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    client.force_login(consenting_user)
    connect_through_pages(client)
    integration = Integration.objects.get()

    response = client.post(f"/mailboxes/{integration.pk}/disconnect", follow=True)

    assert "account.microsoft.com" in response.content.decode()
    integration.refresh_from_db()
    assert (integration.status, integration.credentials_encrypted) == ("disconnected", "")
    assert not SyncCursor.objects.filter(integration=integration).exists()


def test_a_mailbox_needing_reconnection_says_so(client: Client, sandbox: SandboxClient, consenting_user: User) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    client.force_login(consenting_user)
    connect_through_pages(client)
    Integration.objects.update(status=Integration.Status.NEEDS_REAUTH)
    body = client.get("/mailboxes/").content.decode()
    assert "Needs reconnecting" in body
    integration = Integration.objects.get()
    assert f'id="reconnect-{integration.pk}"' in body  # the fix, as a button
