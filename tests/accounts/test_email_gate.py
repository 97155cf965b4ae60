"""No mailbox is connected to an account whose email address is not confirmed; such an account is asked to
confirm it on every page."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from integrations.models import Integration
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

REFUSAL = "Confirm your email address before connecting a mailbox"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/integrations/google/connect"),
        ("get", "/integrations/google/callback?state=s&code=c"),
        ("post", "/integrations/microsoft/connect"),
        ("get", "/integrations/microsoft/callback?state=s&code=c"),
    ],
)
def test_an_unconfirmed_account_cannot_connect_a_mailbox(client: Client, method: str, path: str) -> None:
    user: User = UserFactory(email_verified_at=None)
    client.force_login(user)

    response = getattr(client, method)(path, follow=True)

    assert response.redirect_chain == [("/mailboxes/", 302)]
    assert REFUSAL in response.content.decode()
    assert f"open the link we emailed to {user.email}" in response.content.decode()
    assert not Integration.objects.exists()


def test_a_confirmed_account_goes_on_to_the_provider(client: Client) -> None:
    client.force_login(UserFactory())

    response = client.post("/integrations/google/connect")

    assert response.status_code == 302
    assert "/google/o/oauth2/auth?" in response["Location"]


def test_an_unconfirmed_account_sees_a_banner_that_sends_the_link_again(client: Client, mailoutbox) -> None:
    user: User = UserFactory(email_verified_at=None)
    client.force_login(user)

    page = client.get("/").content.decode()

    assert 'id="verify-banner"' in page
    assert f"open the link we emailed to {user.email}" in page
    assert client.post("/signup/resend/", {"email": user.email}).status_code == 302
    [message] = mailoutbox
    assert "/signup/confirm/" in message.body
    # and the link, opened in the signed-in browser, confirms without asking for the password
    link = "/signup/confirm/" + message.body.split("/signup/confirm/", 1)[1].split()[0]
    assert client.get(link)["Location"] == "/"
    user.refresh_from_db()
    assert user.email_verified
    assert 'id="verify-banner"' not in client.get("/").content.decode()


def test_a_confirmed_account_sees_no_banner(client: Client) -> None:
    client.force_login(UserFactory())
    assert 'id="verify-banner"' not in client.get("/").content.decode()
