"""Label changes and deletions in the sandbox's Gmail write history records exactly as users.history.list returns
them (gmail.v1.json: History, HistoryLabelAdded, ...), read through google-api-python-client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from django.conf import settings
from googleapiclient.errors import HttpError

from sandbox.client import SandboxClient, SandboxControlError
from tests.sandbox.test_gmail_sandbox import ADDRESS, gmail, message


@pytest.fixture
def service(sandbox: SandboxClient) -> Any:
    sandbox.create_mailbox(ADDRESS, history_id_start=7000)
    return gmail(sandbox.issue_token(ADDRESS)["access_token"])


def history(service: Any, start: str, **params: Any) -> list[dict[str, Any]]:
    """Every record after `start`, following nextPageToken."""
    records: list[dict[str, Any]] = []
    page_token = None
    while True:
        page = (
            service.users().history().list(userId="me", startHistoryId=start, pageToken=page_token, **params).execute()
        )
        records += page.get("history", [])
        page_token = page.get("nextPageToken")
        if not page_token:
            return records


def current(service: Any) -> str:
    return str(service.users().getProfile(userId="me").execute()["historyId"])


def test_archive_then_unarchive_writes_labels_removed_then_labels_added(sandbox: SandboxClient, service: Any) -> None:
    delivered = sandbox.deliver(ADDRESS, message(1))
    start = current(service)

    archived = sandbox.archive(ADDRESS, delivered["id"])
    back = sandbox.modify_labels(ADDRESS, delivered["id"], add=["INBOX"])

    records = history(service, start)
    ref = {"id": delivered["id"], "threadId": delivered["threadId"]}
    assert records == [
        {
            "id": archived["historyId"],
            "messages": [ref],
            "labelsRemoved": [{"message": {**ref, "labelIds": ["UNREAD"]}, "labelIds": ["INBOX"]}],
        },
        {
            "id": back["historyId"],
            "messages": [ref],
            "labelsAdded": [{"message": {**ref, "labelIds": ["UNREAD", "INBOX"]}, "labelIds": ["INBOX"]}],
        },
    ]
    assert int(start) < int(archived["historyId"]) < int(back["historyId"]) == int(current(service))
    got = service.users().messages().get(userId="me", id=delivered["id"], format="minimal").execute()
    assert got["labelIds"] == ["UNREAD", "INBOX"] and got["historyId"] == back["historyId"]


def test_history_types_picks_the_kinds_of_record_and_absent_means_all(sandbox: SandboxClient, service: Any) -> None:
    start = current(service)
    first = sandbox.deliver(ADDRESS, message(1))["id"]
    second = sandbox.deliver(ADDRESS, message(2))["id"]
    sandbox.archive(ADDRESS, first)
    sandbox.modify_labels(ADDRESS, first, add=["INBOX"])
    sandbox.delete_gmail(ADDRESS, [second])

    def kinds(**params: Any) -> list[str]:
        return [next(k for k in r if k not in ("id", "messages")) for r in history(service, start, **params)]

    everything = ["messagesAdded", "messagesAdded", "labelsRemoved", "labelsAdded", "messagesDeleted"]
    assert kinds() == everything
    assert kinds(historyTypes=["messageAdded", "labelAdded", "labelRemoved", "messageDeleted"]) == everything
    assert kinds(historyTypes=["labelAdded"]) == ["labelsAdded"]
    assert kinds(historyTypes=["messageAdded", "labelAdded"]) == ["messagesAdded", "messagesAdded", "labelsAdded"]
    assert kinds(historyTypes=["messageDeleted"]) == ["messagesDeleted"]
    paged = history(service, start, maxResults=2)
    assert len(paged) == 5 and [r["id"] for r in paged] == sorted((r["id"] for r in paged), key=int)


def test_mail_that_skipped_the_inbox_then_moved_there_shows_only_as_label_added_under_inbox(
    sandbox: SandboxClient, service: Any
) -> None:
    start = current(service)
    delivered = sandbox.deliver(ADDRESS, message(1), labels=["Label_12", "UNREAD"])
    moved = sandbox.modify_labels(ADDRESS, delivered["id"], add=["INBOX"], remove=["Label_12"])

    inbox = history(service, start, labelId="INBOX", historyTypes=["messageAdded", "labelAdded"])

    assert [r["id"] for r in inbox] == [moved["historyId"]]
    assert inbox[0]["labelsAdded"] == [
        {
            "message": {"id": delivered["id"], "threadId": delivered["threadId"], "labelIds": ["UNREAD", "INBOX"]},
            "labelIds": ["INBOX"],
        }
    ]
    assert "labelsRemoved" not in inbox[0]  # Label_12 was removed, but the message lacked INBOX before
    custom = history(service, start, labelId="Label_12")
    assert [list(r)[2:] for r in custom] == [["messagesAdded"], ["labelsRemoved"]]


def test_not_spam_is_one_record_with_spam_removed_and_inbox_added(sandbox: SandboxClient, service: Any) -> None:
    start = current(service)
    spam = sandbox.deliver(ADDRESS, message(1), labels=["SPAM"])
    assert service.users().messages().list(userId="me", labelIds=["INBOX"]).execute().get("messages") is None

    not_spam = sandbox.modify_labels(ADDRESS, spam["id"], add=["INBOX"], remove=["SPAM"])

    records = history(service, start)
    assert [r["id"] for r in records] == [spam["historyId"], not_spam["historyId"]]
    record = records[1]
    after = {"id": spam["id"], "threadId": spam["threadId"], "labelIds": ["INBOX"]}
    assert record["labelsAdded"] == [{"message": after, "labelIds": ["INBOX"]}]
    assert record["labelsRemoved"] == [{"message": after, "labelIds": ["SPAM"]}]
    inbox_only = history(service, start, labelId="INBOX")
    assert inbox_only == [
        {"id": not_spam["historyId"], "messages": records[1]["messages"], "labelsAdded": record["labelsAdded"]}
    ]
    listed = service.users().messages().list(userId="me", labelIds=["INBOX"]).execute()["messages"]
    assert [m["id"] for m in listed] == [spam["id"]]


def test_archiving_shows_under_label_id_inbox_as_it_carried_inbox_until_then(
    sandbox: SandboxClient, service: Any
) -> None:
    delivered = sandbox.deliver(ADDRESS, message(1))
    start = current(service)
    archived = sandbox.archive(ADDRESS, delivered["id"])

    records = history(service, start, labelId="INBOX", historyTypes=["labelRemoved"])

    assert [(r["id"], r["labelsRemoved"][0]["labelIds"]) for r in records] == [(archived["historyId"], ["INBOX"])]
    assert history(service, start, labelId="INBOX", historyTypes=["labelAdded", "messageAdded"]) == []


def test_deleting_writes_messages_deleted_and_the_message_is_gone(sandbox: SandboxClient, service: Any) -> None:
    delivered = sandbox.deliver(ADDRESS, message(1))
    start = current(service)

    assert sandbox.delete_gmail(ADDRESS, [delivered["id"]]) == 1

    records = history(service, start, labelId="INBOX")
    assert records == [
        {
            "id": current(service),
            "messages": [{"id": delivered["id"], "threadId": delivered["threadId"]}],
            "messagesDeleted": [
                {"message": {"id": delivered["id"], "threadId": delivered["threadId"], "labelIds": ["INBOX", "UNREAD"]}}
            ],
        }
    ]
    with pytest.raises(HttpError) as caught:
        service.users().messages().get(userId="me", id=delivered["id"]).execute()
    assert caught.value.status_code == 404


def test_a_change_that_changes_nothing_writes_no_record(sandbox: SandboxClient, service: Any) -> None:
    delivered = sandbox.deliver(ADDRESS, message(1))
    start = current(service)

    sandbox.modify_labels(ADDRESS, delivered["id"], add=["INBOX"], remove=["STARRED"])

    assert history(service, start) == [] and current(service) == start


def test_internal_date_is_the_arrival_time_not_the_date_header(sandbox: SandboxClient, service: Any) -> None:
    old = message(1).replace("Date: Mon, 02 Nov 2026 10:01:00 +0000", "Date: Tue, 02 Jan 2001 10:00:00 +0000")
    before = datetime.now(UTC).timestamp() * 1000
    delivered = sandbox.deliver(ADDRESS, old)
    after = datetime.now(UTC).timestamp() * 1000
    given = sandbox.deliver(ADDRESS, old, internal_date=datetime(2026, 1, 5, 12, 0, tzinfo=UTC))

    messages = service.users().messages()
    arrived = int(messages.get(userId="me", id=delivered["id"], format="minimal").execute()["internalDate"])
    assert before - 1000 <= arrived <= after + 1000
    stated = messages.get(userId="me", id=given["id"], format="minimal").execute()["internalDate"]
    assert stated == str(int(datetime(2026, 1, 5, 12, 0, tzinfo=UTC).timestamp() * 1000))


def test_an_unknown_history_type_is_a_400(sandbox: SandboxClient, service: Any) -> None:
    # googleapiclient refuses it before sending, so ask over plain HTTP as another client could.
    token = sandbox.issue_token(ADDRESS)["access_token"]
    response = requests.get(
        f"{settings.GMAIL_API_ENDPOINT.rstrip('/')}/gmail/v1/users/me/history",
        params={"startHistoryId": current(service), "historyTypes": ["messageAdded", "bogus"]},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert response.status_code == 400
    assert response.json()["error"]["errors"][0]["reason"] == "invalidArgument"


@pytest.mark.parametrize(
    ("path", "body", "status", "text"),
    [
        ("/gmail/messages/labels", {"id": "18f0000000000000", "add": ["INBOX"]}, 404, "no message"),
        ("/gmail/messages/labels", {"id": "X", "add": [], "remove": []}, 400, "add and/or remove"),
        ("/gmail/messages/labels", {"id": "X", "add": ["INBOX"], "remove": ["INBOX"]}, 400, "both"),
        ("/gmail/messages/labels", {"id": "X", "add": [" "]}, 400, "non-empty"),
        ("/gmail/messages/delete", {"ids": []}, 400, "ids"),
        ("/gmail/messages/delete", {"ids": ["18f0000000000000"]}, 404, "no message"),
    ],
)
def test_control_routes_name_what_is_wrong(
    sandbox: SandboxClient, service: Any, path: str, body: dict[str, Any], status: int, text: str
) -> None:
    with pytest.raises(SandboxControlError) as caught:
        sandbox.call("POST", path, json={"address": ADDRESS, **body})
    assert caught.value.status == status and text in caught.value.body
