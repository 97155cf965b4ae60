"""Gmail push through the sandbox's Pub/Sub (reference §A.8, §F): a change a watch asks for reaches a push
endpoint as the wrapped envelope with a Google-signed OIDC token that google-auth verifies against the sandbox's
certificates; nothing is pushed without a live watch; one push per second per user; redelivery until
acknowledged; tokens built to order; and the scripted delivery behaviours (duplicate, hold and release, reset)."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import google.auth.exceptions
import google.auth.jwt
import google.auth.transport.requests
import pytest
import requests
from google.oauth2 import id_token
from googleapiclient.errors import HttpError
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from sandbox.client import SandboxClient, SandboxControlError
from tests.sandbox.test_gmail_sandbox import gmail, message

ADDRESS = "grace@example.com"
TOPIC = "projects/tasklift-sandbox/topics/gmail"
SERVICE_ACCOUNT = "gmail-push@tasklift-sandbox.iam.gserviceaccount.com"


# A push endpoint ------------------------------------------------------------------------------------------
@dataclass
class Received:
    path: str
    query: str  # as it came over the wire, still encoded
    args: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A loopback HTTP endpoint that records every request and answers as the test scripts it: `statuses`
    are used up one per request (then `status`), `handler` may answer a request itself."""

    url: str = ""
    status: int = 204
    statuses: list[int] = field(default_factory=list)
    handler: Callable[[Request], Response | None] | None = None
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self, environ: dict[str, Any], start_response: Any) -> Any:
        incoming = Request(environ)
        with self.lock:
            self.received.append(
                Received(
                    incoming.path,
                    environ.get("QUERY_STRING", ""),
                    dict(incoming.args),
                    dict(incoming.headers),
                    incoming.get_data(),
                )
            )
            status = self.statuses.pop(0) if self.statuses else self.status
        answer = self.handler(incoming) if self.handler else None
        return (answer or Response(status=status))(environ, start_response)

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} requests arrived, {count} expected"
            time.sleep(0.01)
        return list(self.received)


@contextlib.contextmanager
def serving(target: Receiver) -> Iterator[Receiver]:
    """Serve `target` on a free loopback port for the duration."""
    server = make_server("127.0.0.1", 0, target.app, threaded=True)
    target.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving(Receiver()) as target:
        yield target


# Helpers ---------------------------------------------------------------------------------------------------
@pytest.fixture
def watched(sandbox: SandboxClient, receiver: Receiver) -> Any:
    """A mailbox whose INBOX is watched, with a push subscription on the watch's topic; returns its Gmail
    client."""
    sandbox.create_mailbox(ADDRESS)
    sandbox.pubsub_subscribe(TOPIC, f"{receiver.url}/push", SERVICE_ACCOUNT)
    client = gmail(sandbox.issue_token(ADDRESS)["access_token"])
    client.users().watch(userId="me", body={"topicName": TOPIC, "labelIds": ["INBOX"]}).execute()
    return client


def google_request() -> google.auth.transport.requests.Request:
    session = requests.Session()
    session.trust_env = False
    return google.auth.transport.requests.Request(session=session)


def bearer(received: Received) -> str:
    scheme, _, token = received.headers["Authorization"].partition(" ")
    assert scheme == "Bearer"
    return token


def push_data(received: Received) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(base64.b64decode(received.json()["message"]["data"]))
    return decoded


def history_id(sandbox: SandboxClient) -> int:
    return int(sandbox.call("GET", "/gmail/messages", params={"address": ADDRESS})["historyId"])


# The push -------------------------------------------------------------------------------------------------
def test_a_delivery_into_a_watched_inbox_pushes_an_envelope_whose_token_google_auth_verifies(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    sandbox.deliver(ADDRESS, message(1))
    (push,) = receiver.wait_for(1)
    sandbox.wait_notifications_idle()

    assert push.path == "/push"
    assert push.headers["Content-Type"].startswith("application/json")
    claims = id_token.verify_token(
        bearer(push), google_request(), audience=f"{receiver.url}/push", certs_url=sandbox.pubsub_certs_url
    )
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["email"] == SERVICE_ACCOUNT
    assert claims["email_verified"] is True
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["sub"] == claims["azp"] and claims["sub"].isdigit()
    certs = sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).json()
    assert google.auth.jwt.decode_header(bearer(push)) == {"alg": "RS256", "kid": next(iter(certs)), "typ": "JWT"}

    envelope = push.json()
    assert set(envelope) == {"message", "subscription"}
    assert envelope["subscription"] == sandbox.pubsub_subscriptions()[0]["name"]
    assert envelope["subscription"].startswith("projects/tasklift-sandbox/subscriptions/")
    sent = envelope["message"]
    assert sent["messageId"] == sent["message_id"] and sent["messageId"].isdigit()
    assert sent["publishTime"] == sent["publish_time"]
    datetime.fromisoformat(sent["publishTime"])
    assert sent["attributes"] == {}
    assert push_data(push) == {"emailAddress": ADDRESS, "historyId": history_id(sandbox)}
    assert [entry["status"] for entry in sandbox.notifications("pubsub")] == [204]


