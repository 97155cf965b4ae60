"""Graph subscriptions and change notifications for Outlook mail (reference §B.5): the validation handshake on
create (and renew), the expiry rules, renew, delete and reauthorize, 404s in Graph's shape, notifications for
mail delivered or moved into the subscribed folder (clientState echoed, batched when several are pending),
lifecycle events, and the scripted delivery behaviours (drop, delay, jitter, hold and release, reset)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote_plus

import pytest
import requests
from django.conf import settings
from werkzeug.wrappers import Request, Response

from sandbox.client import SandboxClient
from tests.sandbox.test_graph_sandbox import ADDRESS, IMMUTABLE, session
from tests.sandbox.test_pubsub_push import Receiver, serving

GRAPH = settings.GRAPH_API_ENDPOINT
TOKEN_TEXT = "Validation: Testing client application reachability for subscription Request-Id: "


def echo(incoming: Request) -> Response | None:
    """A well-behaved endpoint's answer to Graph's validation request."""
    token = incoming.args.get("validationToken")
    return Response(token, status=200, content_type="text/plain; charset=utf-8") if token is not None else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An endpoint that passes Graph's validation and answers notifications 202, as Graph asks."""
    with serving(Receiver(status=202, handler=echo)) as target:
        yield target


class Graph:
    """A bare Graph client for /subscriptions: the test sees every status and body."""

    def __init__(self, token: str) -> None:
        self.http = session()
        self.token = token

    def call(self, method: str, path: str, *, prefer: str | None = None, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        if prefer:
            headers["Prefer"] = prefer
        return self.http.request(method, GRAPH + path, headers=headers, timeout=20, **kwargs)

    def subscribe(self, receiver: Receiver, *, prefer: str | None = None, **fields: Any) -> requests.Response:
        body = {
            "changeType": "created",
            "notificationUrl": f"{receiver.url}/notify",
            "resource": "me/mailFolders('Inbox')/messages",
            "expirationDateTime": in_minutes(60),
            "clientState": "secret-client-state",
            "latestSupportedTlsVersion": "v1_2",
            **fields,
        }
        return self.call("POST", "/subscriptions", json={k: v for k, v in body.items() if v is not None}, prefer=prefer)


@pytest.fixture
def graph(sandbox: SandboxClient) -> Graph:
    sandbox.create_outlook_mailbox(ADDRESS)
    return Graph(sandbox.issue_microsoft_token(ADDRESS)["access_token"])


def in_minutes(minutes: float) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def notifications(receiver: Receiver) -> list[dict[str, Any]]:
    """Every change notification received so far, across POSTs, in arrival order."""
    return [n for r in receiver.received if "validationToken" not in r.args for n in r.json()["value"]]


def deliver(sandbox: SandboxClient, number: int, **options: Any) -> dict[str, Any]:
    return sandbox.deliver_outlook(ADDRESS, subject=f"Message {number}", body=f"Body {number}.", **options)


def graph_error(response: requests.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "innerError"}
    return error


# The validation handshake -----------------------------------------------------------------------------
def test_create_validates_the_endpoint_then_answers_201_with_the_subscription(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    answer = graph.subscribe(receiver, lifecycleNotificationUrl=f"{receiver.url}/lifecycle")

    assert answer.status_code == 201, answer.text
    subscription = answer.json()
    notify, lifecycle = receiver.received
    assert (notify.path, lifecycle.path) == ("/notify", "/lifecycle")
    assert notify.headers["Content-Type"] == "text/plain; charset=utf-8" and notify.body == b""
    assert notify.args["validationToken"].startswith(TOKEN_TEXT)
    assert notify.query.startswith("validationToken=Validation%3a+Testing+client")  # encoded as Graph does
    assert unquote_plus(notify.query.partition("=")[2]) == notify.args["validationToken"]
    uuid_length = 36
    assert len(subscription["id"]) == uuid_length
    assert subscription["resource"] == "me/mailFolders('Inbox')/messages"
    assert subscription["changeType"] == "created"
    assert subscription["clientState"] == "secret-client-state"
    assert subscription["notificationUrl"] == f"{receiver.url}/notify"
    assert subscription["lifecycleNotificationUrl"] == f"{receiver.url}/lifecycle"
    assert subscription["latestSupportedTlsVersion"] == "v1_2"
    assert subscription["applicationId"] == settings.MICROSOFT_CLIENT_ID
    assert subscription["creatorId"] == sandbox.create_outlook_mailbox(ADDRESS)["id"]
    assert subscription["notificationContentType"] == "application/json"
    assert datetime.fromisoformat(subscription["expirationDateTime"]) > datetime.now(UTC) + timedelta(minutes=59)
    assert [s["id"] for s in graph.call("GET", "/subscriptions").json()["value"]] == [subscription["id"]]
    assert graph.call("GET", f"/subscriptions/{subscription['id']}").json()["clientState"] == "secret-client-state"
    assert [e["kind"] for e in sandbox.notifications("graph")] == ["validation", "validation"]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda token: Response("wrong", content_type="text/plain"), "Response must exactly match validationToken"),
        (lambda token: Response(quote(token), content_type="text/plain"), "must exactly match"),
        (lambda token: Response(token, content_type="application/json"), "must exactly match"),
        (lambda token: Response(token, status=403, content_type="text/plain"), "HTTP status code is 'Forbidden'"),
    ],
    ids=["wrong-echo", "encoded-echo", "not-text-plain", "forbidden"],
)
def test_a_bad_validation_answer_makes_create_a_400(
    graph: Graph, receiver: Receiver, answer: Any, message: str
) -> None:
    receiver.handler = lambda incoming: answer(incoming.args["validationToken"])
    error = graph_error(graph.subscribe(receiver), 400)
    assert error["code"] == "ValidationError"
    assert message in error["message"]
    assert graph.call("GET", "/subscriptions").json()["value"] == []


