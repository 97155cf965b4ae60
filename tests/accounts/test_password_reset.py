"""A forgotten password is set again through a link sent by email: the request answers the same whether or not
the address has an account, is rate-limited, and works while logging in is refused for too many failures."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from unittest import mock

import pytest
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.test import Client

from accounts.models import User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

OLD = "correct-horse-battery"  # tests.factories.UserFactory's
NEW = "a-brand-new-passphrase-4"
LINK = re.compile(r"https?://[^/\s]+(/password-reset/[^/\s]+/[^/\s]+/)")


def reset_link(message) -> str:  # type: ignore[no-untyped-def]
    found = LINK.search(str(message.body))
    assert found, message.body
    return found[1]


def log_in(client: Client, email: str, password: str) -> int:
    return client.post("/login/", {"username": email, "password": password}).status_code


def set_new_password(client: Client, link: str, password: str = NEW):  # type: ignore[no-untyped-def]
    """Open the link (Django moves its token into the session and redirects) and set the password."""
    opened = client.get(link)
    assert opened.status_code == 302, opened.content.decode()[-2000:]
    form_url = opened["Location"]
    assert client.get(form_url).status_code == 200
    return client.post(form_url, {"new_password1": password, "new_password2": password})


def test_the_request_answers_the_same_whether_or_not_the_address_has_an_account(mailoutbox, settings) -> None:
    settings.SITE_URL = "https://tasklift.example.com"
    UserFactory(email="known@example.com")

    answers = [Client().post("/password-reset/", {"email": e}) for e in ("known@example.com", "unknown@example.com")]

    assert [(a.status_code, a["Location"]) for a in answers] == [(302, "/password-reset/sent/")] * 2
    assert answers[0].content == answers[1].content
    [message] = mailoutbox
    assert message.to == ["known@example.com"]
    assert message.subject == "Set a new password for Tasklift"
    assert "https://tasklift.example.com/password-reset/" in message.body  # SITE_URL, not the request's Host
    page = Client().get("/password-reset/sent/").content.decode()
    assert "If an account uses that address, we emailed it a link" in page


def test_a_slowed_account_can_reset_its_password_and_then_log_in(client: Client, settings, mailoutbox) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.LOGIN_DELAY_SECONDS = 60
    user: User = UserFactory(email="locked@example.com")
    for n in range(3):
        log_in(Client(REMOTE_ADDR=f"203.0.113.{n}"), user.email, "a-guess")
    assert log_in(client, user.email, OLD) == 429  # slowed, even with the right password
    throttled_page = client.post("/login/", {"username": user.email, "password": OLD}).content.decode()
    assert 'href="/password-reset/"' in throttled_page  # the 429 page offers the way out

    assert client.post("/password-reset/", {"email": user.email}).status_code == 302
    done = set_new_password(client, reset_link(mailoutbox[0]))
    assert done.status_code == 302
    assert done["Location"] == "/password-reset/done/"
    assert "Your new password is set" in client.get(done["Location"]).content.decode()

    assert log_in(client, user.email, OLD) == 400  # the old password no longer works, and this is not a 429
    assert log_in(client, user.email, NEW) == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_a_reset_lets_its_browser_in_without_giving_strangers_a_fresh_start(settings, mailoutbox) -> None:
    """The issue: a reset unlocked the account, and eleven more failures locked it again at once."""
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.LOGIN_DELAY_SECONDS = 60
    user: User = UserFactory(email="owner@example.com")
    for n in range(3):
        log_in(Client(REMOTE_ADDR=f"203.0.113.{n}"), user.email, "a-guess")
    owner = Client(REMOTE_ADDR="192.0.2.44")  # a browser that never logged in to the account
    owner.post("/password-reset/", {"email": user.email})
    set_new_password(owner, reset_link(mailoutbox[0]))

    after_the_reset = log_in(Client(REMOTE_ADDR="203.0.113.9"), user.email, "another-guess")
    assert after_the_reset == 429  # strangers are still slowed...
    assert log_in(owner, user.email, "a-typo") == 400  # ...the browser that set the password is not
    assert log_in(owner, user.email, NEW) == 302


def test_sign_ups_with_the_owners_address_do_not_use_up_their_reset_links(settings, mailoutbox) -> None:
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 3
    UserFactory(email="owner@example.com")
    for n in range(3):
        Client(REMOTE_ADDR=f"203.0.113.{n}").post(
            "/signup/", {"email": "owner@example.com", "password1": NEW, "password2": NEW}
        )
    assert len(mailoutbox) == 3  # "someone tried to sign up with your address": no link to set a password

    asked = Client(REMOTE_ADDR="192.0.2.44").post("/password-reset/", {"email": "owner@example.com"})

    assert asked.status_code == 302
    assert mailoutbox[-1].subject == "Set a new password for Tasklift"


def test_when_strangers_asked_for_every_reset_link_allowed_the_owner_holds_them_all_working(
    settings, mailoutbox
) -> None:
    """Strangers can spend the reset emails of an address, but never so that its owner has no working link:
    they are counted over a link's lifetime, so every link that counts still works. The refusal says so, in
    the same words whether or not the address has an account."""
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 3
    UserFactory(email="owner@example.com")
    refusals = {}
    for email in ("owner@example.com", "nobody@example.com"):
        for n in range(3):
            assert Client(REMOTE_ADDR=f"203.0.113.{n}").post("/password-reset/", {"email": email}).status_code == 302
        refused = Client(REMOTE_ADDR="192.0.2.44").post("/password-reset/", {"email": email})
        assert refused.status_code == 429
        [refusals[email]] = re.findall(r'<p role="alert">(.*?)</p>', refused.content.decode(), re.S)
    assert refusals["owner@example.com"] == refusals["nobody@example.com"]
    assert "If it has an account, they all still work" in refusals["owner@example.com"]
    links = [reset_link(message) for message in mailoutbox]
    assert len(links) == 3  # to the owner; none to an address without an account

    owner = Client(REMOTE_ADDR="192.0.2.44")
    for link in links:  # every one of them would do: each is opened, the last one used
        assert owner.get(link).status_code == 302
    assert set_new_password(owner, links[-1]).status_code == 302
    assert log_in(owner, "owner@example.com", NEW) == 302


def test_a_reset_does_not_clear_the_count_of_the_client_address(client: Client, settings, mailoutbox) -> None:
    """Resetting one's own account must not let a client guessing at many accounts start afresh."""
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    mine: User = UserFactory(email="mine@example.com")
    for n in range(3):
        log_in(client, f"someone{n}@example.com", "a-guess")

    client.post("/password-reset/", {"email": mine.email})
    set_new_password(client, reset_link(mailoutbox[0]))

    assert log_in(client, mine.email, NEW) == 429


