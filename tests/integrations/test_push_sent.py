"""Push for Sent mail: a mailbox whose Sent mail is read rings for it too (a Gmail watch of INBOX and SENT, a
Graph subscription on sentitems beside the inbox's), and a ring counts as covered only when every cursor of
the mailbox is past it (a Gmail push does not say which label changed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import AIConsent, User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.jobs import push_channels_maintain_job
from integrations.models import PushChannel, SyncCursor
from integrations.push import push_channel_close, push_channel_open, push_channel_secret
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, OutlookBox, connect_gmail, run_extraction
from tests.integrations.test_push_gmail import envelope, good_claims, push
from tests.integrations.test_push_outlook import change, post
from tests.mail import ask
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

SENT_RESOURCE = "me/mailFolders('sentitems')/messages"


def watched_labels(sandbox: SandboxClient) -> list[str]:
    watch = [r for r in sandbox.requests("gmail") if r["path"].endswith("/watch")]
    return list(json.loads(watch[-1]["body"])["labelIds"])


def test_a_gmail_watch_covers_sent_only_while_sent_mail_is_read(
    sandbox: SandboxClient, gmail: GmailBox, user: User, settings: Any
) -> None:
    settings.PUSH_ENABLED = True
    assert push_channel_open(integration=gmail.integration) is not None
    assert watched_labels(sandbox) == ["INBOX", "SENT"]
    assert sandbox.gmail_watch(gmail.address)["labelIds"] == ["INBOX", "SENT"]  # type: ignore[index]

    SyncCursor.objects.filter(purpose=SyncCursor.Purpose.SENT_MAIL).delete()  # as for a consent to version 2
    push_channel_open(integration=gmail.integration)
    assert watched_labels(sandbox) == ["INBOX"]


def test_a_gmail_ring_is_covered_only_when_both_cursors_are_past_it(
    client: Client,
    sandbox: SandboxClient,
    gmail: GmailBox,
    consenting_user: User,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    run_extraction(consenting_user)
    sandbox.fault("gmail", 503, route="labelId=SENT", times=None)
    sandbox.send_gmail(gmail.address, to=["sam@example.org"], body="I'll send the numbers on Monday.")
    gmail.deliver(ask(1))
    assert run_extraction(consenting_user).error_code == "partial"  # the inbox read past the sent mail; Sent not
    sandbox.clear_faults()
    history_id = int(gmail.history_id())
    assert int(gmail.cursor) == history_id and gmail.sent_cursor != f"sent:{history_id}"
    token = sandbox.pubsub_token(claims=good_claims(settings))

    with django_capture_on_commit_callbacks(execute=True):
        assert push(client, envelope(gmail.address, history_id), token).status_code == 204

    run = ExtractionRun.objects.latest("created_at")
    assert (run.trigger, run.status, broker_queue()) == ("webhook", "queued", 1)  # the Sent mail is owed
    ExtractionRun.objects.filter(pk=run.pk).delete()
    assert run_extraction(consenting_user).error_code == ""
    with django_capture_on_commit_callbacks(execute=True):
        assert push(client, envelope(gmail.address, history_id), token).status_code == 204
    assert not ExtractionRun.objects.filter(trigger="webhook").exists()  # both cursors past it now


def test_a_push_for_a_person_whose_consent_is_to_an_earlier_text_still_requests_a_run(
    client: Client,
    sandbox: SandboxClient,
    user: User,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    AIConsent.objects.create(user=user, text_version="2", granted_at=timezone.now())
    gmail = connect_gmail(sandbox, user, "person@example.com")
    gmail.deliver(ask(2))
    token = sandbox.pubsub_token(claims=good_claims(settings))

    with django_capture_on_commit_callbacks(execute=True):
        push(client, envelope(gmail.address, int(gmail.history_id())), token)

    assert ExtractionRun.objects.filter(user=user, trigger="webhook").count() == 1  # inbox-only runs go on


@pytest.fixture
def served(live_server: Any, settings: Any) -> str:
    settings.PUSH_ENABLED = True
    settings.PUSH_BASE_URL = live_server.url
    return str(live_server.url)


def test_graph_has_a_sentitems_subscription_beside_the_inbox_one_renewed_checked_and_deleted_with_it(
    served: str, sandbox: SandboxClient, outlook: OutlookBox, settings: Any
) -> None:
    settings.GRAPH_SUBSCRIPTION_MINUTES = 1
    channel = push_channel_open(integration=outlook.integration)
    assert channel is not None
    made = {s["resource"]: s for s in sandbox.graph_subscriptions()}
    assert set(made) == {"me/mailFolders('Inbox')/messages", SENT_RESOURCE}
    assert made[SENT_RESOURCE]["id"] == channel.sent_external_id != channel.external_id
    assert made[SENT_RESOURCE]["clientState"] == push_channel_secret(channel)
    assert made[SENT_RESOURCE]["notificationUrl"] == f"{served}/webhooks/outlook"

    settings.GRAPH_SUBSCRIPTION_MINUTES = 4200
    assert push_channels_maintain_job()["renewed"] == 1
    renewed = {s["id"]: s for s in sandbox.graph_subscriptions()}
    assert set(renewed) == {channel.external_id, channel.sent_external_id}  # renewed in place, both
    patched = [r["path"] for r in sandbox.requests("graph") if r["method"] == "PATCH"]
    assert len(patched) == 2 and any(channel.sent_external_id in p for p in patched)

    push_channel_close(integration=outlook.integration)
    assert sandbox.graph_subscriptions() == []


def test_mail_sent_from_outlook_rings_through_the_sentitems_subscription(
    served: str, sandbox: SandboxClient, outlook: OutlookBox
) -> None:
    push_channel_open(integration=outlook.integration)
    runs = ExtractionRun.objects.count()

    sandbox.send_outlook(outlook.address, to=["sam@example.org"], body="I'll send the slides tonight.")

    wait_for(lambda: ExtractionRun.objects.filter(trigger="webhook").count() == 1, timeout=10, what="a webhook run")
    assert ExtractionRun.objects.count() == runs + 1


def test_a_sentitems_notification_is_checked_against_the_sent_ledger(
    client: Client,
    outlook: OutlookBox,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
    served: str,
) -> None:
    channel = push_channel_open(integration=outlook.integration)
    assert channel is not None
    secret = push_channel_secret(channel)
    ProcessedEmail.objects.create(integration=outlook.integration, message_id="AAMk-read", outcome="no_tasks")

    with django_capture_on_commit_callbacks(execute=True):
        refused = post(client, "/webhooks/outlook", [change(channel.sent_external_id, "not-the-secret")])
        # Read as inbox mail only: as sent mail it is still owed.
        owed = post(client, "/webhooks/outlook", [change(channel.sent_external_id, secret, "AAMk-read")])
    assert refused.status_code == 403
    assert owed.status_code == 202 and ExtractionRun.objects.filter(trigger="webhook").count() == 1
    assert broker_queue() == 1

    ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)
    ProcessedEmail.objects.create(
        integration=outlook.integration, purpose="sent_mail", message_id="AAMk-read", outcome="no_tasks"
    )
    with django_capture_on_commit_callbacks(execute=True):
        post(client, "/webhooks/outlook", [change(channel.sent_external_id, secret, "AAMk-read")])
    assert ExtractionRun.objects.filter(trigger="webhook").count() == 1  # covered now
    assert PushChannel.objects.get().sent_external_id == channel.sent_external_id
