"""The sandbox's Gmail API answers google-api-python-client the way Gmail does (reference §A)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import google_auth_httplib2
import httplib2
import pytest
import requests
from django.conf import settings
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError
from googleapiclient.http import BatchHttpRequest

from sandbox.client import SandboxClient, SandboxControlError
from sandbox.server import SandboxServer

ADDRESS = "grace@example.com"


def gmail(access_token: str | None) -> Any:
    """A Gmail client with a fixed token and no refresh, so a 401 reaches the test."""
    if access_token is None:
        http: Any = httplib2.Http(timeout=5)
    else:
        http = google_auth_httplib2.AuthorizedHttp(
            Credentials(token=access_token), http=httplib2.Http(timeout=5), refresh_status_codes=()
        )
    return build(
        "gmail",
        "v1",
        http=http,
        static_discovery=True,
        cache_discovery=False,
        client_options={"api_endpoint": settings.GMAIL_API_ENDPOINT},
    )


def message(number: int, *, subject: str | None = None) -> str:
    return (
        f"From: Sender {number} <sender{number}@example.org>\r\n"
        f"To: {ADDRESS}\r\n"
        f"Subject: {subject or f'Message {number}'}\r\n"
        f"Date: Mon, 02 Nov 2026 10:{number % 60:02d}:00 +0000\r\n"
        f"Message-ID: <m{number}@example.org>\r\n"
        "\r\n"
        f"Body of message {number}.\r\n"
    )


def rich_message() -> bytes:
    mail = EmailMessage()
    mail["From"] = "Zoë Example <zoe@example.org>"
    mail["To"] = ADDRESS
    mail["Subject"] = "Quarterly report — please review"
    mail["Date"] = "Tue, 03 Nov 2026 09:30:00 +0100"
    mail.set_content("Plain text: review by Friday.\n")
    mail.add_alternative("<p>HTML: review by <b>Friday</b>.</p>", subtype="html")
    mail.add_attachment(b"%PDF-1.4 fake", maintype="application", subtype="pdf", filename="report.pdf")
    return bytes(mail)


def b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


@pytest.fixture
def token(sandbox: SandboxClient) -> str:
    sandbox.create_mailbox(ADDRESS, history_id_start=5000)
    access_token: str = sandbox.issue_token(ADDRESS)["access_token"]
    return access_token


def test_history_list_pages_through_every_added_message_in_order(sandbox: SandboxClient, token: str) -> None:
    service = gmail(token)
    start = service.users().getProfile(userId="me").execute()["historyId"]
    delivered = [sandbox.deliver(ADDRESS, message(n))["id"] for n in range(7)]
    sandbox.deliver(ADDRESS, message(99), labels=["SENT"])  # not in the inbox

    pages, token_ = [], None
    while True:
        page = (
            service.users()
            .history()
            .list(
                userId="me",
                startHistoryId=start,
                historyTypes=["messageAdded"],
                labelId="INBOX",
                maxResults=3,
                pageToken=token_,
            )
            .execute()
        )
        pages.append(page)
        token_ = page.get("nextPageToken")
        if not token_:
            break

    assert len(pages) == 3
    records = [r for p in pages for r in p["history"]]
    assert [r["messagesAdded"][0]["message"]["id"] for r in records] == delivered
    ids = [int(r["id"]) for r in records]
    assert ids == sorted(ids) and ids[0] > int(start)
    final = service.users().getProfile(userId="me").execute()["historyId"]
    assert isinstance(final, str)
    assert {p["historyId"] for p in pages} == {final}


def test_history_with_nothing_new_is_just_the_history_id(sandbox: SandboxClient, token: str) -> None:
    service = gmail(token)
    start = service.users().getProfile(userId="me").execute()["historyId"]

    page = service.users().history().list(userId="me", startHistoryId=start).execute()

    assert page == {"historyId": start}


def test_expired_history_is_gmail_s_404(sandbox: SandboxClient, token: str) -> None:
    service = gmail(token)
    start = service.users().getProfile(userId="me").execute()["historyId"]
    sandbox.deliver(ADDRESS, message(1))
    sandbox.expire_history(ADDRESS)

    with pytest.raises(HttpError) as caught:
        service.users().history().list(userId="me", startHistoryId=start).execute()

    assert caught.value.status_code == 404
    assert json.loads(caught.value.content) == {
        "error": {
            "code": 404,
            "message": "Requested entity was not found.",
            "errors": [{"message": "Requested entity was not found.", "domain": "global", "reason": "notFound"}],
            "status": "NOT_FOUND",
        }
    }


def test_malformed_start_history_id_is_a_400(sandbox: SandboxClient, token: str) -> None:
    with pytest.raises(HttpError) as caught:
        gmail(token).users().history().list(userId="me", startHistoryId="abc").execute()

    assert caught.value.status_code == 400
    assert caught.value.error_details[0]["reason"] == "invalidArgument"


def test_messages_get_in_every_format(sandbox: SandboxClient, token: str) -> None:
    raw = rich_message()
    arrived = datetime(2026, 11, 3, 8, 31, 7, tzinfo=UTC)  # a minute after its Date header
    delivered = sandbox.deliver(ADDRESS, raw, internal_date=arrived)
    messages = gmail(token).users().messages()

    full = messages.get(userId="me", id=delivered["id"], format="full").execute()
    raw_form = messages.get(userId="me", id=delivered["id"], format="raw").execute()
    metadata = messages.get(
        userId="me", id=delivered["id"], format="metadata", metadataHeaders=["From", "Subject"]
    ).execute()
    minimal = messages.get(userId="me", id=delivered["id"], format="minimal").execute()

    payload = full["payload"]
    assert payload["partId"] == "" and payload["mimeType"] == "multipart/mixed"
    alternative, attachment = payload["parts"]
    plain, html = alternative["parts"]
    assert (alternative["partId"], plain["partId"], html["partId"], attachment["partId"]) == ("0", "0.0", "0.1", "1")
    assert "=" not in plain["body"]["data"]
    assert b64url(plain["body"]["data"]).decode() == "Plain text: review by Friday.\n"
    assert {"name": "Subject", "value": "Quarterly report — please review"} in payload["headers"]
    assert attachment["filename"] == "report.pdf" and "data" not in attachment["body"]
    assert full["historyId"] == delivered["historyId"]
    assert isinstance(full["internalDate"], str)
    assert full["internalDate"] == str(int(arrived.timestamp() * 1000))
    assert full["snippet"].startswith("Plain text: review by Friday.")

    assert "payload" not in raw_form
    assert base64.urlsafe_b64decode(raw_form["raw"]) == raw

    assert [h["name"] for h in metadata["payload"]["headers"]] == ["From", "Subject"]
    assert "parts" not in metadata["payload"] and "raw" not in metadata

    assert "payload" not in minimal and "raw" not in minimal
    assert minimal["labelIds"] == ["INBOX", "UNREAD"]

    fetched = (
        messages.attachments()
        .get(userId="me", messageId=delivered["id"], id=attachment["body"]["attachmentId"])
        .execute()
    )
    assert b64url(fetched["data"]) == b"%PDF-1.4 fake"


def test_unknown_message_is_a_404(sandbox: SandboxClient, token: str) -> None:
    with pytest.raises(HttpError) as caught:
        gmail(token).users().messages().get(userId="me", id="18f0ffffffffffff").execute()
    assert caught.value.status_code == 404


def test_messages_list_filters_by_labels_and_after_and_pages(sandbox: SandboxClient, token: str) -> None:
    now = datetime.now(UTC)
    sandbox.deliver(ADDRESS, message(1), internal_date=now - timedelta(days=10))
    recent = [sandbox.deliver(ADDRESS, message(n), internal_date=now - timedelta(hours=n))["id"] for n in (2, 3, 4)]
    sandbox.deliver(ADDRESS, message(5), labels=["SENT"], internal_date=now)
    after = int((now - timedelta(days=1)).timestamp())
    messages = gmail(token).users().messages()

    first = messages.list(userId="me", labelIds=["INBOX"], q=f"after:{after}", maxResults=2).execute()
    second = messages.list(
        userId="me", labelIds=["INBOX"], q=f"after:{after}", maxResults=2, pageToken=first["nextPageToken"]
    ).execute()

    listed = [m["id"] for m in first["messages"] + second["messages"]]
    assert listed == recent  # newest first
    assert "nextPageToken" not in second
    assert first["resultSizeEstimate"] == 3


def test_a_batch_of_twenty_gets_is_one_post_with_twenty_inner_requests(sandbox: SandboxClient, token: str) -> None:
    ids = [sandbox.deliver(ADDRESS, message(n))["id"] for n in range(20)]
    service = gmail(token)
    results: dict[str, Any] = {}

    def collect(request_id: str, response: Any, error: Exception | None) -> None:
        assert error is None
        results[response["id"]] = response

    batch = BatchHttpRequest(batch_uri=settings.GMAIL_BATCH_URI, callback=collect)
    for message_id in ids:
        batch.add(service.users().messages().get(userId="me", id=message_id, format="raw"))
    sandbox.clear_requests()
    batch.execute()

    assert set(results) == set(ids)
    log = sandbox.requests("gmail")
    assert [(r["method"], r["path"]) for r in log if r["method"] == "POST"] == [("POST", "/batch/gmail/v1")]
    inner = [r for r in log if r["method"] == "GET"]
    assert sorted(r["path"] for r in inner) == sorted(f"/gmail/v1/users/me/messages/{i}" for i in ids)
    assert all("format=raw" in r["query"] for r in inner)


def test_a_fault_hits_only_the_batch_part_it_matches(sandbox: SandboxClient, token: str) -> None:
    ids = [sandbox.deliver(ADDRESS, message(n))["id"] for n in range(3)]
    sandbox.fault("gmail", 429, route=f"GET /gmail/v1/users/me/messages/{ids[1]}\\?", headers={"Retry-After": "7"})
    service = gmail(token)
    outcome: dict[str, Any] = {}

    def collect(request_id: str, response: Any, error: HttpError | None) -> None:
        outcome[request_id] = error or response

    batch = BatchHttpRequest(batch_uri=settings.GMAIL_BATCH_URI, callback=collect)
    for message_id in ids:
        batch.add(service.users().messages().get(userId="me", id=message_id), request_id=message_id)
    batch.execute()

    failed = outcome[ids[1]]
    assert isinstance(failed, HttpError) and failed.status_code == 429
    assert failed.resp["retry-after"] == "7"
    assert outcome[ids[0]]["id"] == ids[0] and outcome[ids[2]]["id"] == ids[2]


def test_a_batch_of_more_than_100_parts_is_refused(sandbox: SandboxClient, token: str) -> None:
    service = gmail(token)
    batch = BatchHttpRequest(batch_uri=settings.GMAIL_BATCH_URI)
    for n in range(101):
        batch.add(service.users().messages().get(userId="me", id=f"{n:016x}"))

    with pytest.raises(HttpError) as caught:
        batch.execute()
    assert caught.value.status_code == 400


@pytest.mark.parametrize(
    ("access_token", "reason", "message", "info_reason"),
    [
        (None, "required", "Login Required.", "CREDENTIALS_MISSING"),
        ("ya29.not-a-token", "authError", "Invalid Credentials", "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
    ],
)
def test_a_missing_or_bad_token_gets_gmail_s_401(
    sandbox: SandboxClient, access_token: str | None, reason: str, message: str, info_reason: str
) -> None:
    with pytest.raises(HttpError) as caught:
        gmail(access_token).users().getProfile(userId="me").execute()

    assert caught.value.status_code == 401
    error = json.loads(caught.value.content)["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    assert error["message"].startswith("Request ")
    assert error["errors"] == [
        {
            "message": message,
            "domain": "global",
            "reason": reason,
            "location": "Authorization",
            "locationType": "header",
        }
    ]
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": info_reason,
            "domain": "googleapis.com",
            "metadata": {"service": "gmail.googleapis.com", "method": "caribou.api.proto.MailboxService.GetProfile"},
        }
    ]
    assert caught.value.error_details == error["details"]  # googleapiclient prefers details over errors


def test_another_user_s_mailbox_is_refused(sandbox: SandboxClient, token: str) -> None:
    sandbox.create_mailbox("someone@example.com")
    with pytest.raises(HttpError) as caught:
        gmail(token).users().getProfile(userId="someone@example.com").execute()
    assert caught.value.status_code == 403


def test_watch_and_stop(sandbox: SandboxClient, token: str) -> None:
    users = gmail(token).users()
    watched = users.watch(userId="me", body={"topicName": "projects/p/topics/gmail", "labelIds": ["INBOX"]}).execute()
    assert watched["historyId"] == users.getProfile(userId="me").execute()["historyId"]
    assert int(watched["expiration"]) > datetime.now(UTC).timestamp() * 1000

    assert users.stop(userId="me").execute() == ""  # stop has no response body; the client gives ""


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/gmail/mailboxes", {"address": "not an address"}, "address"),
        ("/gmail/mailboxes", {"address": ADDRESS, "history_id_start": 0}, "history_id_start"),
        ("/gmail/messages", {"address": ADDRESS}, "raw"),
        ("/gmail/messages", {"address": ADDRESS, "raw": "no headers here"}, "raw"),
        ("/gmail/messages", {"address": ADDRESS, "raw_base64": "***"}, "raw_base64"),
        ("/gmail/messages", {"address": ADDRESS, "raw": message(1), "internal_date": "yesterday"}, "internal_date"),
        ("/gmail/expire-history", {}, "address"),
        ("/google/tokens", {"address": ADDRESS, "expires_in": -1}, "expires_in"),
        ("/google/tokens/revoke", {}, "exactly one"),
    ],
)
def test_control_api_names_the_malformed_field(
    sandbox: SandboxClient, path: str, body: dict[str, Any], field: str
) -> None:
    sandbox.create_mailbox(ADDRESS)
    response = requests.post(f"{sandbox.base_url}/_sandbox{path}", json=body, timeout=5)

    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]


def test_control_api_refuses_delivery_to_an_unknown_mailbox(sandbox: SandboxClient) -> None:
    with pytest.raises(SandboxControlError) as caught:
        sandbox.deliver("nobody@example.com", message(1))
    assert caught.value.status == 404
    assert "nobody@example.com" in caught.value.body


def test_control_api_lists_a_mailbox(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox(ADDRESS)
    delivered = sandbox.deliver(ADDRESS, message(1, subject="Hello"))

    listed = sandbox.mailbox_messages(ADDRESS)

    assert [(m["id"], m["subject"], m["labelIds"]) for m in listed] == [(delivered["id"], "Hello", ["INBOX", "UNREAD"])]


def test_a_reply_joins_the_thread_of_the_message_it_answers(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox(ADDRESS)
    first = sandbox.deliver(ADDRESS, message(1, subject="Invoice"))
    reply = message(2, subject="Re: Invoice").replace(
        "Message-ID: <m2@example.org>", "Message-ID: <m2@example.org>\r\nIn-Reply-To: <m1@example.org>"
    )

    assert sandbox.deliver(ADDRESS, reply)["threadId"] == first["threadId"]


def test_demo_mailbox_loads_and_every_message_renders(sandbox: SandboxClient, sandbox_server: SandboxServer) -> None:
    from sandbox.demo import load_demo_mailbox

    load_demo_mailbox(sandbox_server.state, "demo@example.com")
    access_token = sandbox.issue_token("demo@example.com")["access_token"]
    messages = gmail(access_token).users().messages()

    listed = messages.list(userId="me", labelIds=["INBOX"], maxResults=500).execute()["messages"]
    assert len(listed) >= 10
    for item in listed:
        full = messages.get(userId="me", id=item["id"], format="full").execute()
        assert full["payload"]["headers"] and full["snippet"]