def test_a_reset_confirms_an_unconfirmed_address(client: Client, mailoutbox) -> None:
    user: User = UserFactory(email="late@example.com", email_verified_at=None)
    client.post("/password-reset/", {"email": user.email})
    set_new_password(client, reset_link(mailoutbox[0]))

    user.refresh_from_db()
    assert user.email_verified_at is not None
    assert log_in(client, user.email, NEW) == 302


def test_a_reset_link_works_once(client: Client, mailoutbox) -> None:
    user: User = UserFactory()
    client.post("/password-reset/", {"email": user.email})
    link = reset_link(mailoutbox[0])
    set_new_password(client, link)

    again = Client().get(link, follow=True)

    assert again.status_code == 400
    assert "This link does not work" in again.content.decode()


def test_an_expired_reset_link_is_refused(client: Client, settings, mailoutbox) -> None:
    settings.PASSWORD_RESET_TIMEOUT = 3600
    user: User = UserFactory()
    client.post("/password-reset/", {"email": user.email})
    link = reset_link(mailoutbox[0])

    later = datetime.now() + timedelta(hours=2)  # naive, as the token generator's own clock
    with mock.patch.object(PasswordResetTokenGenerator, "_now", return_value=later):
        response = client.get(link, follow=True)

    assert response.status_code == 400
    assert "it has expired, it was already used" in response.content.decode()
    user.refresh_from_db()
    assert user.check_password(OLD)


@pytest.mark.parametrize(
    "path", ["/password-reset/MQ/not-a-token/", "/password-reset/%00%ff/x-y/", "/password-reset/zz/set-password/"]
)
def test_a_mangled_reset_link_is_a_clear_400_page(client: Client, path: str) -> None:
    response = client.get(path, follow=True)

    assert response.status_code == 400
    assert "This link does not work" in response.content.decode()


def test_a_bad_address_or_mismatched_passwords_get_field_errors(client: Client, mailoutbox) -> None:
    assert client.post("/password-reset/", {"email": "not an address"}).status_code == 400
    user: User = UserFactory()
    client.post("/password-reset/", {"email": user.email})
    link = reset_link(mailoutbox[0])
    form_url = client.get(link)["Location"]

    response = client.post(form_url, {"new_password1": NEW, "new_password2": "something else"})

    assert response.status_code == 400
    assert "password fields didn" in response.content.decode()
    user.refresh_from_db()
    assert user.check_password(OLD)


def test_reset_requests_are_limited_per_client_and_per_recipient(settings, mailoutbox) -> None:
    settings.ACCOUNT_REQUESTS_PER_ADDRESS = 4
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 2
    UserFactory(email="known@example.com")
    client = Client()
    statuses = [client.post("/password-reset/", {"email": f"nobody{n}@example.com"}).status_code for n in range(4)]
    refused = client.post("/password-reset/", {"email": "known@example.com"})
    assert statuses == [302] * 4
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0

    # one recipient, whoever asks, and whether or not it has an account
    for email in ("known@example.com", "nobody@example.com"):
        answers = [Client(REMOTE_ADDR=f"10.0.1.{n}").post("/password-reset/", {"email": email}) for n in range(3)]
        assert [a.status_code for a in answers] == [302, 302, 429]
    assert len(mailoutbox) == 2
