"""Conversations in the sandbox, read through the real clients: mail the owner sends lands in Gmail's `SENT`
label and Outlook's `sentitems` folder (history and delta as for the inbox, pushes and notifications as the
services send them), and a reply shares its original's Gmail `threadId` or Graph `conversationId`, with the
In-Reply-To and References headers the raw mail carries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sandbox.client import SandboxClient, SandboxControlError
from tests.sandbox.test_gmail_sandbox import gmail, message
from tests.sandbox.test_graph_sandbox import IMMUTABLE, Graph
from tests.sandbox.test_graph_subscriptions import Graph as GraphSubscriptions
from tests.sandbox.test_graph_subscriptions import echo, notifications
from tests.sandbox.test_pubsub_push import SERVICE_ACCOUNT, TOPIC, Receiver, push_data, serving

OWNER = "grace@example.com"
PEER = "sam@example.org"
COLLEAGUE = "lin@example.org"


def headers_of(resource: dict[str, Any]) -> dict[str, str]:
    return {h["name"]: h["value"] for h in resource["payload"]["headers"]}


def history_added(client: Any, start: str, label: str | None = None) -> list[tuple[str, list[str]]]:
    """(message id, labelIds) of every messagesAdded entry since `start`, as history.list gives them."""
    params: dict[str, Any] = {"userId": "me", "startHistoryId": start, "historyTypes": ["messageAdded"]}
    if label is not None:
        params["labelId"] = label
    records = client.users().history().list(**params).execute().get("history", [])
    return [(a["message"]["id"], a["message"]["labelIds"]) for r in records for a in r.get("messagesAdded", [])]


@pytest.fixture
def mail(sandbox: SandboxClient) -> Any:
    """The owner's Gmail mailbox (history from 5000), as google-api-python-client sees it."""
    sandbox.create_mailbox(OWNER, history_id_start=5000)
    return gmail(sandbox.issue_token(OWNER)["access_token"])


@pytest.fixture
def outlook(sandbox: SandboxClient) -> Graph:
    sandbox.create_outlook_mailbox(OWNER, display_name="Grace Hopper")
    return Graph(sandbox.issue_microsoft_token(OWNER)["access_token"])


# Gmail ----------------------------------------------------------------------------------------------------
def test_mail_the_owner_sends_carries_sent_and_shows_only_in_sent_history(sandbox: SandboxClient, mail: Any) -> None:
    incoming = sandbox.deliver(OWNER, message(1))
    sent = sandbox.send_gmail(OWNER, to=[PEER], cc=[COLLEAGUE], subject="Q3 numbers", body="Could you send them?")

    got = mail.users().messages().get(userId="me", id=sent["id"], format="metadata").execute()
    assert got["labelIds"] == ["SENT"]
    headers = headers_of(got)
    assert headers["From"] == OWNER and headers["To"] == PEER and headers["Cc"] == COLLEAGUE
    assert headers["Subject"] == "Q3 numbers" and headers["Message-ID"] == sent["messageId"]
    assert "In-Reply-To" not in headers and sent["threadId"] == sent["id"]

    assert history_added(mail, "5000", "SENT") == [(sent["id"], ["SENT"])]
    assert history_added(mail, "5000", "INBOX") == [(incoming["id"], ["INBOX", "UNREAD"])]
    listed = mail.users().messages().list(userId="me", labelIds=["SENT"]).execute()["messages"]
    assert listed == [{"id": sent["id"], "threadId": sent["threadId"]}]


