"""Issue 35, point 7: when the mail server cannot take Tasklift's mail (down, or without the STARTTLS the settings
ask for), sign-up, a resend and a password reset say so ("We could not send the email just now") and change
nothing, for every address alike: the answer never tells whether an address has an account. The mail server is a
real one (sandbox/smtp.py, which speaks no STARTTLS), reached through Django's SMTP backend."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client

from accounts.emails import MAIL_UNAVAILABLE
from accounts.models import User
from accounts.services import user_create
from config.ports import free_port
from sandbox.smtp import SmtpSink

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-9"
KNOWN, UNKNOWN = "known@example.com", "nobody@example.com"
SAID_SENT = {"signup": "Check your inbox", "resend": "We sent the email to", "reset": "Check your inbox"}


@pytest.fixture
def relay(tmp_path: Path, settings) -> Iterator[SmtpSink]:
    """Django's SMTP backend pointed at a real mail server without STARTTLS."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.ACCOUNT_EMAILS_PER_RECIPIENT = 20
    with SmtpSink(tmp_path / "mail") as sink:
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", sink.port
        yield sink


def _closed_port() -> int:
    return free_port()  # nothing listens there


def _answers() -> dict[str, tuple[int, str]]:
    """Sign-up, resend and reset, each for an address with an account and one without: status and page."""
    answers = {}
    for address in (KNOWN, UNKNOWN):
        for name, path, data in (
            ("signup", "/signup/", {"email": address, "password1": PASSWORD, "password2": PASSWORD}),
            ("resend", "/signup/resend/", {"email": address}),
            ("reset", "/password-reset/", {"email": address}),
        ):
            response = Client().post(path, data, follow=True)
            answers[f"{name} {address}"] = (response.status_code, response.content.decode())
    return answers


@pytest.mark.parametrize("fault", ["no STARTTLS", "down"])
def test_a_mail_server_that_cannot_take_the_mail_is_said_on_the_page_for_every_address_and_changes_nothing(
    relay: SmtpSink, settings, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    user_create(email=KNOWN, password=PASSWORD)
    if fault == "no STARTTLS":
        settings.EMAIL_USE_TLS = True  # the settings ask for STARTTLS; this server has none
    else:
        settings.EMAIL_USE_TLS, settings.EMAIL_PORT = False, _closed_port()

    with caplog.at_level(logging.ERROR, logger="accounts.emails"):
        answers = _answers()

    for what, (status, page) in answers.items():
        assert status == 503, what
        assert MAIL_UNAVAILABLE in page, what
        assert SAID_SENT[what.split()[0]] not in page, what
    # The same words whatever the address: nothing tells which has an account.
    for name in ("signup", "resend", "reset"):
        assert answers[f"{name} {KNOWN}"][0] == answers[f"{name} {UNKNOWN}"][0]
    assert list(User.objects.values_list("email", flat=True)) == [KNOWN]  # no account made
    assert relay.messages() == []
    causes = [r.getMessage() for r in caplog.records if "mail server could not be reached" in r.getMessage()]
    assert causes and all(("STARTTLS" in c) if fault == "no STARTTLS" else ("Connection" in c) for c in causes), causes


def test_a_mail_server_that_takes_the_mail_sends_it_and_the_pages_say_check_your_inbox(
    relay: SmtpSink, settings
) -> None:
    settings.EMAIL_USE_TLS = False
    user_create(email=KNOWN, password=PASSWORD)

    answers = _answers()

    for what, (status, page) in answers.items():
        assert status == 200, what
        assert MAIL_UNAVAILABLE not in page, what
    assert User.objects.filter(email=UNKNOWN).exists()  # signed up
    # Each address: its sign-up's email (how to log in, or the link), the link again, the reset (the new account
    # was made by its sign-up before).
    recipients = sorted(str(m["To"]) for m in relay.messages())
    assert recipients == [KNOWN] * 3 + [UNKNOWN] * 3, recipients
