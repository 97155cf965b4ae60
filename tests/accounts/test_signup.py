"""Sign-up answers the same whether or not the address has an account, is rate-limited, and an account is usable
only once its owner opened the confirmation link sent to its address."""

from __future__ import annotations

import re
import time
from unittest import mock
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.test import Client

from accounts.models import User
from accounts.verification import verification_link_make
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-9"
LINK = re.compile(r"https?://[^/\s]+(/signup/confirm/[^/\s]+/)")


def sign_up(client: Client, email: str, *, password: str = PASSWORD, **meta: str):
    data = {"email": email, "name": "New", "password1": password, "password2": password}
    return client.post("/signup/", data, **meta)  # type: ignore[arg-type]


def confirmation_link(message: mail.EmailMessage) -> str:
    """The path of the confirmation link in an email."""
    found = LINK.search(str(message.body))
    assert found, message.body
    return found[1]


def without_csrf(page: str) -> str:
    """A page with its CSRF tokens (random on every answer) blanked out."""
    return re.sub(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+', r"\1", page)


def link_path(user: User) -> str:
    return urlsplit(verification_link_make(user=user)).path


def test_signup_makes_an_unconfirmed_account_and_emails_it_a_link(client: Client, mailoutbox, settings) -> None:
    settings.SITE_URL = "https://tasklift.example.com"
    response = sign_up(client, "New@Example.com")

    assert response.status_code == 302
    assert response["Location"] == "/signup/check-your-inbox/"
    user = User.objects.get()
    assert user.email == "new@example.com"
    assert user.email_verified_at is None
    assert "_auth_user_id" not in client.session  # not logged in before confirming
    [message] = mailoutbox
    assert message.to == ["new@example.com"]
    assert message.subject == "Confirm your email address for Tasklift"
    assert "https://tasklift.example.com/signup/confirm/" in message.body  # SITE_URL, never the request's Host
    page = client.get(response["Location"]).content.decode()
    assert "Check your inbox" in page and "new@example.com" in page


def test_a_taken_address_gets_exactly_the_answer_of_a_new_one(mailoutbox) -> None:
    owner: User = UserFactory(email="taken@example.com", name="Owner")
    old_password = owner.password

    new, taken = Client(), Client()
    answers = [sign_up(new, "fresh@example.com"), sign_up(taken, "taken@example.com")]
    pages = [without_csrf(c.get("/signup/check-your-inbox/").content.decode()) for c in (new, taken)]

    assert [a.status_code for a in answers] == [302, 302]
    assert answers[0]["Location"] == answers[1]["Location"]
    assert answers[0].content == answers[1].content
    assert pages[0].replace("fresh@example.com", "ADDRESS") == pages[1].replace("taken@example.com", "ADDRESS")
    # The existing account is untouched, and its owner is told how to log in instead.
    owner.refresh_from_db()
    assert (owner.password, owner.name) == (old_password, "Owner")
    assert User.objects.filter(email="taken@example.com").count() == 1
    assert [m.to for m in mailoutbox] == [["fresh@example.com"], ["taken@example.com"]]
    told = mailoutbox[1]
    assert told.subject == "Someone tried to sign up to Tasklift with your email address"
    assert "/login/" in told.body and "/password-reset/" in told.body
    assert not LINK.search(told.body)  # no confirmation link: nothing was created


def test_the_address_case_does_not_make_a_second_account(client: Client, mailoutbox) -> None:
    UserFactory(email="taken@example.com")
    assert sign_up(client, "TAKEN@example.com").status_code == 302
    assert User.objects.count() == 1


def test_an_unconfirmed_account_cannot_log_in_and_is_told_like_a_wrong_password(client: Client, mailoutbox) -> None:
    sign_up(Client(), "new@example.com")
    UserFactory(email="other@example.com")

    unconfirmed = client.post("/login/", {"username": "new@example.com", "password": PASSWORD})
    wrong = client.post("/login/", {"username": "other@example.com", "password": "not-the-password"})

    assert unconfirmed.status_code == wrong.status_code == 400
    error = "Please enter a correct email address and password"
    assert error in unconfirmed.content.decode() and error in wrong.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_link_opened_in_the_browser_that_signed_up_confirms_and_logs_in(client: Client, mailoutbox) -> None:
    sign_up(client, "new@example.com")

    response = client.get(confirmation_link(mailoutbox[0]), follow=True)

    user = User.objects.get()
    assert user.email_verified_at is not None
    assert client.session["_auth_user_id"] == str(user.pk)
    assert response.redirect_chain[-1][0] == "/"
    assert "new@example.com is confirmed" in response.content.decode()
    assert 'id="verify-banner"' not in response.content.decode()
    # the account now logs in with its password too
    other = Client()
    assert other.post("/login/", {"username": "new@example.com", "password": PASSWORD}).status_code == 302


def test_the_link_opened_elsewhere_asks_for_the_password(client: Client, mailoutbox) -> None:
    """Someone who signs up with another person's address knows the password; that person, clicking the link,
    does not: the account must not become usable by the first one through the second one's click."""
    sign_up(Client(), "new@example.com")
    link = confirmation_link(mailoutbox[0])

    page = client.get(link)
    assert page.status_code == 200
    assert "enter the password you chose" in page.content.decode()
    assert User.objects.get().email_verified_at is None

    wrong = client.post(link, {"username": "new@example.com", "password": "a-guess"})
    assert wrong.status_code == 400
    assert "That is not the password of this account" in wrong.content.decode()
    assert User.objects.get().email_verified_at is None
    assert "_auth_user_id" not in client.session

    right = client.post(link, {"username": "new@example.com", "password": PASSWORD})
    assert right.status_code == 302
    assert User.objects.get().email_verified_at is not None
    assert "_auth_user_id" in client.session


def test_a_used_link_says_the_address_is_already_confirmed(client: Client, mailoutbox) -> None:
    sign_up(client, "new@example.com")
    link = confirmation_link(mailoutbox[0])
    client.get(link)
    first = User.objects.get().email_verified_at

    again = Client().get(link, follow=True)

    assert again.redirect_chain[-1][0] == "/login/"
    assert "new@example.com is already confirmed" in again.content.decode()
    assert User.objects.get().email_verified_at == first


def test_an_expired_link_says_so_and_offers_a_new_one(client: Client, settings) -> None:
    settings.EMAIL_VERIFICATION_MAX_AGE_HOURS = 48
    user: User = UserFactory(email="slow@example.com", email_verified_at=None)
    with mock.patch("time.time", return_value=time.time() - 49 * 3600):
        link = link_path(user)

    response = client.get(link)

    assert response.status_code == 400
    body = response.content.decode()
    assert "This confirmation link has expired: a link works for 48 hours" in body
    assert 'value="slow@example.com"' in body  # the form to send a new one, filled in
    user.refresh_from_db()
    assert user.email_verified_at is None


@pytest.mark.parametrize(
    "mangle",
    [
        lambda link: link.replace("/confirm/", "/confirm/x"),  # a bad signature
        lambda link: "/signup/confirm/not-a-token/",
        lambda link: "/signup/confirm/" + "%00" * 40 + "/",
    ],
)
def test_a_mangled_link_is_a_clear_400_page(client: Client, mangle) -> None:
    user: User = UserFactory(email="slow@example.com", email_verified_at=None)
    link = link_path(user)

    response = client.get(mangle(link))

    assert response.status_code == 400
    assert "This confirmation link is not valid" in response.content.decode()


def test_a_link_stops_working_when_the_account_is_gone_or_its_address_changed(client: Client) -> None:
    user: User = UserFactory(email="first@example.com", email_verified_at=None)
    link = link_path(user)
    user.email = "second@example.com"
    user.save(update_fields=["email"])
    assert client.get(link).status_code == 400
    user.delete()
    assert client.get(link).status_code == 400


def test_the_confirmation_email_can_be_sent_again(client: Client, mailoutbox) -> None:
    sign_up(client, "new@example.com")
    UserFactory(email="confirmed@example.com")

    answers = [client.post("/signup/resend/", {"email": email}) for email in ("new@example.com", "nobody@example.com")]
    answers.append(client.post("/signup/resend/", {"email": "confirmed@example.com"}))

    assert {(a.status_code, a["Location"]) for a in answers} == {(302, "/signup/check-your-inbox/")}
    assert [m.to[0] for m in mailoutbox] == ["new@example.com", "new@example.com", "confirmed@example.com"]
    assert LINK.search(mailoutbox[1].body)  # a new confirmation link
    assert mailoutbox[2].subject == "Someone tried to sign up to Tasklift with your email address"
    assert client.post("/signup/resend/", {"email": "not an address"}).status_code == 400


def test_signups_from_one_client_address_are_limited(client: Client, settings, mailoutbox) -> None:
    """The issue: 15 accounts in 7 seconds from one client."""
    settings.ACCOUNT_REQUESTS_PER_ADDRESS = 10
    for n in range(10):
        assert sign_up(client, f"bulk{n}@example.com").status_code == 302

    refused = sign_up(client, "bulk10@example.com")

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "Too many requests" in refused.content.decode()
    assert User.objects.count() == 10
    assert len(mailoutbox) == 10
    # another client address is not held back
    assert sign_up(client, "else@example.com", REMOTE_ADDR="10.0.0.7").status_code == 302


def test_emails_to_one_address_are_limited_whoever_asks(settings, mailoutbox) -> None:
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 3
    UserFactory(email="victim@example.com")
    answers = [
        Client(REMOTE_ADDR=f"10.0.0.{n}").post(
            "/signup/", {"email": "victim@example.com", "password1": PASSWORD, "password2": PASSWORD}
        )
        for n in range(3)
    ]
    answers.append(Client(REMOTE_ADDR="10.0.0.9").post("/signup/resend/", {"email": "victim@example.com"}))

    assert [a.status_code for a in answers] == [302, 302, 302, 429]
    assert len(mailoutbox) == 3


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):  # type: ignore[no-untyped-def]
        raise ConnectionRefusedError("the mail server is down")


def test_a_mail_server_that_is_down_is_not_a_500(client: Client, settings) -> None:
    settings.EMAIL_BACKEND = "tests.accounts.test_signup.RefusingBackend"
    UserFactory(email="taken@example.com")

    assert sign_up(client, "new@example.com").status_code == 302
    assert sign_up(Client(), "taken@example.com").status_code == 302
    assert client.post("/signup/resend/", {"email": "new@example.com"}).status_code == 302


def test_bad_input_gets_field_errors_and_no_email(client: Client, mailoutbox) -> None:
    UserFactory(email="taken@example.com")
    response = client.post("/signup/", {"email": "taken@example.com", "password1": "short", "password2": "different"})

    assert response.status_code == 400
    body = response.content.decode()
    assert "password fields didn" in body
    assert "already exists" not in body
    assert mailoutbox == []