def test_a_reply_the_owner_sends_joins_the_thread_with_the_headers_of_a_reply(
    sandbox: SandboxClient, mail: Any
) -> None:
    asked = sandbox.deliver(OWNER, message(1, subject="Signed contract"))
    earlier = mail.users().messages().get(userId="me", id=asked["id"], format="metadata").execute()

    sent = sandbox.send_gmail(OWNER, to=["sender1@example.org"], body="Attached, signed.", in_reply_to=asked["id"])

    got = mail.users().messages().get(userId="me", id=sent["id"], format="full").execute()
    headers = headers_of(got)
    assert got["threadId"] == sent["threadId"] == asked["threadId"]
    assert headers["Subject"] == "Re: Signed contract"
    assert headers["In-Reply-To"] == headers_of(earlier)["Message-ID"] == "<m1@example.org>"
    assert headers["References"] == "<m1@example.org>"
    thread = mail.users().threads().get(userId="me", id=asked["threadId"]).execute()
    assert [m["id"] for m in thread["messages"]] == [asked["id"], sent["id"]]


def test_an_incoming_reply_to_sent_mail_lands_in_the_inbox_of_its_thread_with_the_whole_chain(
    sandbox: SandboxClient, mail: Any
) -> None:
    first = sandbox.deliver(OWNER, message(1, subject="Budget"))
    sent = sandbox.send_gmail(OWNER, to=["sender1@example.org"], body="Which budget?", in_reply_to=first["id"])

    answer = sandbox.deliver_gmail_reply(OWNER, sent["id"], sender="Sender 1 <sender1@example.org>", body="Q4.")

    got = mail.users().messages().get(userId="me", id=answer["id"], format="metadata").execute()
    headers = headers_of(got)
    assert got["labelIds"] == ["INBOX", "UNREAD"] and got["threadId"] == first["threadId"]
    assert headers["From"] == "Sender 1 <sender1@example.org>" and headers["To"] == OWNER
    assert headers["Subject"] == "Re: Budget"
    assert headers["In-Reply-To"] == sent["messageId"]
    assert headers["References"] == f"<m1@example.org> {sent['messageId']}"
    assert headers["Message-ID"] == answer["messageId"]


def test_a_reference_with_another_subject_starts_a_new_thread_as_at_gmail(sandbox: SandboxClient, mail: Any) -> None:
    first = sandbox.deliver(OWNER, message(1, subject="Lunch"))
    same = message(2, subject="RE: lunch").replace("\r\n\r\n", "\r\nIn-Reply-To: <m1@example.org>\r\n\r\n", 1)
    other = message(3, subject="Dinner").replace("\r\n\r\n", "\r\nReferences: <m1@example.org>\r\n\r\n", 1)

    assert sandbox.deliver(OWNER, same)["threadId"] == first["threadId"]
    assert sandbox.deliver(OWNER, other)["threadId"] != first["threadId"]


def test_sent_mail_is_also_delivered_to_the_sandbox_mailboxes_it_names(sandbox: SandboxClient, mail: Any) -> None:
    sandbox.create_mailbox(PEER)
    sandbox.create_outlook_mailbox(COLLEAGUE)

    sent = sandbox.send_gmail(
        OWNER, to=[PEER], cc=[COLLEAGUE], subject="Deck", body="Here.", deliver_to=[PEER, COLLEAGUE]
    )

    by_provider = {d["provider"]: d for d in sent["delivered"]}
    assert sorted(by_provider) == ["gmail", "outlook"]
    (received,) = sandbox.mailbox_messages(PEER)
    assert received["id"] == by_provider["gmail"]["id"] and received["labelIds"] == ["INBOX", "UNREAD"]
    (copy,) = sandbox.outlook_messages(COLLEAGUE)
    assert copy["internetMessageId"] == sent["messageId"] and copy["folder"] == "inbox"
    assert copy["from"] == OWNER


