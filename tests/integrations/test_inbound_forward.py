"""The forward-to address (issue 37): mail the person forwards there over SMTP (the `inbound` server, in a thread
here) or through the webhook becomes the forwarded email's task; mail from anyone else, or a From its domain
does not vouch for, is refused at SMTP time and never stored. DNS (DKIM keys, SPF, DMARC) is the sandbox's."""

from __future__ import annotations

import smtplib
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.core import mail
from django.test import Client
from django.test.utils import override_settings

from accounts.models import User
from accounts.services import consent_revoke
from config.ports import free_port
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.inbound.addresses import forward_address, forward_address_rotate
from integrations.inbound.smtp import InboundServer
from integrations.models import ForwardSender, InboundMessage, Integration
from integrations.webhooks import inbound_signature
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import run_extraction
from tests.forwards import ORIGINAL_SENDER, attached_forward, gmail_forward, outlook_forward, smtp_send
from tests.mail import rfc822

pytestmark = pytest.mark.django_db(transaction=True)  # the server's thread reads what the test wrote

ASK = "Could you send the signed contract by Friday?"
WEBHOOK_SECRET = "tasklift-test-inbound-secret"


@pytest.fixture
def inbound(sandbox: SandboxClient) -> Iterator[int]:
    """The inbound SMTP server on a port of its own; the person's domain (example.com) publishes SPF for
    127.0.0.1 and a DMARC record, and the sandbox signs for it."""
    import threading

    sandbox.mail_domain("example.com")
    server = InboundServer(host="127.0.0.1", port=free_port())
    stopping = threading.Event()
    thread = threading.Thread(target=server.serve, args=(stopping,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while server.controller.server is None and time.monotonic() < deadline:
        time.sleep(0.05)
    yield server.controller.port
    stopping.set()
    thread.join(timeout=10)


def _address(user: User) -> str:
    return forward_address(user=user).account_address


def _task_of_the_forward(user: User) -> Task:
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, (run.error_code, run.error_message)
    [task] = Task.objects.filter(user=user)
    return task


@pytest.mark.parametrize("forward", [gmail_forward, outlook_forward, attached_forward], ids=lambda f: f.__name__)
def test_a_forward_over_inbound_smtp_becomes_the_originals_task(
    forward, inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    person = consenting_user.email
    raw = sandbox.dkim_sign(forward(person, ASK, note="remind me Friday"), "example.com")
    assert smtp_send(inbound, mail_from=person, to=_address(consenting_user), raw=raw) == (250, "")
    assert InboundMessage.objects.count() == 1

    task = _task_of_the_forward(consenting_user)

    assert "maya@client.example" in task.email_sender  # the forwarded email's sender, not the person's
    assert task.email_subject == "Contract"
    assert "contract" in task.title.lower()
    assert task.integration is not None and task.integration.provider == Integration.Provider.FORWARD
    [entry] = ProcessedEmail.objects.filter(integration=task.integration)
    assert entry.purpose == "forwarded" and entry.outcome == ProcessedEmail.Outcome.TASKS
    assert InboundMessage.objects.count() == 0  # deleted once handled; its ledger row stays


def test_inbound_refuses_a_strangers_mail_with_550_and_stores_nothing(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.mail_domain("elsewhere.example")
    raw = sandbox.dkim_sign(gmail_forward("Stranger <stranger@elsewhere.example>", ASK), "elsewhere.example")
    code, text = smtp_send(inbound, mail_from="stranger@elsewhere.example", to=_address(consenting_user), raw=raw)
    assert code == 550 and text.startswith("5.7.1"), text
    assert InboundMessage.objects.count() == 0
    assert len(mail.outbox) == 0  # never answered (no backscatter)


def test_inbound_refuses_a_spoofed_from_without_dkim_alignment_with_550(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.mail_domain("example.com", spf_ips=["192.0.2.10"])  # the person's domain sends from elsewhere only
    raw = gmail_forward(consenting_user.email, ASK)  # not signed
    code, text = smtp_send(inbound, mail_from=consenting_user.email, to=_address(consenting_user), raw=raw)
    assert code == 550 and text.startswith("5.7.26"), text
    # Signed by another domain than the From's: not aligned either.
    sandbox.mail_domain("relay.example")
    signed_elsewhere = sandbox.dkim_sign(raw, "relay.example")
    address = _address(consenting_user)
    code, text = smtp_send(inbound, mail_from="bounce@relay.example", to=address, raw=signed_elsewhere)
    assert code == 550 and text.startswith("5.7.26"), text
    assert InboundMessage.objects.count() == 0


def test_inbound_takes_mail_whose_spf_aligns_without_dkim(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    """A company's Microsoft 365 signs with its onmicrosoft.com domain: SPF of the person's own domain aligns."""
    raw = outlook_forward(consenting_user.email, ASK)
    assert smtp_send(inbound, mail_from=consenting_user.email, to=_address(consenting_user), raw=raw) == (250, "")
    assert InboundMessage.objects.count() == 1


def test_inbound_refuses_unknown_and_rotated_addresses(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com")
    code, text = smtp_send(inbound, mail_from=consenting_user.email, to="tasks+nosuchtoken@in.tasklift.test", raw=raw)
    assert code == 550 and text.startswith("5.1.1"), text
    old = _address(consenting_user)
    new = forward_address_rotate(user=consenting_user).account_address
    assert new != old
    assert smtp_send(inbound, mail_from=consenting_user.email, to=old, raw=raw)[0] == 550
    assert smtp_send(inbound, mail_from=consenting_user.email, to=new.upper(), raw=raw) == (250, "")


def test_inbound_a_delivery_retried_is_stored_once_and_read_once(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com")
    address = _address(consenting_user)
    for _ in range(2):  # the sender did not hear the first 250 and sends it again
        assert smtp_send(inbound, mail_from=consenting_user.email, to=address, raw=raw) == (250, "")
    assert InboundMessage.objects.count() == 1
    _task_of_the_forward(consenting_user)
    # A third time, after it was read: stored again, found in the ledger, no second task, gone from storage.
    assert smtp_send(inbound, mail_from=consenting_user.email, to=address, raw=raw) == (250, "")
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert (run.emails_fetched, run.emails_already_done, run.tasks_created) == (1, 1, 0)
    assert Task.objects.filter(user=consenting_user).count() == 1
    assert InboundMessage.objects.count() == 0


def test_inbound_refuses_without_consent_and_over_the_size_limit(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    address = _address(consenting_user)
    big = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK + " " + "x" * 60_000), "example.com")
    with override_settings(INBOUND_MAX_BYTES=50_000):
        code, text = smtp_send(inbound, mail_from=consenting_user.email, to=address, raw=big)
    assert code == 552, text
    consent_revoke(user=consenting_user)
    raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com")
    code, text = smtp_send(inbound, mail_from=consenting_user.email, to=address, raw=raw)
    assert code == 550 and "AI reading is off" in text, text
    assert InboundMessage.objects.count() == 0


def test_inbound_takes_mail_from_an_address_the_person_added_once_confirmed(
    inbound: int, sandbox: SandboxClient, consenting_user: User, client: Client
) -> None:
    client.force_login(consenting_user)
    sandbox.mail_domain("work.example")
    raw = sandbox.dkim_sign(gmail_forward("Me at work <me@work.example>", ASK), "work.example")
    address = _address(consenting_user)
    assert smtp_send(inbound, mail_from="me@work.example", to=address, raw=raw)[0] == 550  # not theirs yet

    response = client.post("/settings/forward/senders", {"address": "Me@Work.example"})
    assert response.status_code == 302
    [sent] = mail.outbox
    assert sent.to == ["me@work.example"]
    link = next(word for word in sent.body.split() if "/settings/forward/confirm/" in word)
    assert smtp_send(inbound, mail_from="me@work.example", to=address, raw=raw)[0] == 550  # not confirmed yet
    client.get(link.replace("http://testserver", ""))
    assert ForwardSender.objects.get(user=consenting_user).confirmed_at is not None

    assert smtp_send(inbound, mail_from="me@work.example", to=address, raw=raw) == (250, "")


def _webhook(client: Client, raw: bytes, *, to: str, secret: str = WEBHOOK_SECRET, age_s: int = 0, **envelope: str):
    timestamp = str(int(time.time()) - age_s)
    return client.post(
        "/webhooks/inbound",
        data=raw,
        content_type="message/rfc822",
        headers={
            "X-Tasklift-Timestamp": timestamp,
            "X-Tasklift-Signature": inbound_signature(secret, timestamp, raw),
            "X-Tasklift-Recipient": to,
            "X-Tasklift-Client-IP": envelope.get("ip", "127.0.0.1"),
            "X-Tasklift-Mail-From": envelope.get("mail_from", ""),
            "X-Tasklift-Helo": "mx.provider.example",
        },
    )


def test_the_inbound_webhook_takes_a_signed_forward_and_refuses_the_rest(
    sandbox: SandboxClient, consenting_user: User, client: Client
) -> None:
    sandbox.mail_domain("example.com")
    address = _address(consenting_user)
    raw = sandbox.dkim_sign(attached_forward(consenting_user.email, ASK), "example.com")

    assert _webhook(client, raw, to=address, secret="wrong").status_code == 403
    assert _webhook(client, raw, to=address, age_s=3600).status_code == 403  # a replay of an old request
    unsigned = client.post("/webhooks/inbound", data=raw, content_type="message/rfc822")
    assert unsigned.status_code == 401 and unsigned.json()["error"]["code"] == "signature_missing"
    sandbox.mail_domain("elsewhere.example")
    stranger = sandbox.dkim_sign(gmail_forward("s@elsewhere.example", ASK), "elsewhere.example")
    refused = _webhook(client, stranger, to=address)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "not_the_person"
    assert _webhook(client, raw, to="tasks+nosuch@in.tasklift.test").json()["error"]["code"] == "unknown_recipient"
    assert InboundMessage.objects.count() == 0

    taken = _webhook(client, raw, to=address)
    assert taken.status_code == 200 and taken.json() == {"accepted": True}
    assert _webhook(client, raw, to=address).status_code == 200  # retried: the same row
    assert InboundMessage.objects.count() == 1
    task = _task_of_the_forward(consenting_user)
    assert "maya@client.example" in task.email_sender

    with override_settings(INBOUND_WEBHOOK_SECRET=""):
        assert _webhook(client, raw, to=address).status_code == 404


def test_the_settings_page_shows_the_forward_address_and_a_new_one_replaces_it(
    consenting_user: User, client: Client
) -> None:
    client.force_login(consenting_user)
    page = client.get("/settings/").content.decode()
    old = _address(consenting_user)
    assert old in page and old.startswith("tasks+") and old.endswith("@in.tasklift.test")
    assert consenting_user.email in page  # taken from the account's own address
    response = client.post("/settings/forward/rotate", follow=True)
    new = _address(consenting_user)
    assert new != old and new in response.content.decode() and old not in response.content.decode()
    # Not a mailbox the person connected: the Mailboxes page does not list it.
    assert "tasks+" not in client.get("/mailboxes/").content.decode()


def test_a_forwarded_email_from_a_mailbox_already_read_is_not_a_second_task(
    inbound: int, sandbox: SandboxClient, consenting_user: User
) -> None:
    """The same email (its Message-ID) attached to a forward after a connected mailbox made its task."""
    from tests.conftest import connect_gmail

    box = connect_gmail(sandbox, consenting_user, consenting_user.email)
    original = rfc822("Contract", f"Hi,\n\n{ASK}\n\nThanks,\nMaya\n", sender=ORIGINAL_SENDER)
    box.deliver(original)
    assert run_extraction(consenting_user).tasks_created == 1
    from email import message_from_string, policy

    forward = gmail_forward(consenting_user.email, ASK)  # an outer message to attach the very original to
    outer = message_from_string(forward.decode(), policy=policy.default)
    outer.clear_content()
    outer.set_content("this one again")
    outer.add_attachment(message_from_string(original, policy=policy.default))
    raw = sandbox.dkim_sign(outer.as_bytes(), "example.com")
    assert smtp_send(inbound, mail_from=consenting_user.email, to=_address(consenting_user), raw=raw) == (250, "")
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED and run.tasks_created == 0
    assert Task.objects.filter(user=consenting_user).count() == 1
    assert InboundMessage.objects.count() == 0


def test_a_forwarded_emails_note_reaches_gemini_on_a_line_of_its_own() -> None:
    """What the person wrote above the forward is given as theirs (bounded, on one line), not as the email's text."""
    from extraction.prompt import NOTE_MARK, build_prompt
    from integrations.providers.forward import ForwardProvider

    raw = gmail_forward("person@example.com", ASK, note="remind me Friday\nand call her first")
    email = ForwardProvider(integration_id=0)._email("key", raw, datetime.now(UTC))
    assert email.note == "remind me Friday\nand call her first"
    prompt = build_prompt([email], max_body_chars=4000)
    assert f"{NOTE_MARK}: remind me Friday and call her first\n" in prompt.contents
    assert "remind me Friday" not in prompt.texts["email_1"]  # not the email's own words (grounding reads those)


def test_push_maintenance_opens_no_channel_for_an_imap_mailbox_or_a_forward_to_address(
    consenting_user: User, settings: object
) -> None:
    """Only Gmail and Outlook have push channels; the maintenance job once asserted an Outlook client for any other."""
    from integrations.jobs import push_channels_maintain_job
    from integrations.models import PushChannel
    from tests.factories import IntegrationFactory

    settings.PUSH_ENABLED = True  # type: ignore[attr-defined]
    IntegrationFactory(user=consenting_user, provider=Integration.Provider.IMAP)
    forward_address(user=consenting_user)
    assert push_channels_maintain_job() == {"renewed": 0, "opened": 0, "failed": 0, "forgotten": 0}
    assert not PushChannel.objects.exists()


def test_the_scans_idle_check_finds_forwarded_mail_stored_and_asks_for_a_run(
    sandbox: SandboxClient, consenting_user: User
) -> None:
    """The safety net when the run asked for at storing was lost (Redis down): the idle check sees the queue."""
    from extraction.idlecheck import mailboxes_idle_check
    from integrations.inbound.accept import inbound_accept

    sandbox.mail_domain("example.com")
    integration = forward_address(user=consenting_user)
    assert mailboxes_idle_check(integration_ids=[integration.pk]).with_mail == 0  # nothing stored: quiet
    raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com")
    answer = inbound_accept(
        recipient=integration.account_address, raw=raw, client_ip="127.0.0.1", helo="mx", mail_from="", via="smtp"
    )
    assert answer.taken
    ExtractionRun.objects.all().delete()  # as if the run asked for then was lost
    checked = mailboxes_idle_check(integration_ids=[integration.pk])
    assert (checked.with_mail, checked.runs_queued) == (1, 1)


def test_inbound_limits_say_try_later_as_smtp_does(sandbox: SandboxClient, consenting_user: User) -> None:
    """Over the sender's hourly rate 450, over the waiting count 452, DNS failing 451: each a 4xx, so the sending
    server keeps the message and tries again later; nothing of it is stored."""
    from config.ports import free_port
    from integrations.inbound.accept import inbound_accept

    sandbox.mail_domain("example.com")
    address = _address(consenting_user)

    def send(n: int) -> tuple[int, str]:
        raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, f"{ASK} ({n})"), "example.com")
        answer = inbound_accept(recipient=address, raw=raw, client_ip="127.0.0.1", helo="mx", mail_from="", via="smtp")
        return answer.code, answer.text

    with override_settings(INBOUND_PER_SENDER_PER_HOUR=2):
        assert [send(n)[0] for n in range(3)] == [250, 250, 450]
    with override_settings(INBOUND_MAX_WAITING=2):
        code, text = send(4)
        assert code == 452 and text.startswith("4.2.2"), text
    with override_settings(INBOUND_DNS_SERVER=f"127.0.0.1:{free_port()}"):  # nothing answers there
        code, text = send(5)
        assert code == 451 and text.startswith("4.7.0"), text
    assert InboundMessage.objects.count() == 2


def test_inbound_offers_starttls_with_the_operators_certificate(
    sandbox: SandboxClient, consenting_user: User, tmp_path: object
) -> None:
    import ssl
    import threading
    from pathlib import Path

    from sandbox.tls import certificate_generate

    certificate, key = certificate_generate()
    folder = Path(str(tmp_path))
    (folder / "cert.pem").write_bytes(certificate)
    (folder / "key.pem").write_bytes(key)
    sandbox.mail_domain("example.com")
    raw = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com").replace(b"\n", b"\r\n")
    with override_settings(INBOUND_TLS_CERT=str(folder / "cert.pem"), INBOUND_TLS_KEY=str(folder / "key.pem")):
        server = InboundServer(host="127.0.0.1", port=free_port())
    stopping = threading.Event()
    thread = threading.Thread(target=server.serve, args=(stopping,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while server.controller.server is None and time.monotonic() < deadline:
            time.sleep(0.05)
        trust = ssl.create_default_context(cafile=str(folder / "cert.pem"))
        with smtplib.SMTP("127.0.0.1", server.controller.port, timeout=30) as client:
            client.ehlo("mx.sender.example")
            assert client.has_extn("starttls")
            client.starttls(context=trust)
            client.ehlo("mx.sender.example")
            assert isinstance(client.sock, ssl.SSLSocket) and client.sock.version() in ("TLSv1.2", "TLSv1.3")
            client.sendmail(consenting_user.email, [_address(consenting_user)], raw)
    finally:
        stopping.set()
        thread.join(timeout=10)
    assert InboundMessage.objects.count() == 1


def test_metrics_count_what_the_door_takes_and_refuses_and_the_queues_age(
    sandbox: SandboxClient, consenting_user: User, client: Client, settings: object
) -> None:
    from integrations.inbound.accept import inbound_accept
    from tests.test_metrics import TOKEN, scrape, value

    settings.METRICS_TOKEN = TOKEN  # type: ignore[attr-defined]
    sandbox.mail_domain("example.com")
    sandbox.mail_domain("elsewhere.example")
    address = _address(consenting_user)
    before = scrape(client)
    own = sandbox.dkim_sign(gmail_forward(consenting_user.email, ASK), "example.com")
    stranger = sandbox.dkim_sign(gmail_forward("s@elsewhere.example", ASK), "elsewhere.example")
    for raw in (own, stranger):
        inbound_accept(recipient=address, raw=raw, client_ip="127.0.0.1", helo="mx", mail_from="", via="webhook")

    after = scrape(client)

    def grew(outcome: str) -> float:
        name = "tasklift_inbound_messages_total"
        return value(after, name, via="webhook", outcome=outcome) - value(before, name, via="webhook", outcome=outcome)

    assert (grew("accepted"), grew("not_the_person"), grew("not_aligned")) == (1, 1, 0)
    assert value(after, "tasklift_inbound_waiting") == 1
    assert 0 <= value(after, "tasklift_inbound_oldest_waiting_age_seconds") < 60
    assert value(after, "tasklift_scrape_part_up", part="inbound") == 1
