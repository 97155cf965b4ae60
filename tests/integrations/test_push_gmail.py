"""The Gmail doorbell: Pub/Sub push to /webhooks/gmail, its OIDC token checked with google-auth against the
sandbox's certificates (a local key, served the way Google serves its own), and what a genuine push does.

Every refused push queues nothing; a genuine one requests a run; a ring for mail already read, or for a
mailbox we do not know, is acknowledged and queues nothing either.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.models import Integration, PushChannel
from integrations.push import push_channel_close, push_channel_open
from sandbox.client import SandboxClient
from tests.conftest import GmailBox
from tests.mail import ask

pytestmark = pytest.mark.django_db


def envelope(address: str, history_id: int | str) -> bytes:
    data = base64.b64encode(json.dumps({"emailAddress": address, "historyId": str(history_id)}).encode()).decode()
    return json.dumps(
        {
            "message": {"data": data, "messageId": "1", "message_id": "1", "publishTime": "2026-11-30T10:00:00Z"},
            "subscription": "projects/tasklift-sandbox/subscriptions/gmail-push",
        }
    ).encode()


def good_claims(settings: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "aud": settings.GMAIL_PUSH_AUDIENCE,
        "iss": "https://accounts.google.com",
        "email": settings.GMAIL_PUSH_SERVICE_ACCOUNT,
        "email_verified": True,
        "iat": now,
        "exp": now + 3600,
        "sub": "1234567890",
        "azp": "1234567890",
    }


def push(client: Client, body: bytes, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.post("/webhooks/gmail", data=body, content_type="application/json", headers=headers)


@pytest.fixture
def rung(gmail: GmailBox) -> tuple[GmailBox, int]:
    """A connected mailbox with new mail: the history id Gmail's push would carry for it."""
    gmail.deliver(ask(1))
    return gmail, int(gmail.history_id())


BAD_TOKENS: dict[str, tuple[dict[str, Any], str]] = {
    "bad signature": ({}, "stranger"),
    "wrong audience": ({"aud": "https://elsewhere.example/webhooks/gmail"}, "sandbox"),
    "wrong issuer": ({"iss": "https://evil.example"}, "sandbox"),
    "wrong service account": ({"email": "someone@evil.iam.gserviceaccount.com"}, "sandbox"),
    "unverified email": ({"email_verified": False}, "sandbox"),
    "no email_verified": ({"email_verified": None}, "sandbox"),
    "expired": ({"iat": int(time.time()) - 7200, "exp": int(time.time()) - 3600}, "sandbox"),
    "no expiry": ({"exp": None}, "sandbox"),
    # Google's tokens last an hour: a longer one is not Pub/Sub's, whatever signed it.
    "valid for ten years": ({"exp": int(time.time()) + 10 * 365 * 86400}, "sandbox"),
    "valid for two hours": ({"iat": int(time.time()) - 60, "exp": int(time.time()) + 7140}, "sandbox"),
    "iat not a number": ({"iat": "yesterday"}, "sandbox"),
    "exp not a number": ({"exp": "tomorrow"}, "sandbox"),
}