def test_send_and_reply_refuse_unknown_messages_and_mailboxes(sandbox: SandboxClient, mail: Any) -> None:
    with pytest.raises(SandboxControlError) as unknown:
        sandbox.send_gmail(OWNER, to=[PEER], body="Hi", in_reply_to="18f0000000000999")
    assert unknown.value.status == 404 and "unknown_message" in unknown.value.body
    with pytest.raises(SandboxControlError) as nowhere:
        sandbox.send_gmail(OWNER, to=[PEER], body="Hi", deliver_to=["nobody@example.net"])
    assert nowhere.value.status == 404 and "unknown_mailbox" in nowhere.value.body
    with pytest.raises(SandboxControlError) as empty:
        sandbox.send_gmail(OWNER, to=[], body="Hi")
    assert empty.value.status == 400 and "to" in empty.value.body
    with pytest.raises(SandboxControlError) as reply:
        sandbox.deliver_gmail_reply(OWNER, "18f0000000000999", sender=PEER, body="Hi")
    assert reply.value.status == 404
    bad = [
        {"address": OWNER, "to": ["not an address"], "body": "Hi"},
        {"address": OWNER, "to": [PEER], "body": "Hi", "sent_at": "2026-11-02T10:00:00"},
        {"address": OWNER, "to": [PEER], "body": "Hi", "subject": "Two\r\nBcc: x@example.org"},
        {"address": OWNER, "to": [PEER]},
    ]
    for body in bad:
        with pytest.raises(SandboxControlError) as invalid:
            sandbox.call("POST", "/gmail/messages/send", json=body)
        assert invalid.value.status == 400 and "invalid_field" in invalid.value.body
    with pytest.raises(SandboxControlError) as anonymous:
        sandbox.call("POST", "/graph/messages/reply", json={"address": OWNER, "id": "x", "body": "Hi"})
    assert anonymous.value.status == 400 and "from" in anonymous.value.body
    assert sandbox.mailbox_messages(OWNER) == []


def test_the_first_read_of_sent_mail_can_ask_for_the_last_14_days_of_it(sandbox: SandboxClient, mail: Any) -> None:
    now = datetime.now(UTC)
    sandbox.send_gmail(OWNER, to=[PEER], body="Old.", sent_at=now - timedelta(days=20))
    recent = sandbox.send_gmail(OWNER, to=[PEER], body="Recent.", sent_at=now - timedelta(days=2))
    sandbox.deliver(OWNER, message(1))

    listed = mail.users().messages().list(userId="me", labelIds=["SENT"], q="newer_than:14d").execute()
    assert [m["id"] for m in listed["messages"]] == [recent["id"]]
    got = mail.users().messages().get(userId="me", id=recent["id"], format="minimal").execute()
    assert abs(int(got["internalDate"]) / 1000 - (now - timedelta(days=2)).timestamp()) < 1


# Gmail push ---------------------------------------------------------------------------------------------
@pytest.fixture
def receiver() -> Any:
    with serving(Receiver()) as target:
        yield target


def watch(sandbox: SandboxClient, mail: Any, receiver: Receiver, labels: list[str]) -> None:
    sandbox.push_settings(gmail_rate_limit=False)
    sandbox.pubsub_subscribe(TOPIC, f"{receiver.url}/push", SERVICE_ACCOUNT)
    mail.users().watch(userId="me", body={"topicName": TOPIC, "labelIds": labels}).execute()


def test_a_watch_on_inbox_and_sent_pushes_for_sent_mail(sandbox: SandboxClient, mail: Any, receiver: Receiver) -> None:
    watch(sandbox, mail, receiver, ["INBOX", "SENT"])
    sent = sandbox.send_gmail(OWNER, to=[PEER], body="Sent.")
    (push,) = receiver.wait_for(1)
    assert push_data(push) == {"emailAddress": OWNER, "historyId": int(sent["historyId"])}


def test_a_watch_on_inbox_alone_is_silent_for_sent_mail_unless_told_to_push_every_change(
    sandbox: SandboxClient, mail: Any, receiver: Receiver
) -> None:
    watch(sandbox, mail, receiver, ["INBOX"])
    sandbox.send_gmail(OWNER, to=[PEER], body="Sent.")
    sandbox.wait_notifications_idle()
    assert receiver.received == []

    sandbox.push_settings(gmail_watch_pushes_every_change=True)  # as reported of live Gmail
    sent = sandbox.send_gmail(OWNER, to=[PEER], body="Sent again.")
    (push,) = receiver.wait_for(1)
    assert push_data(push)["historyId"] == int(sent["historyId"])