def test_the_token_carries_the_configured_audience_and_fails_any_other(
    sandbox: SandboxClient, receiver: Receiver
) -> None:
    sandbox.create_mailbox(ADDRESS)
    sandbox.pubsub_subscribe(TOPIC, f"{receiver.url}/push", SERVICE_ACCOUNT, audience="https://tasklift.test/push")
    client = gmail(sandbox.issue_token(ADDRESS)["access_token"])
    client.users().watch(userId="me", body={"topicName": TOPIC}).execute()  # every change
    sandbox.deliver(ADDRESS, message(1))
    (push,) = receiver.wait_for(1)

    token = bearer(push)
    certs_url = sandbox.pubsub_certs_url
    assert id_token.verify_token(token, google_request(), "https://tasklift.test/push", certs_url)["aud"]
    with pytest.raises(ValueError, match="audience"):
        id_token.verify_token(token, google_request(), audience=f"{receiver.url}/push", certs_url=certs_url)


def test_a_label_entering_the_watched_labels_pushes_and_other_changes_do_not(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    sandbox.push_settings(gmail_rate_limit=False)
    spam = sandbox.deliver(ADDRESS, message(1), labels=["SPAM"])["id"]
    sandbox.modify_labels(ADDRESS, spam, remove=["UNREAD"])
    sandbox.create_mailbox("other@example.com")
    sandbox.deliver("other@example.com", message(2))  # a mailbox nobody watches
    sandbox.wait_notifications_idle()
    assert receiver.received == []

    moved = sandbox.modify_labels(ADDRESS, spam, add=["INBOX"], remove=["SPAM"])  # "Not spam"
    (push,) = receiver.wait_for(1)
    assert push_data(push)["historyId"] == int(moved["historyId"])


def test_an_exclude_watch_pushes_for_mail_outside_its_labels(sandbox: SandboxClient, receiver: Receiver) -> None:
    sandbox.create_mailbox(ADDRESS)
    sandbox.push_settings(gmail_rate_limit=False)
    sandbox.pubsub_subscribe(TOPIC, f"{receiver.url}/push", SERVICE_ACCOUNT)
    body = {"topicName": TOPIC, "labelIds": ["SPAM"], "labelFilterBehavior": "EXCLUDE"}
    gmail(sandbox.issue_token(ADDRESS)["access_token"]).users().watch(userId="me", body=body).execute()

    sandbox.deliver(ADDRESS, message(1), labels=["SPAM"])
    inbox = sandbox.deliver(ADDRESS, message(2))
    sandbox.wait_notifications_idle()

    assert [push_data(p)["historyId"] for p in receiver.received] == [int(inbox["historyId"])]
    watch = sandbox.gmail_watch(ADDRESS)
    assert watch is not None and watch["labelFilterBehavior"] == "exclude" and watch["labelIds"] == ["SPAM"]


def test_a_watch_with_an_unknown_filter_behaviour_is_a_400(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox(ADDRESS)
    users = gmail(sandbox.issue_token(ADDRESS)["access_token"]).users()
    with pytest.raises(HttpError) as error:
        users.watch(userId="me", body={"topicName": TOPIC, "labelFilterBehavior": "sometimes"}).execute()
    assert error.value.status_code == 400


def test_a_stopped_watch_pushes_nothing(sandbox: SandboxClient, receiver: Receiver, watched: Any) -> None:
    watched.users().stop(userId="me").execute()
    sandbox.deliver(ADDRESS, message(1))
    sandbox.wait_notifications_idle()
    assert receiver.received == []
    assert sandbox.gmail_watch(ADDRESS) is None


def test_an_expired_watch_pushes_nothing_until_the_app_watches_again(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    expired = sandbox.expire_gmail_watch(ADDRESS)
    assert expired is not None and expired["active"] is False
    sandbox.deliver(ADDRESS, message(1))
    sandbox.wait_notifications_idle()
    assert receiver.received == []

    renewed = watched.users().watch(userId="me", body={"topicName": TOPIC, "labelIds": ["INBOX"]}).execute()
    assert int(renewed["expiration"]) > time.time() * 1000 + 6 * 24 * 3600 * 1000
    sandbox.deliver(ADDRESS, message(2))
    assert len(receiver.wait_for(1)) == 1


def test_at_most_one_push_per_second_per_user_and_the_extras_are_dropped(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    for number in range(3):
        sandbox.deliver(ADDRESS, message(number))
    sandbox.wait_notifications_idle()
    assert len(receiver.received) == 1
    dropped = [e["dropped"] for e in sandbox.notifications("pubsub")]  # logged when dropped or when answered
    assert sorted(dropped, key=str) == [None, "gmail_rate_limit", "gmail_rate_limit"]

    time.sleep(1.05)  # the next second: a limit per second is a matter of time itself
    sandbox.deliver(ADDRESS, message(4))
    pushes = receiver.wait_for(2)
    assert push_data(pushes[1])["historyId"] == history_id(sandbox)  # the id after every change so far


def test_a_push_not_acknowledged_is_redelivered_with_a_fresh_token_until_it_is(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    receiver.statuses = [500, 429]
    sandbox.deliver(ADDRESS, message(1))
    pushes = receiver.wait_for(3)
    sandbox.wait_notifications_idle()

    assert len({p.json()["message"]["messageId"] for p in pushes}) == 1
    assert [(e["attempt"], e["status"]) for e in sandbox.notifications("pubsub")] == [(1, 500), (2, 429), (3, 204)]
    for push in pushes:
        id_token.verify_token(bearer(push), google_request(), f"{receiver.url}/push", sandbox.pubsub_certs_url)


def test_a_push_never_acknowledged_is_given_up_after_the_retry_delays(
    sandbox: SandboxClient, receiver: Receiver, watched: Any
) -> None:
    sandbox.push_settings(retry_delays_ms=[10, 10])
    receiver.status = 503
    sandbox.deliver(ADDRESS, message(1))
    sandbox.wait_notifications_idle()

    log = sandbox.notifications("pubsub")
    assert [(e["attempt"], e["status"], e["gave_up"]) for e in log] == [
        (1, 503, False),
        (2, 503, False),
        (3, 503, True),
    ]
    assert len(receiver.received) == 3


def test_a_push_to_an_endpoint_that_is_down_is_logged_with_the_error(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox(ADDRESS)
    sandbox.push_settings(retry_delays_ms=[])
    sandbox.pubsub_subscribe(TOPIC, "http://127.0.0.1:9/push", SERVICE_ACCOUNT)  # the discard port: refused
    gmail(sandbox.issue_token(ADDRESS)["access_token"]).users().watch(userId="me", body={"topicName": TOPIC}).execute()
    sandbox.deliver(ADDRESS, message(1))
    sandbox.wait_notifications_idle()

    (entry,) = sandbox.notifications("pubsub")
    assert entry["status"] is None and "ConnectionError" in entry["error"] and entry["gave_up"]


# Tokens built to order ------------------------------------------------------------------------------------
AUDIENCE = "https://tasklift.test/webhooks/gmail"


def verify(sandbox: SandboxClient, token: str) -> Any:
    return id_token.verify_token(token, google_request(), audience=AUDIENCE, certs_url=sandbox.pubsub_certs_url)


def test_the_token_route_signs_a_real_push_token_by_default(sandbox: SandboxClient) -> None:
    claims = verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE, "email": SERVICE_ACCOUNT}))
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["email"] == SERVICE_ACCOUNT and claims["email_verified"] is True
    assert claims["exp"] - claims["iat"] == 3600


def test_the_token_route_builds_each_bad_token(sandbox: SandboxClient) -> None:
    now = int(time.time())
    with pytest.raises(ValueError, match="audience"):
        verify(sandbox, sandbox.pubsub_token({"aud": "https://elsewhere.test/"}))
    with pytest.raises(ValueError, match="expired"):
        verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE, "iat": now - 7200, "exp": now - 3600}))
    with pytest.raises(google.auth.exceptions.GoogleAuthError, match="signature"):
        verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE}, signer="stranger"))
    # Claims verify_token does not check itself: the app must.
    assert verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE, "iss": "https://evil.test"}))["iss"] == (
        "https://evil.test"
    )
    assert verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE, "email_verified": False}))["email_verified"] is False
    assert "email" not in verify(sandbox, sandbox.pubsub_token({"aud": AUDIENCE, "email": None}))


