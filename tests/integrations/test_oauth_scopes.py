"""A grant is kept only when its scopes are exactly the ones Tasklift asks for.

The sandbox's consent pages grant another scope set on request (`/_sandbox/<provider>/next-grant`): Google's
granular consent lets a person untick a permission and adds scopes granted earlier; Microsoft lists every
permission the account consented to for Graph, so Mail.ReadWrite consented earlier comes along with ours.
"""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
from django.test import Client

from accounts.models import User
from integrations.models import Integration
from sandbox.client import SandboxClient, SandboxControlError
from tests.integrations.test_connect import connect_through_pages as connect_gmail_through_pages
from tests.integrations.test_connect_outlook import ADDRESS as OUTLOOK_ADDRESS
from tests.integrations.test_connect_outlook import connect_through_pages as connect_outlook_through_pages

pytestmark = pytest.mark.django_db

GMAIL_ADDRESS = "me@example.com"
READONLY = "https://www.googleapis.com/auth/gmail.readonly"
MODIFY = "https://www.googleapis.com/auth/gmail.modify"
SIGN_IN = "openid profile offline_access"


def _next_grant(sandbox: SandboxClient, provider: str, address: str, scope: str) -> None:
    sandbox.call("POST", f"/{provider}/next-grant", json={"address": address, "scope": scope})


def _messages(response) -> str:
    return response.content.decode()


def _revoked_tokens(sandbox: SandboxClient) -> list[str]:
    """The tokens Tasklift sent to Google's revocation endpoint."""
    return [
        parse_qs(entry["body"])["token"][0]
        for entry in sandbox.requests("google_oauth")
        if entry["method"] == "POST" and entry["path"] == "/google/revoke"
    ]


def _assert_revoked_at_google(sandbox: SandboxClient, token: str) -> None:
    with pytest.raises(SandboxControlError) as unknown:
        sandbox.call("POST", "/google/tokens/revoke", json={"refresh_token": token})
    assert unknown.value.status == 404  # Google no longer knows it: the grant is gone


# Google ------------------------------------------------------------------------------------------------


def test_a_google_grant_with_more_scopes_is_refused_and_revoked_at_google(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox(GMAIL_ADDRESS)
    _next_grant(sandbox, "google", GMAIL_ADDRESS, f"{READONLY} {MODIFY}")
    client.force_login(consenting_user)

    page = _messages(connect_gmail_through_pages(client, GMAIL_ADDRESS))

    assert "Gmail was not connected: Google granted Tasklift gmail.modify, gmail.readonly instead of" in page
    assert "read-only access to Gmail (gmail.readonly)" in page
    assert "gave that access back to Google" in page
    assert not Integration.objects.exists()
    [revoked] = _revoked_tokens(sandbox)
    assert revoked.startswith("1//")  # the refresh token: it revokes the whole grant
    _assert_revoked_at_google(sandbox, revoked)


def test_a_google_grant_with_another_scope_than_ours_is_refused(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox(GMAIL_ADDRESS)
    _next_grant(sandbox, "google", GMAIL_ADDRESS, "https://www.googleapis.com/auth/gmail.metadata")
    client.force_login(consenting_user)

    page = _messages(connect_gmail_through_pages(client, GMAIL_ADDRESS))

    assert "Google granted Tasklift gmail.metadata instead of the one permission it asks for" in page
    assert not Integration.objects.exists()
    assert len(_revoked_tokens(sandbox)) == 1


def test_a_changed_google_grant_is_refused_even_when_oauthlib_is_told_to_relax(
    client: Client, sandbox: SandboxClient, consenting_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With OAUTHLIB_RELAX_TOKEN_SCOPE oauthlib no longer raises; Tasklift's own check still refuses."""
    monkeypatch.setenv("OAUTHLIB_RELAX_TOKEN_SCOPE", "1")
    sandbox.create_mailbox(GMAIL_ADDRESS)
    _next_grant(sandbox, "google", GMAIL_ADDRESS, f"{READONLY} {MODIFY}")
    client.force_login(consenting_user)

    page = _messages(connect_gmail_through_pages(client, GMAIL_ADDRESS))

    assert "Google granted Tasklift gmail.modify, gmail.readonly instead of" in page
    assert not Integration.objects.exists()
    [revoked] = _revoked_tokens(sandbox)
    _assert_revoked_at_google(sandbox, revoked)


def test_a_refused_google_grant_that_cannot_be_revoked_says_where_to_remove_it(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox(GMAIL_ADDRESS)
    _next_grant(sandbox, "google", GMAIL_ADDRESS, f"{READONLY} {MODIFY}")
    sandbox.fault("google_oauth", 503, route="/google/revoke")
    client.force_login(consenting_user)

    page = _messages(connect_gmail_through_pages(client, GMAIL_ADDRESS))

    assert "could not give that access back to Google just now" in page
    assert "myaccount.google.com/permissions" in page
    assert not Integration.objects.exists()


def test_a_google_grant_of_exactly_our_scope_connects(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_mailbox(GMAIL_ADDRESS)
    _next_grant(sandbox, "google", GMAIL_ADDRESS, READONLY)
    client.force_login(consenting_user)

    page = _messages(connect_gmail_through_pages(client, GMAIL_ADDRESS))

    assert f"Gmail {GMAIL_ADDRESS} is connected" in page
    assert _revoked_tokens(sandbox) == []


# Microsoft ---------------------------------------------------------------------------------------------


def test_a_microsoft_grant_that_can_also_write_and_send_mail_is_refused(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(OUTLOOK_ADDRESS)
    _next_grant(sandbox, "microsoft", OUTLOOK_ADDRESS, f"Mail.Read Mail.ReadWrite Mail.Send User.Read {SIGN_IN}")
    client.force_login(consenting_user)

    page = _messages(connect_outlook_through_pages(client))

    assert (
        "Outlook was not connected: Microsoft granted Tasklift more than it asks for (Mail.ReadWrite, Mail.Send)"
        in page
    )
    assert "Tasklift only reads mail (Mail.Read, User.Read), so it refused the sign-in and kept nothing" in page
    assert "account.microsoft.com" in page
    assert not Integration.objects.exists()


def test_a_microsoft_grant_missing_one_of_our_permissions_is_refused(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(OUTLOOK_ADDRESS)
    _next_grant(sandbox, "microsoft", OUTLOOK_ADDRESS, f"Mail.Read {SIGN_IN}")
    client.force_login(consenting_user)

    page = _messages(connect_outlook_through_pages(client))

    assert "Tasklift needs Mail.Read, User.Read, and Microsoft did not grant User.Read" in page
    assert not Integration.objects.exists()


def test_microsoft_sign_in_scopes_and_full_graph_names_are_not_extra_permissions(
    client: Client, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.create_outlook_mailbox(OUTLOOK_ADDRESS)
    graph = "https://graph.microsoft.com"
    _next_grant(sandbox, "microsoft", OUTLOOK_ADDRESS, f"{graph}/Mail.Read {graph}/User.Read {SIGN_IN} email")
    client.force_login(consenting_user)

    page = _messages(connect_outlook_through_pages(client))

    assert f"Outlook {OUTLOOK_ADDRESS} is connected" in page
    assert Integration.objects.get().provider == "outlook"


def test_the_sandbox_grants_only_scopes_google_knows(sandbox: SandboxClient) -> None:
    with pytest.raises(SandboxControlError) as refused:
        _next_grant(sandbox, "google", GMAIL_ADDRESS, "https://www.googleapis.com/auth/drive")
    assert refused.value.status == 400 and "unknown scopes" in refused.value.body
