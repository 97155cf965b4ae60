"""Reminders by Web Push (issue 34): a browser's subscription sent from Settings, the reminder encrypted to its
keys and signed with the server's VAPID key (pywebpush), and the sandbox's push service checking the VAPID JWT
and decrypting the payload (http_ece) as a browser would; a subscription the push service answers 404 or 410
for is dropped; an endpoint on no push service is refused (this server would POST to it)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from reminders.models import PushSubscription
from reminders.push import vapid_public_key
from reminders.ring import reminders_send_due
from sandbox.client import SandboxClient
from tasks.services import task_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DAY = date(2026, 12, 7)
RINGS = datetime(2026, 12, 7, 13, 30, tzinfo=UTC)  # 30 minutes before 15:00 in Berlin


@pytest.fixture
def person(client: Client) -> User:
    user = UserFactory(timezone="Europe/Berlin")
    client.force_login(user)
    return user


def _subscribe(client: Client, sandbox: SandboxClient, key: str | None = None) -> dict[str, Any]:
    """A browser's pushManager.subscribe() (the sandbox's push service), sent as the Settings page's script does."""
    browser = sandbox.webpush_subscribe(application_server_key=key or vapid_public_key())
    body = {"endpoint": browser["endpoint"], "keys": browser["keys"], "label": "Chromium on Linux"}
    answer = client.post("/settings/push/subscribe", body, content_type="application/json")
    assert answer.status_code == 201, answer.content
    return browser


def _call_bob(person: User) -> Any:
    return task_create(user=person, title="Call Bob", due_date=DAY, due_time=time(15, 0), reminder=30)


def test_web_push_the_push_service_decrypts_the_reminder_a_browser_would_show(
    client: Client, person: User, sandbox: SandboxClient
) -> None:
    browser = _subscribe(client, sandbox)
    stored = PushSubscription.objects.get(user=person)
    assert browser["keys"]["auth"] not in stored.keys_encrypted  # encrypted at rest
    task = _call_bob(person)

    result = reminders_send_due(now=RINGS)

    assert (result["emailed"], result["pushed"]) == (1, 1)
    [message] = sandbox.webpush_messages()
    assert message["subscription"] == browser["id"]
    assert message["payload"]["title"] == "Call Bob"
    assert message["payload"]["body"].startswith("Due at 15:00")
    assert message["payload"]["url"].endswith(f"/tasks/{task.pk}")
    assert message["urgency"] == "high" and message["ttl"] > 0
    assert message["vapid"]["aud"] == sandbox.base_url and message["vapid"]["sub"].startswith("mailto:")
    stored.refresh_from_db()
    assert stored.last_pushed_at is not None
    assert reminders_send_due(now=RINGS)["pushed"] == 0  # once
    assert len(sandbox.webpush_messages()) == 1


@pytest.mark.parametrize("status", [410, 404])
def test_web_push_a_subscription_the_push_service_let_go_is_dropped(
    client: Client, person: User, sandbox: SandboxClient, status: int
) -> None:
    browser = _subscribe(client, sandbox)
    sandbox.webpush_gone(browser["id"], status)
    _call_bob(person)
    result = reminders_send_due(now=RINGS)
    assert (result["emailed"], result["pushed"]) == (1, 0)  # the email stands
    assert not PushSubscription.objects.filter(user=person).exists()
    assert sandbox.webpush_messages() == []


def test_web_push_a_key_the_subscription_was_not_made_with_is_refused_and_the_subscription_kept(
    client: Client, person: User, sandbox: SandboxClient
) -> None:
    other_key = "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U"
    _subscribe(client, sandbox, key=other_key)  # a subscription made with another server's key
    _call_bob(person)
    result = reminders_send_due(now=RINGS)
    assert (result["emailed"], result["pushed"]) == (1, 0)
    assert PushSubscription.objects.filter(user=person).exists()  # a 403 is ours to fix, not the browser's
    assert [r["status"] for r in sandbox.requests("webpush")] == [403]


@pytest.mark.parametrize(
    ("endpoint", "p256dh", "auth"),
    [
        ("http://169.254.169.254/latest/meta-data", None, None),  # no push service: this server would POST there
        ("https://evil.example/push/1", None, None),
        ("https://fcm.googleapis.com.evil.example/x", None, None),
        (None, "not-a-key", None),
        (None, None, "short"),
    ],
)
def test_web_push_a_subscription_on_no_push_service_or_with_bad_keys_is_refused(
    client: Client, person: User, sandbox: SandboxClient, endpoint: str | None, p256dh: str | None, auth: str | None
) -> None:
    browser = sandbox.webpush_subscribe(application_server_key=vapid_public_key())
    body = {
        "endpoint": endpoint or browser["endpoint"],
        "keys": {"p256dh": p256dh or browser["keys"]["p256dh"], "auth": auth or browser["keys"]["auth"]},
    }
    answer = client.post("/settings/push/subscribe", body, content_type="application/json")
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_subscription"
    assert not PushSubscription.objects.exists()
    assert client.post("/settings/push/subscribe", "{", content_type="application/json").status_code == 400


def test_web_push_settings_list_turns_a_browser_off_and_the_service_worker_is_served(
    client: Client, person: User, sandbox: SandboxClient
) -> None:
    browser = _subscribe(client, sandbox)
    page = client.get("/settings/").content.decode()
    assert 'id="push-settings"' in page and f'data-vapid-key="{vapid_public_key()}"' in page
    assert "Chromium on Linux" in page
    worker = client.get("/sw.js")
    assert worker.status_code == 200 and worker["Content-Type"].startswith("text/javascript")
    assert b'addEventListener("push"' in worker.content
    off = client.post("/settings/push/unsubscribe", {"endpoint": browser["endpoint"]}, content_type="application/json")
    assert off.json() == {"removed": True}
    _subscribe(client, sandbox)
    subscription = PushSubscription.objects.get(user=person)
    someone = UserFactory()
    other = Client()
    other.force_login(someone)
    assert other.post(f"/settings/push/{subscription.pk}/remove").status_code == 302
    assert PushSubscription.objects.filter(pk=subscription.pk).exists()  # not theirs
    client.post(f"/settings/push/{subscription.pk}/remove")
    assert not PushSubscription.objects.exists()
