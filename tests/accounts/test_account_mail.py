"""Account mail never carries text a stranger typed: anyone can sign up any address with any name, so the name
on an account is not its owner's word, and the emails Tasklift sends to that address (confirmation, its resend,
"someone tried to sign up", password reset) greet nobody by it."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User

pytestmark = pytest.mark.django_db

VICTIM = "victim@example.com"
PHISHING_NAME = "Security team: your account is locked, visit http://evil.test/fix"
PASSWORD = "a-long-passphrase-9"


def sign_up(email: str, name: str) -> int:
    data = {"email": email, "name": name, "password1": PASSWORD, "password2": PASSWORD}
    return Client().post("/signup/", data).status_code


def test_no_account_email_carries_the_name_a_stranger_signed_the_address_up_with(mailoutbox, settings) -> None:
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 20
    assert sign_up(VICTIM, PHISHING_NAME) == 302  # a stranger signs the victim's address up
    assert User.objects.get().name == PHISHING_NAME
    assert Client().post("/signup/resend/", {"email": VICTIM}).status_code == 302
    assert sign_up(VICTIM, PHISHING_NAME) == 302  # again: the address is taken now
    assert Client().post("/password-reset/", {"email": VICTIM}).status_code == 302
    reset = re.search(r"https?://[^/\s]+(/password-reset/[^/\s]+/[^/\s]+/)", str(mailoutbox[3].body))
    assert reset
    owner = Client()  # the address's owner takes the account over by setting a password; the name stays on it
    form = owner.get(reset[1])["Location"]
    assert (
        owner.post(form, {"new_password1": "owners-own-pass-1", "new_password2": "owners-own-pass-1"}).status_code
        == 302
    )
    assert User.objects.get().email_verified
    assert Client().post("/signup/resend/", {"email": VICTIM}).status_code == 302  # a confirmed one: how to log in

    assert {m.subject for m in mailoutbox} == {
        "Confirm your email address for Tasklift",
        "Someone tried to sign up to Tasklift with your email address",
        "Set a new password for Tasklift",
    }
    assert len(mailoutbox) == 5 and all(m.to == [VICTIM] for m in mailoutbox)
    for message in mailoutbox:
        written = " ".join([message.subject, str(message.body), *(str(body) for body, _ in message.alternatives)])
        for stranger_text in ("Security team", "evil.test", "locked"):
            assert stranger_text not in written, (message.subject, message.body)
        assert str(message.body).startswith("Hello,\n")