@pytest.mark.parametrize("case", list(BAD_TOKENS))
def test_a_push_with_a_bad_token_is_refused_and_queues_nothing(
    case: str,
    client: Client,
    sandbox: SandboxClient,
    rung: tuple[GmailBox, int],
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    box, history_id = rung
    overrides, signer = BAD_TOKENS[case]
    token = sandbox.pubsub_token(claims={**good_claims(settings), **overrides}, signer=signer)

    with django_capture_on_commit_callbacks(execute=True):
        response = push(client, envelope(box.address, history_id), token)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "push_refused"
    assert ExtractionRun.objects.count() == 0 and broker_queue() == 0


@pytest.mark.parametrize("authorization", [None, "", "Basic dXNlcjpwYXNz", "Bearer not-a-jwt"])
def test_a_push_without_a_usable_token_is_refused(
    authorization: str | None,
    client: Client,
    rung: tuple[GmailBox, int],
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    box, history_id = rung
    headers = {"Authorization": authorization} if authorization is not None else {}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/webhooks/gmail", data=envelope(box.address, history_id), content_type="application/json", headers=headers
        )

    assert response.status_code == (403 if authorization == "Bearer not-a-jwt" else 401)
    assert ExtractionRun.objects.count() == 0 and broker_queue() == 0


def test_a_genuine_push_requests_a_run_that_makes_the_task(
    client: Client,
    sandbox: SandboxClient,
    rung: tuple[GmailBox, int],
    consenting_user: User,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    box, history_id = rung
    token = sandbox.pubsub_token(claims=good_claims(settings))

    with django_capture_on_commit_callbacks(execute=True):
        response = push(client, envelope(box.address.upper(), history_id), token)

    assert response.status_code == 204
    run = ExtractionRun.objects.get()
    assert (run.trigger, run.status, broker_queue()) == ("webhook", "queued", 1)
    from extraction.pipeline import extraction_run_execute

    done = extraction_run_execute(run=run)
    assert done.status == "succeeded" and done.tasks_created == 1
    assert Integration.objects.get(pk=box.integration.pk).notified_at is not None


def test_the_same_token_on_several_pushes_is_accepted_each_time(
    client: Client,
    sandbox: SandboxClient,
    gmail: GmailBox,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Pub/Sub may send one token with several pushes (it caches it for most of its hour): no replay check."""
    now = int(time.time())
    token = sandbox.pubsub_token(claims={**good_claims(settings), "iat": now - 120, "exp": now + 3600})  # skew
    answers = []
    for n in range(3):
        gmail.deliver(ask(n))
        with django_capture_on_commit_callbacks(execute=True):
            answers.append(push(client, envelope(gmail.address, int(gmail.history_id())), token).status_code)
    assert answers == [204, 204, 204]
    assert ExtractionRun.objects.filter(trigger="webhook").exists() and broker_queue() >= 1


def test_a_push_for_mail_already_read_or_a_mailbox_we_do_not_know_is_acknowledged_and_queues_nothing(
    client: Client,
    sandbox: SandboxClient,
    gmail: GmailBox,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    token = sandbox.pubsub_token(claims=good_claims(settings))
    with django_capture_on_commit_callbacks(execute=True):
        already_read = push(client, envelope(gmail.address, int(gmail.cursor)), token)
        unknown = push(client, envelope("stranger@example.com", 10**9), token)

    assert (already_read.status_code, unknown.status_code) == (204, 204)
    assert ExtractionRun.objects.count() == 0 and broker_queue() == 0


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"message": {}}', b'{"message": {"data": "!!!"}}', envelope("a@example.com", "x")],
)
def test_a_malformed_envelope_is_a_clear_400(
    body: bytes, client: Client, sandbox: SandboxClient, gmail: GmailBox, settings: Any
) -> None:
    token = sandbox.pubsub_token(claims=good_claims(settings))
    response = push(client, body, token)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_envelope"
    assert ExtractionRun.objects.count() == 0


def test_watch_at_connect_and_stop_at_disconnect(sandbox: SandboxClient, gmail: GmailBox, settings: Any) -> None:
    settings.PUSH_ENABLED = True
    channel = push_channel_open(integration=gmail.integration)

    assert channel is not None and channel.external_id == settings.GMAIL_PUSH_TOPIC
    watch = [r for r in sandbox.requests("gmail") if r["path"].endswith("/watch")]
    assert json.loads(watch[-1]["body"]) == {
        "topicName": settings.GMAIL_PUSH_TOPIC,
        "labelIds": ["INBOX", "SENT"],  # its Sent mail is read too (tests/integrations/test_push_sent.py)
        "labelFilterBehavior": "include",
    }
    assert 6.9 * 86400 < (channel.expires_at.timestamp() - time.time()) <= 7 * 86400

    push_channel_close(integration=gmail.integration)

    assert [r["path"] for r in sandbox.requests("gmail")][-1].endswith("/stop")
    assert not PushChannel.objects.exists()
