"""The Outlook doorbell: Graph change and lifecycle notifications at /webhooks/outlook(/lifecycle).

The validation handshake echoes the decoded token as text/plain; a notification counts only with its
subscription's clientState (compared in constant time, stored encrypted); lifecycle events renew, remake or
read; a subscription is made at connect, renewed by beat before it expires and deleted at disconnect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from config.crypto import encrypt_json
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.jobs import push_channel_open_job, push_channel_renew_job, push_channels_maintain_job
from integrations.models import PushChannel
from integrations.push import push_channel_close, push_channel_open
from sandbox.client import SandboxClient
from tests.conftest import OutlookBox
from tests.mail import ask
from tests.waiting import wait_for

SECRET = "s3cret-client-state-" + "x" * 40


def channel_for(box: OutlookBox, subscription_id: str = "sub-1") -> PushChannel:
    return PushChannel.objects.create(
        integration=box.integration,
        external_id=subscription_id,
        secret_encrypted=encrypt_json({"client_state": SECRET}),
        expires_at=timezone.now() + timedelta(days=2),
    )


def change(subscription_id: str, client_state: str | None, message_id: str = "AAMk-new") -> dict[str, Any]:
    note: dict[str, Any] = {
        "id": "lsgTZMr9KwAAA",
        "subscriptionId": subscription_id,
        "subscriptionExpirationDateTime": "2026-12-02T10:00:00Z",
        "changeType": "created",
        "resource": f"Users/u@t/Messages/{message_id}",
        "tenantId": "tenant",
        "resourceData": {"@odata.type": "#Microsoft.Graph.Message", "id": message_id},
    }
    if client_state is not None:
        note["clientState"] = client_state
    return note


def post(client: Client, path: str, notes: list[dict[str, Any]]) -> Any:
    return client.post(path, data=json.dumps({"value": notes}), content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/webhooks/outlook", "/webhooks/outlook/lifecycle"])
def test_the_validation_handshake_echoes_the_decoded_token_as_plain_text(client: Client, path: str) -> None:
    response = client.post(
        f"{path}?validationToken=Validation%3A%20Testing%20client%2Bapp%20%26%20more",
        data="",
        content_type="text/plain",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == "Validation: Testing client+app & more"


@pytest.mark.django_db
@pytest.mark.parametrize("offered", [None, "", "wrong", SECRET[:-1], SECRET + "x", SECRET.upper()])
def test_a_notification_without_the_right_client_state_is_refused_and_queues_nothing(
    offered: str | None,
    client: Client,
    outlook: OutlookBox,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    channel_for(outlook)
    before = ExtractionRun.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "/webhooks/outlook", [change("sub-1", offered)])

    assert response.status_code == 403
    assert ExtractionRun.objects.count() == before and broker_queue() == 0


@pytest.mark.django_db
def test_a_genuine_notification_requests_one_run_and_one_for_mail_already_read_none(
    client: Client,
    outlook: OutlookBox,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    channel_for(outlook)
    before = ExtractionRun.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "/webhooks/outlook", [change("sub-1", SECRET), change("sub-1", SECRET, "AAMk-2")])
    assert response.status_code == 202
    run = ExtractionRun.objects.order_by("-pk").first()
    assert ExtractionRun.objects.count() == before + 1 and run is not None and run.trigger == "webhook"
    assert broker_queue() == 1

    ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)
    ProcessedEmail.objects.create(integration=outlook.integration, message_id="AAMk-done", outcome="no_tasks", run=run)
    with django_capture_on_commit_callbacks(execute=True):
        again = post(client, "/webhooks/outlook", [change("sub-1", SECRET, "AAMk-done")])
        unknown = post(client, "/webhooks/outlook", [change("sub-unknown", "whatever")])
    assert (again.status_code, unknown.status_code) == (202, 202)
    assert ExtractionRun.objects.count() == before + 1 and broker_queue() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("body", [b"", b"not json", b"{}", b'{"value": {}}', b'{"value": [1]}'])
def test_a_malformed_notification_is_a_clear_400(body: bytes, client: Client) -> None:
    response = client.post("/webhooks/outlook", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_notification"


@pytest.mark.django_db
def test_the_client_state_is_stored_encrypted(outlook: OutlookBox) -> None:
    channel_for(outlook)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret_encrypted FROM integrations_pushchannel")
        (stored,) = cursor.fetchone()
    assert SECRET not in stored and stored


# With the site served, so that the sandbox's Graph can reach it ------------------------------------------


@pytest.fixture
def served(live_server: Any, settings: Any) -> str:
    settings.PUSH_ENABLED = True
    settings.PUSH_BASE_URL = live_server.url
    return str(live_server.url)


def inbox_subscriptions(sandbox: SandboxClient) -> list[dict[str, Any]]:
    """The inbox's subscriptions (a mailbox whose Sent mail is read has one on sentitems too: test_push_sent.py)."""
    return [s for s in sandbox.graph_subscriptions() if "sentitems" not in s["resource"]]