def test_the_token_route_names_another_kid_or_none(sandbox: SandboxClient) -> None:
    published = sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).json()
    unknown = google.auth.jwt.decode_header(sandbox.pubsub_token({"aud": AUDIENCE}, signer="stranger", kid="k2"))
    missing = google.auth.jwt.decode_header(sandbox.pubsub_token({"aud": AUDIENCE}, kid=None))
    own = google.auth.jwt.decode_header(sandbox.pubsub_token({"aud": AUDIENCE}))
    assert (unknown["kid"], "kid" in missing, own["kid"]) == ("k2", False, next(iter(published)))


def test_the_token_route_wants_an_audience(sandbox: SandboxClient) -> None:
    with pytest.raises(SandboxControlError) as error:
        sandbox.pubsub_token({"email": SERVICE_ACCOUNT})
    assert error.value.status == 400 and "claims.aud" in error.value.body


def test_the_signing_key_outlives_a_reset(sandbox: SandboxClient) -> None:
    before = sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).json()
    sandbox.reset()
    assert sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).json() == before
    (pem,) = before.values()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")


def test_a_pubsub_fault_makes_the_certs_endpoint_fail(sandbox: SandboxClient) -> None:
    sandbox.fault("pubsub", 503, route="/oauth2/v1/certs")
    assert sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).status_code == 503
    assert sandbox.http.get(sandbox.pubsub_certs_url, timeout=5).status_code == 200
    assert [r["status"] for r in sandbox.requests("pubsub")] == [503, 200]


