"""Connecting an IMAP mailbox with the form: the test before saving says what failed in plain words, nothing
is stored until a test succeeds, the password is encrypted at rest, and a refused password later asks for it
again on Mailboxes."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration
from sandbox.client import SandboxClient
from sandbox.dovecot import Dovecot
from tests.conftest import connect_imap, run_extraction

pytestmark = pytest.mark.django_db


@pytest.fixture
def person(client: Client, consenting_user: User) -> Client:
    client.force_login(consenting_user)
    return client


def form(dovecot: Dovecot, address: str, password: str, **changes: object) -> dict[str, object]:
    data = {
        "preset": "other", "address": address, "username": "", "password": password,
        "host": "127.0.0.1", "port": dovecot.tls_port, "security": "tls",
    }  # fmt: skip
    return {**data, **changes}


def test_a_wrong_password_is_named_then_the_right_one_connects(person: Client, dovecot: Dovecot) -> None:
    dovecot.add_user("kim@imap.example.org", "right-app-password")

    wrong = person.post("/integrations/imap/connect", form(dovecot, "kim@imap.example.org", "nope", action="connect"))
    assert wrong.status_code == 400
    assert "refused this user name and password" in wrong.content.decode()
    assert not Integration.objects.exists()  # nothing stored before a test succeeds

    tested = person.post(
        "/integrations/imap/connect", form(dovecot, "kim@imap.example.org", "right-app-password", action="test")
    )
    assert tested.status_code == 200 and "can read its Inbox and its sent mail (“Sent”)" in tested.content.decode()
    assert not Integration.objects.exists()

    saved = person.post(
        "/integrations/imap/connect", form(dovecot, "kim@imap.example.org", "right-app-password", action="connect")
    )
    assert saved.status_code == 302
    mailbox = Integration.objects.get()
    assert (mailbox.provider, mailbox.account_address) == ("imap", "kim@imap.example.org")
    assert "right-app-password" not in mailbox.credentials_encrypted  # encrypted at rest
    page = person.get("/mailboxes/").content.decode()
    assert "kim@imap.example.org" in page and "IMAP" in page


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"port": "plain", "security": "tls"}, "refused a secure (TLS) connection"),  # TLS to a plain port
        ({"host": "no-such-host.invalid"}, "No server named no-such-host.invalid was found"),
        ({"host": "https://imap.example.com"}, "Enter the server"),
        ({"preset": "other", "host": ""}, "Enter the IMAP server"),
    ],
)
def test_each_failure_is_said_in_plain_words(
    person: Client, dovecot: Dovecot, changes: dict[str, object], said: str
) -> None:
    dovecot.add_user("lee@imap.example.org", "pw-lee")
    if changes.get("port") == "plain":
        changes = {**changes, "port": dovecot.starttls_port}
    answer = person.post("/integrations/imap/connect", form(dovecot, "lee@imap.example.org", "pw-lee", **changes))
    assert answer.status_code == 400
    assert said in answer.content.decode()
    assert not Integration.objects.exists()


def test_starttls_on_the_plain_port_connects(person: Client, dovecot: Dovecot) -> None:
    dovecot.add_user("sam@imap.example.org", "pw-sam")
    data = form(dovecot, "sam@imap.example.org", "pw-sam", port=dovecot.starttls_port, security="starttls")
    answer = person.post("/integrations/imap/connect", {**data, "action": "connect"})
    assert answer.status_code == 302
    assert Integration.objects.get().account_address == "sam@imap.example.org"


def test_an_unreachable_server_is_said(person: Client, dovecot: Dovecot) -> None:
    from config.ports import free_port

    answer = person.post("/integrations/imap/connect", form(dovecot, "x@imap.example.org", "pw", port=free_port()))
    assert answer.status_code == 400 and "could not be reached" in answer.content.decode()


def test_a_certificate_not_trusted_is_refused(person: Client, dovecot: Dovecot, settings) -> None:  # type: ignore[no-untyped-def]
    settings.IMAP_CA_BUNDLE = ""  # the system's trust store: the test server's own certificate is not in it
    dovecot.add_user("max@imap.example.org", "pw-max")
    answer = person.post("/integrations/imap/connect", form(dovecot, "max@imap.example.org", "pw-max"))
    assert answer.status_code == 400 and "could not be verified" in answer.content.decode()


def test_a_private_address_is_refused_unless_the_operator_allows_it(
    person: Client,
    dovecot: Dovecot,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.IMAP_ALLOW_PRIVATE_HOSTS = False
    dovecot.add_user("pat@imap.example.org", "pw-pat")
    answer = person.post("/integrations/imap/connect", form(dovecot, "pat@imap.example.org", "pw-pat"))
    assert answer.status_code == 400 and "private network" in answer.content.decode()


def test_a_password_refused_later_asks_for_it_again(
    person: Client, dovecot: Dovecot, sandbox: SandboxClient, consenting_user: User
) -> None:
    box = connect_imap(dovecot, consenting_user)
    dovecot.add_user(box.address, "a-new-app-password")  # the old one revoked at the mail service

    run = run_extraction(consenting_user)

    box.integration.refresh_from_db()
    assert run.status != ExtractionRun.Status.SUCCEEDED
    assert box.integration.status == Integration.Status.NEEDS_REAUTH
    page = person.get("/mailboxes/").content.decode()
    assert "no longer accepts the app password" in page
    refill = person.get(f"/integrations/imap/connect?mailbox={box.integration.pk}").content.decode()
    assert box.address in refill and box.password not in refill
