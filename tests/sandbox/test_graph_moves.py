"""Moving Outlook mail between folders, read through Graph's inbox delta with requests (reference §B.1): a move out
is an @removed entry, a move in is a new item subject to the round's persisted $filter, receivedDateTime and
the immutable id stay, and the REST id changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from sandbox.client import SandboxClient, SandboxControlError
from tests.sandbox.test_graph_sandbox import ADDRESS, IMMUTABLE, Graph, deliver

INBOX_DELTA = "/me/mailFolders/inbox/messages/delta"


@pytest.fixture
def graph(sandbox: SandboxClient) -> Graph:
    sandbox.create_outlook_mailbox(ADDRESS)
    return Graph(sandbox.issue_microsoft_token(ADDRESS)["access_token"])


def by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in items}


def test_moving_out_of_the_inbox_is_removed_and_moving_back_is_new_again(sandbox: SandboxClient, graph: Graph) -> None:
    received = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    kept, moved = deliver(sandbox, 1), deliver(sandbox, 2, received_at=received)
    _, delta_link, _ = graph.delta_round(INBOX_DELTA, page_size=5)

    answer = sandbox.move_outlook(ADDRESS, [moved], "archive")
    out_items, delta_link, _ = graph.delta_round(delta_link, page_size=5)
    sandbox.move_outlook(ADDRESS, [moved], "inbox")
    in_items, delta_link, _ = graph.delta_round(delta_link, page_size=5)

    assert answer[0]["id"] == moved and answer[0]["folder"] == "archive"
    assert out_items == [{"@odata.type": "#microsoft.graph.message", "id": moved, "@removed": {"reason": "deleted"}}]
    assert [i["id"] for i in in_items] == [moved]
    assert "@removed" not in in_items[0]
    assert in_items[0]["receivedDateTime"] == "2026-11-02T09:00:00Z"  # a move keeps the arrival time
    assert kept not in by_id(out_items + in_items)
    assert graph.delta_round(delta_link, page_size=5)[0] == []


def test_a_move_can_say_changed_as_the_removed_reason(sandbox: SandboxClient, graph: Graph) -> None:
    message = deliver(sandbox, 1)
    _, delta_link, _ = graph.delta_round(INBOX_DELTA, page_size=5)

    sandbox.move_outlook(ADDRESS, [message], "deleteditems", removed_reason="changed")

    items = graph.delta_round(delta_link, page_size=5)[0]
    assert items == [{"@odata.type": "#microsoft.graph.message", "id": message, "@removed": {"reason": "changed"}}]


def test_an_old_message_moved_in_shows_only_in_an_unfiltered_delta(sandbox: SandboxClient, graph: Graph) -> None:
    now = datetime.now(UTC)
    old = deliver(sandbox, 1, received_at=now - timedelta(days=30), folder="archive")
    since = quote((now - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ"), safe="")
    _, filtered_link, _ = graph.delta_round(f"{INBOX_DELTA}?$filter=receivedDateTime ge {since}", page_size=5)
    _, plain_link, _ = graph.delta_round(INBOX_DELTA, page_size=5)

    sandbox.move_outlook(ADDRESS, [old], "inbox")

    assert graph.delta_round(filtered_link, page_size=5)[0] == []  # the filter in the token still applies
    assert [i["id"] for i in graph.delta_round(plain_link, page_size=5)[0]] == [old]


def test_a_recent_message_moved_in_passes_the_filter(sandbox: SandboxClient, graph: Graph) -> None:
    now = datetime.now(UTC)
    spam = deliver(sandbox, 1, received_at=now - timedelta(hours=2), folder="junkemail")
    since = quote((now - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ"), safe="")
    first, delta_link, _ = graph.delta_round(f"{INBOX_DELTA}?$filter=receivedDateTime ge {since}", page_size=5)
    assert first == []  # junk mail is not in the inbox

    sandbox.move_outlook(ADDRESS, [spam], "inbox")

    assert [i["id"] for i in graph.delta_round(delta_link, page_size=5)[0]] == [spam]


def test_each_folder_has_its_own_delta(sandbox: SandboxClient, graph: Graph) -> None:
    inbox = deliver(sandbox, 1)
    junk = deliver(sandbox, 2, folder="JunkEmail")
    receipts = deliver(sandbox, 3, folder="Receipts")

    assert [i["id"] for i in graph.delta_round(INBOX_DELTA, page_size=5)[0]] == [inbox]
    junk_items, junk_link, _ = graph.delta_round("/me/mailFolders/junkemail/messages/delta", page_size=5)
    assert [i["id"] for i in junk_items] == [junk]
    folder_id = graph.get(f"/me/messages/{receipts}?$select=parentFolderId").json()["parentFolderId"]
    inbox_id = graph.get(f"/me/messages/{inbox}?$select=parentFolderId").json()["parentFolderId"]
    assert folder_id != inbox_id
    assert [i["id"] for i in graph.delta_round(f"/me/mailFolders/{folder_id}/messages/delta", page_size=5)[0]] == [
        receipts
    ]

    sandbox.move_outlook(ADDRESS, [junk], "inbox")
    assert graph.delta_round(junk_link, page_size=5)[0][0]["@removed"] == {"reason": "deleted"}


def test_the_rest_id_changes_on_a_move_and_the_immutable_id_does_not(sandbox: SandboxClient, graph: Graph) -> None:
    delivered = sandbox.deliver_outlook(ADDRESS, subject="Invoice", sender="billing@example.org", body="Pay it.")
    _, rest_link, _ = graph.delta_round(INBOX_DELTA, page_size=5, prefer="odata.maxpagesize=5")

    moved = sandbox.move_outlook(ADDRESS, [delivered["id"]], "archive")[0]

    assert moved["id"] == delivered["id"] and moved["rest_id"] != delivered["rest_id"]
    assert graph.get(f"/me/messages/{delivered['rest_id']}").status_code == 404
    assert graph.get(f"/me/messages/{moved['rest_id']}", prefer=[IMMUTABLE]).json()["id"] == delivered["id"]
    removed = graph.delta_round(rest_link, page_size=5, prefer="odata.maxpagesize=5")[0]
    assert removed == [
        {"@odata.type": "#microsoft.graph.message", "id": delivered["rest_id"], "@removed": {"reason": "deleted"}}
    ]


def test_mail_that_never_reached_the_client_leaves_without_a_word(sandbox: SandboxClient, graph: Graph) -> None:
    _, delta_link, _ = graph.delta_round(INBOX_DELTA, page_size=5)
    arrived_and_left = deliver(sandbox, 1)
    sandbox.move_outlook(ADDRESS, [arrived_and_left], "archive")

    assert graph.delta_round(delta_link, page_size=5)[0] == []


def test_received_date_time_is_the_arrival_time_not_the_date_header(sandbox: SandboxClient, graph: Graph) -> None:
    raw = (
        "From: Old Sender <old@example.org>\r\nTo: grace@example.com\r\nSubject: From the archive\r\n"
        "Date: Tue, 02 Jan 2001 10:00:00 +0000\r\nMessage-ID: <old@example.org>\r\n\r\nHello.\r\n"
    )
    before = datetime.now(UTC).replace(microsecond=0)
    delivered = sandbox.deliver_outlook(ADDRESS, raw)
    after = datetime.now(UTC)

    message = graph.get(f"/me/messages/{delivered['id']}?$select=receivedDateTime,sentDateTime").json()
    received = datetime.fromisoformat(message["receivedDateTime"].replace("Z", "+00:00"))
    assert before <= received <= after
    assert message["sentDateTime"] == "2001-01-02T10:00:00Z"


def test_moving_to_the_same_folder_changes_nothing(sandbox: SandboxClient, graph: Graph) -> None:
    message = deliver(sandbox, 1)
    _, delta_link, _ = graph.delta_round(INBOX_DELTA, page_size=5)

    sandbox.move_outlook(ADDRESS, [message], "Inbox")

    assert graph.delta_round(delta_link, page_size=5)[0] == []


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"ids": ["AAkALgAAAAAAHYQDEapmEc2byACqAC-EWg0Anope"], "folder": "archive"}, 404, "no message"),
        ({"ids": [], "folder": "archive"}, 400, "ids"),
        ({"ids": ["x"], "folder": ""}, 400, "folder"),
        ({"ids": ["x"], "folder": "archive", "removed_reason": "moved"}, 400, "removed_reason"),
    ],
)
def test_move_names_what_is_wrong(
    sandbox: SandboxClient, graph: Graph, body: dict[str, Any], status: int, text: str
) -> None:
    with pytest.raises(SandboxControlError) as caught:
        sandbox.call("POST", "/graph/messages/move", json={"address": ADDRESS, **body})
    assert caught.value.status == status and text in caught.value.body


def test_a_move_sets_last_modified_and_a_delivery_is_as_old_as_its_receipt(
    sandbox: SandboxClient, graph: Graph
) -> None:
    received = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    moved = deliver(sandbox, 1, received_at=received, folder="archive")
    untouched = deliver(sandbox, 2, received_at=received)
    before_move = datetime.now(UTC).replace(microsecond=0)

    sandbox.move_outlook(ADDRESS, [moved], "inbox")
    items = by_id(graph.delta_round(f"{INBOX_DELTA}?$select=receivedDateTime,lastModifiedDateTime", page_size=5)[0])

    assert items[untouched]["lastModifiedDateTime"] == "2026-11-02T09:00:00Z"
    assert items[moved]["receivedDateTime"] == "2026-11-02T09:00:00Z"
    assert datetime.fromisoformat(items[moved]["lastModifiedDateTime"]) >= before_move