def test_a_push_subscription_needs_a_topic_name_and_an_https_or_loopback_endpoint(sandbox: SandboxClient) -> None:
    with pytest.raises(SandboxControlError, match="topic"):
        sandbox.pubsub_subscribe("gmail", "http://127.0.0.1:1/push", SERVICE_ACCOUNT)
    with pytest.raises(SandboxControlError, match="https"):
        sandbox.pubsub_subscribe(TOPIC, "http://tasklift.test/push", SERVICE_ACCOUNT)
    made = sandbox.pubsub_subscribe(TOPIC, "https://tasklift.test/push", SERVICE_ACCOUNT)
    assert made["audience"] == "https://tasklift.test/push"
    assert sandbox.pubsub_subscriptions() == [made]
    sandbox.pubsub_unsubscribe_all()
    assert sandbox.pubsub_subscriptions() == []


# Delivery behaviours --------------------------------------------------------------------------------------
def test_duplicate_sends_the_same_message_again(sandbox: SandboxClient, receiver: Receiver, watched: Any) -> None:
    sandbox.push_behaviour("pubsub", duplicate=2)
    sandbox.deliver(ADDRESS, message(1))
    pushes = receiver.wait_for(3)
    assert len({p.json()["message"]["messageId"] for p in pushes}) == 1


def test_held_pushes_are_released_newest_first(sandbox: SandboxClient, receiver: Receiver, watched: Any) -> None:
    sandbox.push_settings(gmail_rate_limit=False)
    sandbox.push_behaviour("pubsub", hold=True)
    ids = [int(sandbox.deliver(ADDRESS, message(number))["historyId"]) for number in range(3)]
    sandbox.wait_notifications_idle()
    assert receiver.received == []
    assert sandbox.notifications_pending() == {"pending": 0, "held": 3}

    assert sandbox.push_release() == 3
    pushes = receiver.wait_for(3)
    assert [push_data(p)["historyId"] for p in pushes] == ids[::-1]


def test_reset_drops_pending_pushes(sandbox: SandboxClient, receiver: Receiver, watched: Any) -> None:
    sandbox.push_behaviour("pubsub", delay_ms=300)
    sandbox.deliver(ADDRESS, message(1))
    assert sandbox.notifications_pending()["pending"] == 1
    sandbox.reset()
    assert sandbox.notifications_pending() == {"pending": 0, "held": 0}
    time.sleep(0.5)  # past the 300 ms delay: a push that never comes is seen only over time
    assert receiver.received == []
    assert sandbox.notifications() == []
