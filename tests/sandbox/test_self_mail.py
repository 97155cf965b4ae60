"""Issue 32 point 8, in the sandbox: mail to oneself is one Gmail message carrying both SENT and INBOX (two
Outlook items, as Exchange keeps them), read through google-api-python-client; and Graph answers the mail
folders by well-known name and a $select of every property of msgraph-sdk's Message model (conversationIndex
among them), through the requests session the Outlook provider uses, refusing any other name with live Graph's
400."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
import requests
from django.conf import settings

from integrations.providers.outlook import graph_session
from sandbox.client import SandboxClient
from tests.sandbox.test_gmail_sandbox import gmail

OWNER = "grace@example.com"
PEER = "Sam Lee <sam@example.org>"
GRAPH = settings.GRAPH_API_ENDPOINT.rstrip("/")
PREFER = 'IdType="ImmutableId"'
# Every property of message in msgraph-sdk 1.65 (msgraph/generated/models/message.py with outlook_item.py and
# entity.py): Graph must accept each in $select.
SDK_MESSAGE_PROPERTIES = (
    "id", "categories", "changeKey", "createdDateTime", "lastModifiedDateTime", "attachments", "bccRecipients",
    "body", "bodyPreview", "ccRecipients", "conversationId", "conversationIndex", "extensions", "flag", "from",
    "hasAttachments", "importance", "inferenceClassification", "internetMessageHeaders", "internetMessageId",
    "isDeliveryReceiptRequested", "isDraft", "isRead", "isReadReceiptRequested", "multiValueExtendedProperties",
    "parentFolderId", "receivedDateTime", "replyTo", "sender", "sentDateTime", "singleValueExtendedProperties",
    "subject", "toRecipients", "uniqueBody", "webLink",
)  # fmt: skip
# What msgraph-sdk's MailFolder (and Entity) carry: a folder GET answers these.
SDK_FOLDER_PROPERTIES = {
    "id", "displayName", "parentFolderId", "childFolderCount", "unreadItemCount", "totalItemCount", "isHidden",
}  # fmt: skip


class Graph:
    """Graph through the provider's own session (the sandbox's certificate trusted, no environment)."""

    def __init__(self, token: str) -> None:
        self.http = graph_session()
        self.token = token

    def get(self, path: str, **params: str) -> requests.Response:
        url = path if path.startswith("https://") else GRAPH + path
        headers = {"Authorization": f"Bearer {self.token}", "Prefer": PREFER}
        return self.http.get(url, headers=headers, params=params or None, timeout=10)

    def ok(self, path: str, **params: str) -> dict[str, Any]:
        answer = self.get(path, **params)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body


@pytest.fixture
def graph(sandbox: SandboxClient) -> Graph:
    sandbox.create_outlook_mailbox(OWNER, display_name="Grace Hopper")
    return Graph(sandbox.issue_microsoft_token(OWNER)["access_token"])


def gmail_client(sandbox: SandboxClient) -> Any:
    sandbox.create_mailbox(OWNER, history_id_start=7000)
    return gmail(sandbox.issue_token(OWNER)["access_token"])


def added(history: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry["message"] for record in history.get("history", []) for entry in record.get("messagesAdded", [])]


# Gmail ---------------------------------------------------------------------------------------------------
def test_gmail_mail_to_oneself_is_one_message_with_sent_and_inbox_listed_once_by_each_label(
    sandbox: SandboxClient,
) -> None:
    service = gmail_client(sandbox)
    start = service.users().getProfile(userId="me").execute()["historyId"]

    sent = sandbox.send_gmail(OWNER, to=[f"Grace <{OWNER}>"], subject="Note to self", body="Renew the passport.")

    assert sent["labelIds"] == ["UNREAD", "SENT", "INBOX"]  # as messages.send answers for mail to oneself
    assert [m["id"] for m in sandbox.mailbox_messages(OWNER)] == [sent["id"]]  # one message, not two
    users = service.users()
    assert users.getProfile(userId="me").execute()["messagesTotal"] == 1
    assert users.messages().get(userId="me", id=sent["id"], format="minimal").execute()["labelIds"] == [
        "UNREAD",
        "SENT",
        "INBOX",
    ]
    for label in ("INBOX", "SENT"):
        listed = users.messages().list(userId="me", labelIds=[label]).execute()
        assert [m["id"] for m in listed["messages"]] == [sent["id"]]
        history = users.history().list(userId="me", startHistoryId=start, labelId=label).execute()
        assert [(m["id"], m["labelIds"]) for m in added(history)] == [(sent["id"], ["UNREAD", "SENT", "INBOX"])]
    everything = users.history().list(userId="me", startHistoryId=start).execute()
    assert len(everything["history"]) == 1 and len(added(everything)) == 1  # one record, one messagesAdded


def test_gmail_mail_to_others_stays_sent_only_and_deliver_to_oneself_adds_no_copy(sandbox: SandboxClient) -> None:
    gmail_client(sandbox)
    to_others = sandbox.send_gmail(OWNER, to=[PEER], body="I'll send the deck.")
    cc_self = sandbox.send_gmail(OWNER, to=[PEER], cc=[OWNER.upper()], body="I'll send the plan.")
    named = sandbox.send_gmail(OWNER, to=[PEER], body="I'll send the notes.", deliver_to=[OWNER])

    assert to_others["labelIds"] == ["SENT"] and to_others["delivered"] == []
    assert cc_self["labelIds"] == named["labelIds"] == ["UNREAD", "SENT", "INBOX"]
    assert named["delivered"] == [
        {"address": OWNER, "provider": "gmail", "id": named["id"], "threadId": named["threadId"]}
    ]
    stored = {m["id"]: m["labelIds"] for m in sandbox.mailbox_messages(OWNER)}
    assert stored == {
        to_others["id"]: ["SENT"],
        cc_self["id"]: ["UNREAD", "SENT", "INBOX"],
        named["id"]: ["UNREAD", "SENT", "INBOX"],
    }


# Outlook: mail to oneself --------------------------------------------------------------------------------
def test_outlook_mail_to_oneself_is_a_read_sent_item_and_an_unread_inbox_item_of_one_conversation(
    sandbox: SandboxClient, graph: Graph
) -> None:
    sent = sandbox.send_outlook(OWNER, to=[OWNER], subject="Note to self", body="Renew the passport.")

    (inbox_copy,) = sent["delivered"]
    assert (inbox_copy["address"], inbox_copy["provider"], inbox_copy["folder"]) == (OWNER, "outlook", "inbox")
    fields = "isRead,internetMessageId,conversationId,conversationIndex,parentFolderId"
    in_sent = graph.ok(f"/me/messages/{sent['id']}", **{"$select": fields})
    in_inbox = graph.ok(f"/me/messages/{inbox_copy['id']}", **{"$select": fields})
    assert in_sent["id"] != in_inbox["id"]  # two items, as Exchange keeps them
    assert (in_sent["isRead"], in_inbox["isRead"]) == (True, False)
    for same in ("internetMessageId", "conversationId", "conversationIndex"):
        assert in_sent[same] == in_inbox[same]
    assert in_sent["parentFolderId"] == graph.ok("/me/mailFolders/sentitems")["id"]
    assert in_inbox["parentFolderId"] == graph.ok("/me/mailFolders/inbox")["id"]
    assert len(sandbox.outlook_messages(OWNER)) == 2

    again = sandbox.send_outlook(OWNER, to=[PEER], body="I'll send it.", deliver_to=[OWNER])  # named: no third
    assert [d["folder"] for d in again["delivered"]] == ["inbox"] and len(sandbox.outlook_messages(OWNER)) == 4


# Graph: mail folders -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/me/mailFolders/sentitems", "Sent Items"),
        ("/me/mailFolders/SentItems", "Sent Items"),
        ("/me/mailFolders('sentitems')", "Sent Items"),
        ("/me/mailfolders/inbox", "Inbox"),
        ("/me/mailFolders('Inbox')", "Inbox"),
        ("/me/mailFolders/deleteditems", "Deleted Items"),
        ("/me/mailFolders/junkemail", "Junk Email"),
        ("/me/mailFolders/msgfolderroot", "Top of Information Store"),
    ],
)
def test_graph_answers_a_well_known_folder_with_the_sdk_mail_folder_properties(
    graph: Graph, path: str, name: str
) -> None:
    folder = graph.ok(path)

    assert folder["@odata.context"].startswith(f"{settings.SANDBOX_TLS_URL}/v1.0/$metadata#users(")
    assert folder["@odata.context"].endswith("/mailFolders/$entity")
    assert set(folder) - {"@odata.context"} == SDK_FOLDER_PROPERTIES
    assert folder["displayName"] == name and folder["isHidden"] is False
    assert graph.ok(f"/me/mailFolders/{folder['id']}") == folder  # its id opens the same folder


def test_graph_folder_counts_ids_and_parents_match_the_messages_in_them(sandbox: SandboxClient, graph: Graph) -> None:
    sent = sandbox.send_outlook(OWNER, to=[PEER], body="I'll send the deck.")
    sandbox.deliver_outlook(OWNER, subject="One", sender=PEER, body="Hello.")
    read = sandbox.deliver_outlook(OWNER, subject="Two", sender=PEER, body="Hello again.", is_read=True)

    sent_items, inbox = graph.ok("/me/mailFolders/sentitems"), graph.ok("/me/mailFolders/inbox")
    root = graph.ok("/me/mailFolders/msgfolderroot")

    assert (sent_items["totalItemCount"], sent_items["unreadItemCount"]) == (1, 0)
    assert (inbox["totalItemCount"], inbox["unreadItemCount"]) == (2, 1)
    assert sent_items["parentFolderId"] == inbox["parentFolderId"] == root["id"]
    assert root["childFolderCount"] >= 2 and root["parentFolderId"] not in (root["id"], inbox["id"])
    assert graph.ok(f"/me/messages/{sent['id']}", **{"$select": "parentFolderId"})["parentFolderId"] == sent_items["id"]
    assert graph.ok(f"/me/messages/{read['id']}", **{"$select": "parentFolderId"})["parentFolderId"] == inbox["id"]
    # Delta by the well-known name and by the id the folder answered reach the same mail.
    by_name = graph.ok("/me/mailFolders/sentitems/messages/delta", **{"$select": "conversationIndex,subject"})
    by_id = graph.ok(f"/me/mailFolders/{sent_items['id']}/messages/delta", **{"$select": "subject"})
    assert [m["id"] for m in by_name["value"]] == [m["id"] for m in by_id["value"]] == [sent["id"]]
    assert by_name["value"][0]["conversationIndex"]


def test_graph_folder_select_limits_the_answer_and_refuses_what_a_folder_has_not(graph: Graph) -> None:
    assert graph.ok("/me/mailFolders/sentitems", **{"$select": "displayName"}).keys() == {
        "@odata.context",
        "id",
        "displayName",
    }

    wrong = graph.get("/me/mailFolders/sentitems", **{"$select": "displayName,isRead"})
    assert wrong.status_code == 400
    error = wrong.json()["error"]
    assert error["code"] == "BadRequest"
    assert error["message"] == (
        "Parsing OData Select and Expand failed: "
        "Could not find a property named 'isRead' on type 'microsoft.graph.mailFolder'."
    )
    unknown = graph.get("/me/mailFolders/AQMkADAwATM0MDAAMS1iNTcwLWI2NTEtMDACLTAwCgAuAAADnotafolder")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "ErrorItemNotFound")


# Graph: $select of message properties ----------------------------------------------------------------------
def test_graph_select_accepts_every_property_of_the_sdk_message_model(sandbox: SandboxClient, graph: Graph) -> None:
    message = sandbox.deliver_outlook(OWNER, subject="Hello", sender=PEER, body="Please call me.")["id"]
    for name in SDK_MESSAGE_PROPERTIES:
        single = graph.get(f"/me/messages/{message}", **{"$select": name})
        assert single.status_code == 200, (name, single.text)
        delta = graph.get("/me/mailFolders/inbox/messages/delta", **{"$select": name})
        assert delta.status_code == 200, (name, delta.text)

    everything = graph.ok(f"/me/messages/{message}", **{"$select": ",".join(SDK_MESSAGE_PROPERTIES)})
    navigation = {"attachments", "extensions", "singleValueExtendedProperties", "multiValueExtendedProperties"}
    assert set(everything) - {"@odata.context", "@odata.etag"} == set(SDK_MESSAGE_PROPERTIES) - navigation
    assert everything["uniqueBody"] == everything["body"]
    default = graph.ok(f"/me/messages/{message}")
    assert "conversationIndex" in default  # sent by default, as Graph does
    assert not {"internetMessageHeaders", "uniqueBody"} & set(default)  # only when selected


def test_graph_conversation_index_is_a_header_block_and_a_reply_adds_one_response_level(
    sandbox: SandboxClient, graph: Graph
) -> None:
    asked = sandbox.deliver_outlook(OWNER, subject="Plan", sender=PEER, body="Could you send the plan?")
    reply = sandbox.send_outlook(OWNER, to=[PEER], body="Here is the plan.", in_reply_to=asked["id"])

    first = base64.b64decode(graph.ok(f"/me/messages/{asked['id']}")["conversationIndex"], validate=True)
    answer = base64.b64decode(graph.ok(f"/me/messages/{reply['id']}")["conversationIndex"], validate=True)

    assert len(first) == 22 and first[0] == 0x01  # reserved byte, 5 bytes of time, a 16-byte GUID
    assert len(answer) == 27 and answer[:22] == first  # the parent's index and one 5-byte response level
    assert answer[22] & 0x80 == 0  # DeltaCode 0: the reply came within the short range


def test_graph_select_of_a_name_message_has_not_gets_live_graphs_400(sandbox: SandboxClient, graph: Graph) -> None:
    message = sandbox.deliver_outlook(OWNER, subject="Hello", sender=PEER, body="Hi.")["id"]
    for path in (f"/me/messages/{message}", "/me/mailFolders/sentitems/messages/delta"):
        answer = graph.get(path, **{"$select": "subject,messageClass"})

        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["code"] == "RequestBroker--ParseUri"
        assert error["message"] == (
            "Could not find a property named 'messageClass' on type 'Microsoft.OutlookServices.Message'."
        )
        assert {"date", "request-id", "client-request-id"} <= error["innerError"].keys()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", error["innerError"]["date"])  # no offset, as Graph