# Outlook -------------------------------------------------------------------------------------------------
SENT_DELTA = "/me/mailFolders('sentitems')/messages/delta"
FIELDS = "subject,from,toRecipients,ccRecipients,replyTo,conversationId,isRead,internetMessageId"


def test_mail_the_owner_sends_is_in_sentitems_delta_with_immutable_ids_and_not_in_the_inbox(
    sandbox: SandboxClient, outlook: Graph
) -> None:
    sandbox.deliver_outlook(OWNER, subject="Hello", sender=PEER, body="Hi.")
    sent = sandbox.send_outlook(OWNER, to=[PEER], cc=[COLLEAGUE], subject="Q3 numbers", body="Could you send them?")
    assert sent["folder"] == "sentitems"

    items, delta_link, _ = outlook.delta_round(f"{SENT_DELTA}?$select={FIELDS}", page_size=5)
    (item,) = items
    assert item["id"] == sent["id"] and item["id"].startswith("AAkALg")
    assert item["from"] == {"emailAddress": {"name": "Grace Hopper", "address": OWNER}}
    assert item["toRecipients"] == [{"emailAddress": {"name": PEER, "address": PEER}}]
    assert item["ccRecipients"] == [{"emailAddress": {"name": COLLEAGUE, "address": COLLEAGUE}}]
    assert item["isRead"] is True and item["internetMessageId"] == sent["internetMessageId"]
    inbox, _, _ = outlook.delta_round("/me/mailFolders/inbox/messages/delta?$select=subject", page_size=5)
    assert [m["subject"] for m in inbox] == ["Hello"]

    assert outlook.delta_round(delta_link, page_size=5)[0] == []
    later = sandbox.send_outlook(OWNER, to=[PEER], subject="Again", body="Still waiting.")
    assert [m["id"] for m in outlook.delta_round(delta_link, page_size=5)[0]] == [later["id"]]

    sandbox.expire_outlook_delta(OWNER)
    gone = outlook.get(delta_link, prefer=[IMMUTABLE])
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "SyncStateNotFound"
    assert "/messages/delta?" in gone.headers["Location"]


def test_a_filtered_sentitems_delta_holds_only_the_recent_sent_mail(sandbox: SandboxClient, outlook: Graph) -> None:
    now = datetime.now(UTC)
    sandbox.send_outlook(OWNER, to=[PEER], body="Old.", sent_at=now - timedelta(days=20))
    recent = sandbox.send_outlook(OWNER, to=[PEER], body="Recent.", sent_at=now - timedelta(days=2))
    since = (now - timedelta(days=14)).strftime("%Y-%m-%dT%H:%M:%SZ")

    items, _, _ = outlook.delta_round(
        f"{SENT_DELTA}?$filter=receivedDateTime ge {since}&$select=sentDateTime", page_size=5
    )

    assert [m["id"] for m in items] == [recent["id"]]
    assert items[0]["sentDateTime"] == recent["receivedDateTime"]


def test_an_outlook_reply_shares_the_conversation_and_carries_its_headers_when_selected(
    sandbox: SandboxClient, outlook: Graph
) -> None:
    asked = sandbox.deliver_outlook(OWNER, subject="Signed contract", sender=PEER, body="Can you sign it?")
    sent = sandbox.send_outlook(OWNER, to=[PEER], body="Signed.", in_reply_to=asked["id"])
    answer = sandbox.deliver_outlook_reply(OWNER, sent["id"], sender=f"Sam <{PEER}>", body="Thanks!", cc=[COLLEAGUE])

    assert sent["conversationId"] == asked["conversationId"] == answer["conversationId"]
    select = "?$select=subject,conversationId,internetMessageHeaders,toRecipients,ccRecipients"
    got = outlook.get(f"/me/messages/{answer['id']}{select}", prefer=[IMMUTABLE]).json()
    headers = {h["name"]: h["value"] for h in got["internetMessageHeaders"]}
    assert got["subject"] == "Re: Signed contract" and got["conversationId"] == asked["conversationId"]
    assert headers["In-Reply-To"] == sent["internetMessageId"]
    assert headers["References"] == f"{asked['internetMessageId']} {sent['internetMessageId']}"
    assert got["toRecipients"] == [{"emailAddress": {"name": "Grace Hopper", "address": OWNER}}]
    assert got["ccRecipients"] == [{"emailAddress": {"name": COLLEAGUE, "address": COLLEAGUE}}]
    assert "internetMessageHeaders" not in outlook.get(f"/me/messages/{answer['id']}", prefer=[IMMUTABLE]).json()
    sent_headers = outlook.get(f"/me/messages/{sent['id']}{select}").json()["internetMessageHeaders"]
    assert {"name": "In-Reply-To", "value": asked["internetMessageId"]} in sent_headers