def test_a_slow_validation_answer_times_out(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    sandbox.push_settings(graph_validation_timeout_ms=200)

    def slow(incoming: Request) -> Response | None:
        time.sleep(0.5)
        return echo(incoming)

    receiver.handler = slow
    error = graph_error(graph.subscribe(receiver), 400)
    assert error["message"] == "Subscription validation request timed out."


def test_the_lifecycle_url_is_validated_too(graph: Graph, receiver: Receiver) -> None:
    receiver.handler = lambda incoming: echo(incoming) if incoming.path == "/notify" else Response(status=404)
    error = graph_error(graph.subscribe(receiver, lifecycleNotificationUrl=f"{receiver.url}/lifecycle"), 400)
    assert "'NotFound'" in error["message"]


# Create, renew, delete ------------------------------------------------------------------------------------------
def test_expiration_is_required_in_the_future_and_at_most_10070_minutes_ahead(graph: Graph, receiver: Receiver) -> None:
    assert graph_error(graph.subscribe(receiver, expirationDateTime=None), 400)["message"].startswith(
        "expirationDateTime is a required property"
    )
    assert graph_error(graph.subscribe(receiver, expirationDateTime=in_minutes(-1)), 400)["code"] == "ExtensionError"
    too_far = graph_error(graph.subscribe(receiver, expirationDateTime=in_minutes(10_071)), 400)
    assert too_far == {**too_far, "code": "ExtensionError"}
    assert too_far["message"] == "Subscription expiration can only be 10070 minutes in the future."
    assert graph.subscribe(receiver, expirationDateTime=in_minutes(10_060)).status_code == 201


def test_a_client_state_over_128_characters_or_a_public_http_url_is_refused(graph: Graph, receiver: Receiver) -> None:
    assert graph.subscribe(receiver, clientState="x" * 128).status_code == 201
    assert graph_error(graph.subscribe(receiver, clientState="x" * 129), 400)["message"].startswith("clientState")
    plain = graph_error(graph.subscribe(receiver, notificationUrl="http://tasklift.test/notify"), 400)
    assert "https" in plain["message"]


def test_renew_moves_the_expiry_within_the_same_limit(graph: Graph, receiver: Receiver) -> None:
    subscription_id = graph.subscribe(receiver).json()["id"]
    later = in_minutes(3 * 24 * 60)

    renewed = graph.call("PATCH", f"/subscriptions/{subscription_id}", json={"expirationDateTime": later})
    too_far = graph.call("PATCH", f"/subscriptions/{subscription_id}", json={"expirationDateTime": in_minutes(10_100)})

    assert renewed.status_code == 200, renewed.text
    assert datetime.fromisoformat(renewed.json()["expirationDateTime"]) == datetime.fromisoformat(later)
    assert graph_error(too_far, 400)["code"] == "ExtensionError"
    assert sum(1 for r in receiver.received if "validationToken" in r.args) == 2  # renewing validates again


def test_delete_then_any_call_on_it_is_a_graph_404(graph: Graph, receiver: Receiver) -> None:
    subscription_id = graph.subscribe(receiver).json()["id"]

    assert graph.call("DELETE", f"/subscriptions/{subscription_id}").status_code == 204
    for method, path in [
        ("GET", f"/subscriptions/{subscription_id}"),
        ("DELETE", f"/subscriptions/{subscription_id}"),
        ("PATCH", f"/subscriptions/{subscription_id}"),
        ("POST", f"/subscriptions/{subscription_id}/reauthorize"),
        ("GET", "/subscriptions/00000000-0000-0000-0000-000000000000"),
    ]:
        error = graph_error(graph.call(method, path, json={"expirationDateTime": in_minutes(60)}), 404)
        assert error["code"] == "ResourceNotFound"


def test_another_mailbox_does_not_see_the_subscription(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    subscription_id = graph.subscribe(receiver).json()["id"]
    sandbox.create_outlook_mailbox("other@example.com")
    other = Graph(sandbox.issue_microsoft_token("other@example.com")["access_token"])

    assert other.call("GET", "/subscriptions").json()["value"] == []
    assert other.call("GET", f"/subscriptions/{subscription_id}").status_code == 404


# Notifications -----------------------------------------------------------------------------------------------
def test_mail_delivered_into_the_inbox_is_notified_with_the_client_state(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    subscription = graph.subscribe(receiver).json()
    receiver.received.clear()

    delivered = deliver(sandbox, 1)
    (post,) = receiver.wait_for(1)
    sandbox.wait_notifications_idle()

    assert post.path == "/notify" and post.headers["Content-Type"].startswith("application/json")
    (notification,) = post.json()["value"]
    rest_id = delivered["rest_id"]
    assert notification["subscriptionId"] == subscription["id"]
    assert notification["clientState"] == "secret-client-state"
    assert notification["changeType"] == "created"
    assert notification["tenantId"]
    assert notification["resource"].endswith(f"/messages/{rest_id}")
    expires = datetime.fromisoformat(notification["subscriptionExpirationDateTime"])
    assert abs(expires - datetime.fromisoformat(subscription["expirationDateTime"])) < timedelta(milliseconds=1)
    data = notification["resourceData"]
    assert data["@odata.type"] == "#Microsoft.Graph.Message"
    assert data["id"] == rest_id and data["@odata.id"].endswith(f"/Messages/{rest_id}")
    assert data["@odata.etag"].startswith('W/"')
    assert [(e["kind"], e["status"]) for e in sandbox.notifications("graph")][-1] == ("notification", 202)


def test_ids_are_immutable_when_the_subscription_asked_for_them(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    graph.subscribe(receiver, prefer=IMMUTABLE)
    delivered = deliver(sandbox, 1)
    sandbox.wait_notifications_idle()
    assert [n["resourceData"]["id"] for n in notifications(receiver)] == [delivered["id"]]


def test_a_move_into_the_inbox_is_created_and_other_folders_are_not_heard(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    graph.subscribe(receiver, changeType="created,deleted", prefer=IMMUTABLE)
    archived = deliver(sandbox, 1, folder="archive")
    sandbox.wait_notifications_idle()
    assert notifications(receiver) == []

    sandbox.move_outlook(ADDRESS, [archived["id"]], "inbox")
    sandbox.move_outlook(ADDRESS, [archived["id"]], "archive")
    sandbox.wait_notifications_idle()

    assert [(n["changeType"], n["resourceData"]["id"]) for n in notifications(receiver)] == [
        ("created", archived["id"]),
        ("deleted", archived["id"]),
    ]


def test_updates_and_deletions_are_notified_only_when_subscribed(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    graph.subscribe(receiver, changeType="created")
    graph.subscribe(receiver, changeType="updated,deleted", notificationUrl=f"{receiver.url}/changes")
    delivered = deliver(sandbox, 1)
    sandbox.mark_outlook_read(ADDRESS, [delivered["id"]])
    sandbox.delete_outlook(ADDRESS, [delivered["id"]])
    sandbox.wait_notifications_idle()

    by_path = [(r.path, n["changeType"]) for r in receiver.received if r.body for n in r.json()["value"]]
    assert sorted(by_path) == [("/changes", "deleted"), ("/changes", "updated"), ("/notify", "created")]


def test_me_messages_hears_every_folder(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver, resource="me/messages", changeType="created,updated")
    archived = deliver(sandbox, 1, folder="archive")
    sandbox.move_outlook(ADDRESS, [archived["id"]], "inbox")
    sandbox.wait_notifications_idle()
    assert [n["changeType"] for n in notifications(receiver)] == ["created", "updated"]


def test_an_expired_subscription_stops_notifying_and_is_gone(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    subscription_id = graph.subscribe(receiver, expirationDateTime=in_minutes(1 / 60)).json()["id"]
    time.sleep(1.1)  # past its expiry a second away: time itself is what is tested
    deliver(sandbox, 1)
    sandbox.wait_notifications_idle()

    assert notifications(receiver) == []
    assert graph_error(graph.call("GET", f"/subscriptions/{subscription_id}"), 404)["code"] == "ResourceNotFound"


def test_a_notification_not_acknowledged_is_retried(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver)
    receiver.statuses = [503]
    deliver(sandbox, 1)
    sandbox.wait_notifications_idle()

    attempts = [(e["attempt"], e["status"]) for e in sandbox.notifications("graph") if e["kind"] == "notification"]
    assert attempts == [(1, 503), (2, 202)]
    assert len(notifications(receiver)) == 2


# Lifecycle events ----------------------------------------------------------------------------------------------
def test_reauthorization_required_pauses_notifications_until_reauthorized(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    subscription = graph.subscribe(receiver, lifecycleNotificationUrl=f"{receiver.url}/lifecycle").json()
    sandbox.graph_lifecycle(subscription["id"], "reauthorizationRequired")
    deliver(sandbox, 1)
    sandbox.wait_notifications_idle()

    (event,) = [r.json()["value"][0] for r in receiver.received if r.path == "/lifecycle" and r.body]
    assert event == {
        "subscriptionId": subscription["id"],
        "subscriptionExpirationDateTime": event["subscriptionExpirationDateTime"],
        "tenantId": event["tenantId"],
        "clientState": "secret-client-state",
        "lifecycleEvent": "reauthorizationRequired",
    }
    assert notifications(receiver) == [event]  # the lifecycle event, and no change notification

    assert graph.call("POST", f"/subscriptions/{subscription['id']}/reauthorize").status_code == 204
    deliver(sandbox, 2)
    sandbox.wait_notifications_idle()
    assert notifications(receiver)[-1]["changeType"] == "created"


def test_subscription_removed_deletes_it_and_goes_to_the_notification_url_without_a_lifecycle_url(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    subscription_id = graph.subscribe(receiver).json()["id"]
    sandbox.graph_lifecycle(subscription_id, "subscriptionRemoved")
    sandbox.wait_notifications_idle()

    assert [n["lifecycleEvent"] for n in notifications(receiver)] == ["subscriptionRemoved"]
    assert receiver.received[-1].path == "/notify"
    assert graph.call("GET", f"/subscriptions/{subscription_id}").status_code == 404
    assert sandbox.graph_subscriptions() == []


def test_missed_only_tells(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    subscription_id = graph.subscribe(receiver).json()["id"]
    sandbox.graph_lifecycle(subscription_id, "missed")
    sandbox.wait_notifications_idle()

    assert [n["lifecycleEvent"] for n in notifications(receiver)] == ["missed"]
    (listed,) = sandbox.graph_subscriptions()
    assert listed["address"] == ADDRESS and listed["paused"] is False and listed["expired"] is False


# Delivery behaviours --------------------------------------------------------------------------------------------
def test_held_notifications_are_released_newest_first_in_one_post(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    graph.subscribe(receiver, prefer=IMMUTABLE)
    receiver.received.clear()
    sandbox.push_behaviour("graph", hold=True)
    ids = [deliver(sandbox, n)["id"] for n in range(3)]
    assert sandbox.notifications_pending() == {"pending": 0, "held": 3}

    assert sandbox.push_release("graph") == 3
    (post,) = receiver.wait_for(1)
    assert [n["resourceData"]["id"] for n in post.json()["value"]] == ids[::-1]


def test_drop_sends_nothing_and_logs_the_drop(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver)
    sandbox.push_behaviour("graph", drop=True)
    deliver(sandbox, 1)
    sandbox.wait_notifications_idle()

    assert notifications(receiver) == []
    assert sandbox.notifications("graph")[-1]["dropped"] == "behaviour"


def test_drop_rate_drops_the_same_ones_for_the_same_seed(
    sandbox: SandboxClient, graph: Graph, receiver: Receiver
) -> None:
    graph.subscribe(receiver)
    patterns = []
    for _ in range(2):
        sandbox.clear_notifications()
        sandbox.push_behaviour("graph", drop_rate=0.5, seed=7)
        ids = [deliver(sandbox, number)["rest_id"] for number in range(10)]
        sandbox.wait_notifications_idle()
        dropped = {
            n["resourceData"]["id"] for e in sandbox.notifications("graph") if e["dropped"] for n in e["body"]["value"]
        }
        patterns.append([i in dropped for i in ids])
    assert patterns[0] == patterns[1] and 0 < sum(patterns[0]) < 10


def test_duplicate_and_delay(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver)
    sandbox.push_behaviour("graph", duplicate=1, delay_ms=300)
    started = time.monotonic()
    deliver(sandbox, 1)
    sandbox.wait_notifications_idle()

    assert time.monotonic() - started >= 0.3
    first, second = notifications(receiver)
    assert first == second


def test_jitter_reorders(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver, prefer=IMMUTABLE)
    sandbox.push_behaviour("graph", jitter_ms=400, seed=3)
    ids = [deliver(sandbox, n)["id"] for n in range(6)]
    sandbox.wait_notifications_idle()

    arrived = [n["resourceData"]["id"] for n in notifications(receiver)]
    assert sorted(arrived) == sorted(ids) and arrived != ids


def test_reset_drops_held_and_delayed_notifications(sandbox: SandboxClient, graph: Graph, receiver: Receiver) -> None:
    graph.subscribe(receiver)
    sandbox.push_behaviour("graph", hold=True)
    deliver(sandbox, 1)
    sandbox.push_behaviour("graph", delay_ms=200)
    deliver(sandbox, 2)
    assert sandbox.notifications_pending() == {"pending": 1, "held": 1}

    sandbox.reset()
    assert sandbox.notifications_pending() == {"pending": 0, "held": 0}
    assert sandbox.push_release() == 0
    time.sleep(0.4)  # past the 200 ms delay: a notification that never comes is seen only over time
    assert notifications(receiver) == []