def test_a_subscription_is_made_at_connect_renewed_by_beat_and_deleted_at_disconnect(
    served: str, sandbox: SandboxClient, outlook: OutlookBox, settings: Any
) -> None:
    settings.GRAPH_SUBSCRIPTION_MINUTES = 1
    assert push_channel_open_job(outlook.integration.pk) is True
    channel = PushChannel.objects.get()
    (made,) = inbox_subscriptions(sandbox)
    assert made["id"] == channel.external_id
    assert made["notificationUrl"] == f"{served}/webhooks/outlook"
    assert made["lifecycleNotificationUrl"] == f"{served}/webhooks/outlook/lifecycle"
    assert made["resource"] == "me/mailFolders('Inbox')/messages" and made["changeType"] == "created"
    first_expiry = channel.expires_at

    assert push_channels_maintain_job()["renewed"] == 0  # a minute left of a minute: not yet half gone
    settings.GRAPH_SUBSCRIPTION_MINUTES = 4200  # the normal life: the one-minute subscription is about to expire
    assert push_channels_maintain_job()["renewed"] == 1

    channel.refresh_from_db()
    assert channel.expires_at - first_expiry > timedelta(days=2)
    (renewed,) = inbox_subscriptions(sandbox)
    assert renewed["id"] == channel.external_id  # renewed in place, not made again
    assert any(r["method"] == "PATCH" for r in sandbox.requests("graph"))

    push_channel_close(integration=outlook.integration)
    assert sandbox.graph_subscriptions() == [] and not PushChannel.objects.exists()


def test_lifecycle_events_renew_remake_and_read(
    served: str,
    sandbox: SandboxClient,
    outlook: OutlookBox,
    broker_queue: Callable[[], int],
) -> None:
    channel = push_channel_open(integration=outlook.integration)
    assert channel is not None
    runs = ExtractionRun.objects.count()

    sandbox.graph_lifecycle(channel.external_id, "missed")
    wait_for(lambda: ExtractionRun.objects.count() == runs + 1, timeout=10, what="a run")  # missed: read the mailbox

    sandbox.graph_lifecycle(channel.external_id, "reauthorizationRequired")
    wait_for(lambda: broker_queue() >= 2, timeout=10, what="two jobs queued")  # the run's job, then the renewal's
    assert push_channel_renew_job(outlook.integration.pk) is True
    assert any(r["method"] == "PATCH" for r in sandbox.requests("graph"))

    ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)
    sandbox.graph_lifecycle(channel.external_id, "subscriptionRemoved")
    # removed: read the mailbox, and make it again
    wait_for(lambda: ExtractionRun.objects.count() == runs + 2, timeout=10, what="a second run")
    assert inbox_subscriptions(sandbox) == []
    assert push_channel_open_job(outlook.integration.pk) is True
    (remade,) = inbox_subscriptions(sandbox)
    assert remade["id"] != channel.external_id
    assert PushChannel.objects.get().external_id == remade["id"]


def test_a_new_message_rings_the_doorbell(served: str, sandbox: SandboxClient, outlook: OutlookBox) -> None:
    push_channel_open(integration=outlook.integration)
    runs = ExtractionRun.objects.count()

    outlook.deliver(ask(3))

    wait_for(lambda: ExtractionRun.objects.filter(trigger="webhook").count() == 1, timeout=10, what="a webhook run")
    assert ExtractionRun.objects.count() == runs + 1