def test_reply_to_is_read_from_the_raw_mail(sandbox: SandboxClient, outlook: Graph) -> None:
    raw = message(1).replace("\r\n\r\n", "\r\nReply-To: Desk <desk@example.org>\r\n\r\n", 1)
    delivered = sandbox.deliver_outlook(OWNER, raw)
    got = outlook.get(f"/me/messages/{delivered['id']}?$select=replyTo").json()
    assert got["replyTo"] == [{"emailAddress": {"name": "Desk", "address": "desk@example.org"}}]


def test_outlook_sent_mail_is_delivered_to_another_sandbox_mailbox_in_its_conversation(
    sandbox: SandboxClient, outlook: Graph
) -> None:
    sandbox.create_outlook_mailbox(PEER)
    first = sandbox.send_outlook(OWNER, to=[PEER], subject="Room", body="Can you book it?", deliver_to=[PEER])
    ((provider, copy_id),) = [(d["provider"], d["id"]) for d in first["delivered"]]
    assert provider == "outlook"
    answered = sandbox.deliver_outlook_reply(PEER, copy_id, sender=f"Grace <{OWNER}>", body="Booked.")
    (original,) = [m for m in sandbox.outlook_messages(PEER) if m["id"] == copy_id]
    assert answered["conversationId"] == original["conversationId"]
    assert original["internetMessageId"] == first["internetMessageId"]


def test_an_unknown_outlook_message_to_answer_is_a_404(sandbox: SandboxClient, outlook: Graph) -> None:
    with pytest.raises(SandboxControlError) as error:
        sandbox.send_outlook(OWNER, to=[PEER], body="Hi", in_reply_to="AAkALgAAAAAAHYQDEapmEc2byACqAC-EWg0Anothing")
    assert error.value.status == 404 and "unknown_message" in error.value.body
    assert sandbox.outlook_messages(OWNER) == []


def test_a_sentitems_subscription_hears_sent_mail_and_an_inbox_one_does_not(sandbox: SandboxClient) -> None:
    sandbox.create_outlook_mailbox(OWNER)
    graph = GraphSubscriptions(sandbox.issue_microsoft_token(OWNER)["access_token"])
    with (
        serving(Receiver(status=202, handler=echo)) as sent_hook,
        serving(Receiver(status=202, handler=echo)) as inbox_hook,
    ):
        expires = (datetime.now(UTC) + timedelta(minutes=60)).isoformat().replace("+00:00", "Z")
        made = graph.subscribe(sent_hook, resource="me/mailFolders('sentitems')/messages", prefer=IMMUTABLE)
        assert made.status_code == 201, made.text
        graph.subscribe(inbox_hook, expirationDateTime=expires, prefer=IMMUTABLE)
        sent = sandbox.send_outlook(OWNER, to=[PEER], body="Sent.")
        sandbox.wait_notifications_idle()
        assert [(n["changeType"], n["resourceData"]["id"]) for n in notifications(sent_hook)] == [
            ("created", sent["id"])
        ]
        assert notifications(inbox_hook) == []
