"""GmailProvider against the sandbox: deltas, batched fetches, refresh and the typed errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from integrations.providers.base import (
    CursorExpired,
    ProviderAuthError,
    ProviderError,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderUnavailable,
)
from integrations.providers.gmail import GmailProvider, gmail_credentials
from sandbox.client import SandboxClient
from sandbox.gmail import message_deliver
from sandbox.server import SandboxServer

ADDRESS = "linus@example.com"


def raw_message(number: int, *, body: str | None = None) -> str:
    return (
        f'From: "Sender {number}" <sender{number}@example.org>\r\n'
        f"To: {ADDRESS}\r\n"
        f"Subject: Task {number}\r\n"
        "Date: Mon, 02 Nov 2026 10:00:00 +0000\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "\r\n"
        f"{body or f'Please do task {number}.'}\r\n"
    )


def connect(sandbox: SandboxClient, **token_options: Any) -> tuple[GmailProvider, dict[str, Any]]:
    sandbox.create_mailbox(ADDRESS)
    tokens = sandbox.issue_token(ADDRESS, **token_options)
    credentials = gmail_credentials(
        access_token=tokens["access_token"],
        refresh_token=tokens["refresh_token"],
        expiry=datetime.fromisoformat(tokens["expiry"]),
    )
    return GmailProvider(credentials, address=ADDRESS), tokens


def calls(sandbox: SandboxClient, service: str, method: str, path_start: str) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests(service) if r["method"] == method and r["path"].startswith(path_start)]


@pytest.fixture
def no_retries(settings: Any) -> None:
    settings.GMAIL_NUM_RETRIES = 0


def test_fetch_delta_over_several_pages_returns_exactly_the_new_inbox_ids(
    sandbox: SandboxClient, sandbox_server: SandboxServer
) -> None:
    provider, _ = connect(sandbox)
    state = sandbox_server.state
    message_deliver(state, ADDRESS, raw_message(0).encode())  # before the cursor
    cursor = provider.current_cursor()
    new_ids = []
    for n in range(1, 1101):
        labels = ["SENT"] if n % 100 == 0 else None  # sent mail is not new inbox mail
        stored = message_deliver(state, ADDRESS, raw_message(n).encode(), labels=labels)
        if labels is None:
            new_ids.append(stored.id)
    sandbox.clear_requests()

    delta = provider.fetch_delta(cursor)

    assert delta.message_ids == new_ids
    assert delta.new_cursor == provider.current_cursor()
    assert len(calls(sandbox, "gmail", "GET", "/gmail/v1/users/me/history")) == 3


def test_fetch_delta_with_nothing_new_keeps_the_cursor(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    cursor = provider.current_cursor()

    delta = provider.fetch_delta(cursor)

    assert delta.message_ids == [] and delta.new_cursor == cursor


def test_expired_history_raises_cursor_expired(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    cursor = provider.current_cursor()
    sandbox.deliver(ADDRESS, raw_message(1))
    sandbox.expire_history(ADDRESS)

    with pytest.raises(CursorExpired):
        provider.fetch_delta(cursor)


def test_fetch_emails_of_45_ids_makes_exactly_three_batch_posts(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    ids = [sandbox.deliver(ADDRESS, raw_message(n))["id"] for n in range(45)]
    sandbox.clear_requests()

    emails = provider.fetch_emails(ids).emails

    assert [e.message_id for e in emails] == ids
    assert len(calls(sandbox, "gmail", "POST", "/batch/gmail/v1")) == 3
    assert len(calls(sandbox, "gmail", "GET", "/gmail/v1/users/me/messages/")) == 45


def test_fetched_email_carries_what_the_pipeline_needs(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    when = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    delivered = sandbox.deliver(ADDRESS, raw_message(7, body="Sign the lease by Friday."), internal_date=when)

    [email] = provider.fetch_emails([delivered["id"]]).emails

    assert email.provider == "gmail"
    assert email.thread_id == delivered["threadId"]
    assert email.sender == "Sender 7 <sender7@example.org>"
    assert email.subject == "Task 7"
    assert email.received_at == when
    assert email.body_text == "Sign the lease by Friday."
    assert email.web_link == f"https://mail.google.com/mail/?authuser=linus%40example.com#all/{delivered['id']}"


def test_a_message_missing_twice_in_one_fetch_is_a_failure_of_its_own_not_a_deletion(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    kept = sandbox.deliver(ADDRESS, raw_message(1))["id"]
    sandbox.clear_requests()

    fetched = provider.fetch_emails(["18f0fffffffffff0", kept])

    assert [e.message_id for e in fetched.emails] == [kept]
    assert list(fetched.failed) == ["18f0fffffffffff0"]
    assert isinstance(fetched.failed["18f0fffffffffff0"], ProviderNotFound)  # the pipeline decides, later
    reads = calls(sandbox, "gmail", "GET", "/gmail/v1/users/me/messages/18f0fffffffffff0")
    assert [r["status"] for r in reads] == [404, 404]


def test_a_message_deleted_since_the_cursor_is_not_listed(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    cursor = provider.current_cursor()
    ids = [sandbox.deliver(ADDRESS, raw_message(n))["id"] for n in range(3)]
    sandbox.delete_gmail(ADDRESS, [ids[1]])

    assert provider.fetch_delta(cursor).message_ids == [ids[0], ids[2]]


def test_a_passing_404_is_not_a_deletion(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    ids = [sandbox.deliver(ADDRESS, raw_message(n))["id"] for n in range(3)]
    sandbox.fault("gmail", 404, route=f"^GET /gmail/v1/users/me/messages/{ids[1]}\\?", times=1)

    fetched = provider.fetch_emails(ids)

    assert [e.message_id for e in fetched.emails] == ids
    assert fetched.failed == {}


def test_a_message_that_keeps_failing_is_its_own_failure_not_the_mailboxs(
    sandbox: SandboxClient, no_retries: None
) -> None:
    provider, _ = connect(sandbox)
    ids = [sandbox.deliver(ADDRESS, raw_message(n))["id"] for n in range(3)]
    sandbox.fault("gmail", 500, route=f"^GET /gmail/v1/users/me/messages/{ids[1]}\\?", times=None)

    fetched = provider.fetch_emails(ids)

    assert [e.message_id for e in fetched.emails] == [ids[0], ids[2]]
    assert list(fetched.failed) == [ids[1]]
    assert isinstance(fetched.failed[ids[1]], ProviderUnavailable)


@pytest.mark.parametrize(
    "error",
    [
        {  # Google's current shape: the legacy list and google.rpc details side by side
            "code": 403,
            "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute per user'.",
            "errors": [{"message": "Rate Limit Exceeded", "domain": "usageLimits", "reason": "userRateLimitExceeded"}],
            "status": "PERMISSION_DENIED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": {"service": "gmail.googleapis.com", "quota_limit": "QueriesPerMinutePerUser"},
                }
            ],
        },
        {  # details only
            "code": 403,
            "message": "Quota exceeded.",
            "status": "PERMISSION_DENIED",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}],
        },
        {  # the legacy daily limit
            "code": 403,
            "message": "Daily Limit Exceeded",
            "errors": [{"message": "Daily Limit Exceeded", "domain": "usageLimits", "reason": "dailyLimitExceeded"}],
        },
    ],
)
def test_a_403_rate_limit_in_any_shape_google_sends_is_rate_limiting_not_auth(
    sandbox: SandboxClient, no_retries: None, error: dict[str, Any]
) -> None:
    provider, _ = connect(sandbox)
    sandbox.fault("gmail", 403, body={"error": error}, route="/profile")

    with pytest.raises(ProviderRateLimited):
        provider.current_cursor()


def test_only_a_documented_auth_reason_makes_a_403_an_auth_error(sandbox: SandboxClient, no_retries: None) -> None:
    provider, _ = connect(sandbox)
    body = {
        "error": {
            "code": 403,
            "message": "Request had insufficient authentication scopes.",
            "errors": [{"message": "Insufficient Permission", "domain": "global", "reason": "insufficientPermissions"}],
            "status": "PERMISSION_DENIED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT"}
            ],
        }
    }
    sandbox.fault("gmail", 403, body=body, route="/profile", times=1)
    with pytest.raises(ProviderAuthError):
        provider.current_cursor()

    sandbox.fault("gmail", 403, body={"error": {"code": 403, "message": "Forbidden"}}, route="/profile", times=1)
    with pytest.raises(ProviderError) as caught:
        provider.current_cursor()
    assert not isinstance(caught.value, ProviderAuthError | ProviderRateLimited)


def test_a_rate_limited_batch_part_raises_rate_limited(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    ids = [sandbox.deliver(ADDRESS, raw_message(n))["id"] for n in range(5)]
    sandbox.fault("gmail", 429, route=f"^GET /gmail/v1/users/me/messages/{ids[2]}\\?", headers={"Retry-After": "7"})

    with pytest.raises(ProviderRateLimited) as caught:
        provider.fetch_emails(ids)

    assert caught.value.retry_after == 7
    assert len(calls(sandbox, "gmail", "POST", "/batch/gmail/v1")) == 1


def test_a_user_rate_limit_403_raises_rate_limited(sandbox: SandboxClient, no_retries: None) -> None:
    provider, _ = connect(sandbox)
    body = {
        "error": {
            "errors": [
                {"domain": "usageLimits", "reason": "userRateLimitExceeded", "message": "User Rate Limit Exceeded"}
            ],
            "code": 403,
            "message": "User Rate Limit Exceeded",
        }
    }
    sandbox.fault("gmail", 403, body=body, route="/profile")

    with pytest.raises(ProviderRateLimited) as caught:
        provider.current_cursor()
    assert caught.value.retry_after is None


def test_a_server_error_raises_unavailable(sandbox: SandboxClient, no_retries: None) -> None:
    provider, _ = connect(sandbox)
    sandbox.fault("gmail", 503, route="/history")

    with pytest.raises(ProviderUnavailable):
        provider.fetch_delta("1")


def test_an_unreachable_gmail_raises_unavailable(sandbox: SandboxClient, settings: Any, no_retries: None) -> None:
    settings.GMAIL_API_ENDPOINT = "http://127.0.0.1:9"  # discard port: nothing listens
    provider, _ = connect(sandbox)

    with pytest.raises(ProviderUnavailable):
        provider.current_cursor()


def test_an_expired_access_token_is_refreshed_and_exposed_for_saving(sandbox: SandboxClient) -> None:
    provider, tokens = connect(sandbox)
    sandbox.expire_token(access_token=tokens["access_token"])  # Gmail now answers 401

    cursor = provider.current_cursor()

    assert provider.credentials_refreshed
    new_token = provider.credentials.token
    assert new_token != tokens["access_token"]
    expiry = provider.credentials.expiry
    assert expiry is not None and expiry > datetime.now(UTC).replace(tzinfo=None)
    assert len(calls(sandbox, "google_oauth", "POST", "/google/token")) == 1
    # What the caller re-saves works on its own, without another refresh.
    saved = gmail_credentials(
        access_token=new_token, refresh_token=tokens["refresh_token"], expiry=provider.credentials.expiry
    )
    sandbox.clear_requests()
    assert GmailProvider(saved).current_cursor() == cursor
    assert calls(sandbox, "google_oauth", "POST", "/google/token") == []


def test_a_token_known_to_be_expired_is_refreshed_before_the_call(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox, expires_in=0)

    provider.fetch_emails([sandbox.deliver(ADDRESS, raw_message(1))["id"]])

    assert provider.credentials_refreshed
    assert [r["status"] for r in calls(sandbox, "gmail", "POST", "/batch/gmail/v1")] == [200]


def test_a_revoked_refresh_token_raises_auth_error(sandbox: SandboxClient) -> None:
    provider, tokens = connect(sandbox)
    message_id = sandbox.deliver(ADDRESS, raw_message(1))["id"]
    sandbox.revoke(refresh_token=tokens["refresh_token"])

    with pytest.raises(ProviderAuthError):
        provider.current_cursor()
    with pytest.raises(ProviderAuthError):
        provider.fetch_emails([message_id])


def test_backfill_lists_the_newest_inbox_messages_after_a_time_oldest_first(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    now = datetime.now(UTC)
    sandbox.deliver(ADDRESS, raw_message(0), internal_date=now - timedelta(days=30))
    recent = [
        sandbox.deliver(ADDRESS, raw_message(n), internal_date=now - timedelta(hours=10 - n))["id"] for n in range(5)
    ]
    sandbox.deliver(ADDRESS, raw_message(9), labels=["SENT"], internal_date=now)

    ids = provider.backfill_message_ids(after=now - timedelta(days=7), limit=3)

    assert ids == recent[-3:]


def test_every_demo_email_is_read_with_a_body(sandbox: SandboxClient, sandbox_server: SandboxServer) -> None:
    from sandbox.demo import load_demo_mailbox

    provider, _ = connect(sandbox)
    cursor = provider.current_cursor()
    load_demo_mailbox(sandbox_server.state, ADDRESS)

    delta = provider.fetch_delta(cursor)
    emails = provider.fetch_emails(delta.message_ids).emails

    assert len(emails) == len(delta.message_ids) >= 10
    assert all(e.body_text and e.sender and e.received_at.tzinfo for e in emails)


def test_a_text_part_with_a_file_name_but_no_attachment_disposition_is_the_body(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    raw = (
        f"From: Sender <sender@example.org>\r\nTo: {ADDRESS}\r\nSubject: Notes\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/mixed; boundary="b1"\r\n\r\n'
        "--b1\r\n"
        'Content-Type: text/plain; charset=utf-8; name="message.txt"\r\n\r\n'
        "Please sign the lease by Friday.\r\n"
        "--b1\r\n"
        'Content-Type: application/pdf; name="lease.pdf"\r\n'
        'Content-Disposition: attachment; filename="lease.pdf"\r\n'
        "Content-Transfer-Encoding: base64\r\n\r\n"
        "JVBERi0xLjQK\r\n"
        "--b1--\r\n"
    )
    message_id = sandbox.deliver(ADDRESS, raw)["id"]
    sandbox.clear_requests()

    [email] = provider.fetch_emails([message_id]).emails

    assert email.body_text == "Please sign the lease by Friday."
    assert len(calls(sandbox, "gmail", "GET", f"/gmail/v1/users/me/messages/{message_id}/attachments/")) == 1


@pytest.mark.parametrize(
    ("labels", "change"),
    [
        (["INBOX"], "unarchive"),  # archived, then moved back to the inbox
        (["SPAM"], "not_spam"),  # "Not spam"
        (["Label_1"], "to_inbox"),  # a filter put it under a label; the person moves it to the inbox
    ],
)
def test_mail_labelled_into_the_inbox_later_is_in_the_delta(
    sandbox: SandboxClient, labels: list[str], change: str
) -> None:
    provider, _ = connect(sandbox)
    message_id = sandbox.deliver(ADDRESS, raw_message(1), labels=labels)["id"]
    if change == "unarchive":
        sandbox.archive(ADDRESS, message_id)
    cursor = provider.current_cursor()

    sandbox.modify_labels(ADDRESS, message_id, add=["INBOX"], remove=[lab for lab in labels if lab != "INBOX"])
    delta = provider.fetch_delta(cursor)

    assert delta.message_ids == [message_id]
    assert provider.fetch_delta(delta.new_cursor).message_ids == []


def test_mail_that_never_enters_the_inbox_is_not_in_the_delta(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    cursor = provider.current_cursor()
    message_id = sandbox.deliver(ADDRESS, raw_message(1), labels=["SPAM"])["id"]
    sandbox.modify_labels(ADDRESS, message_id, add=["STARRED"])

    assert provider.fetch_delta(cursor).message_ids == []


def test_a_resync_takes_the_cursor_first_and_lists_the_newest_mail_since(sandbox: SandboxClient) -> None:
    provider, _ = connect(sandbox)
    now = datetime.now(UTC)
    sandbox.deliver(ADDRESS, raw_message(0), internal_date=now - timedelta(days=3))
    recent = [
        sandbox.deliver(ADDRESS, raw_message(n), internal_date=now - timedelta(hours=10 - n))["id"] for n in range(1, 6)
    ]
    last_read = provider.current_cursor()  # the old cursor: everything above was in the inbox, unchanged

    delta = provider.resync(now - timedelta(days=1), 3, cursor=last_read, handled=lambda ids: set())

    assert delta.message_ids == recent[-3:]  # the newest, oldest first
    assert delta.not_read == 2
    assert provider.fetch_delta(delta.new_cursor).message_ids == []


def test_a_resync_lists_old_mail_labelled_into_the_inbox_and_leaves_out_what_the_ledger_holds(
    sandbox: SandboxClient,
) -> None:
    provider, _ = connect(sandbox)
    now = datetime.now(UTC)
    archived = sandbox.deliver(ADDRESS, raw_message(0), labels=["Label_7"], internal_date=now - timedelta(days=30))
    handled = sandbox.deliver(ADDRESS, raw_message(1), internal_date=now - timedelta(hours=1))["id"]
    untouched = sandbox.deliver(ADDRESS, raw_message(2), internal_date=now - timedelta(days=20))["id"]
    last_read = provider.current_cursor()
    sandbox.modify_labels(ADDRESS, archived["id"], add=["INBOX"])
    sandbox.clear_requests()

    delta = provider.resync(now - timedelta(days=1), 10, cursor=last_read, handled=lambda ids: {handled} & set(ids))

    assert delta.message_ids == [archived["id"]]  # received a month ago, moved in after the last read
    assert delta.not_read == 0
    looked_at = [r for r in sandbox.requests("gmail") if "format=minimal" in r["query"]]
    assert sorted(r["path"].rsplit("/", 1)[1] for r in looked_at) == sorted([archived["id"], untouched])
