"""Sent mail read through the real provider classes against the sandbox, with the inbox's semantics: its own
delta and cursor (never usable for the inbox, nor the inbox's for it), its resync after an expired cursor, a
bounded and counted first read of the last 14 days, and the sent message's recipients and conversation
(issue 22 point 1, the provider layer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from integrations.mail.conversation import Recipient
from integrations.providers.base import CursorExpired, cursor_for
from integrations.providers.gmail import GmailProvider, gmail_credentials
from integrations.providers.outlook import OutlookProvider
from sandbox.client import SandboxClient
from tests.sandbox.test_pubsub_push import Receiver, push_data, serving

OWNER = "grace@example.com"
SAM = "Sam Lee <sam@example.org>"
CHRIS = "Chris Doe <chris@example.org>"
TOPIC = "projects/tasklift-sandbox/topics/gmail"
SERVICE_ACCOUNT = "gmail-push@tasklift-sandbox.iam.gserviceaccount.com"
FIRST_READ_DAYS = 14


def incoming(number: int) -> str:
    return (
        f"From: {SAM}\r\n"
        f"To: {OWNER}\r\n"
        f"Subject: Question {number}\r\n"
        "Date: Mon, 02 Nov 2026 10:00:00 +0000\r\n"
        f"Message-ID: <q{number}@example.org>\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "\r\n"
        f"Could you look at item {number}?\r\n"
    )


def gmail_provider(sandbox: SandboxClient) -> GmailProvider:
    sandbox.create_mailbox(OWNER)
    tokens = sandbox.issue_token(OWNER)
    credentials = gmail_credentials(
        access_token=tokens["access_token"],
        refresh_token=tokens["refresh_token"],
        expiry=datetime.fromisoformat(tokens["expiry"]),
    )
    return GmailProvider(credentials, address=OWNER)


def outlook_provider(sandbox: SandboxClient) -> OutlookProvider:
    sandbox.create_outlook_mailbox(OWNER, display_name="Grace Hopper")
    token = sandbox.issue_microsoft_token(OWNER)["access_token"]
    return OutlookProvider(lambda force_refresh=False: token, address=OWNER)


def gmail_send(sandbox: SandboxClient, number: int, *, sent_at: datetime | None = None, **extra: Any) -> str:
    answer = sandbox.send_gmail(OWNER, to=[SAM], body=f"I'll send draft {number} by Friday.", sent_at=sent_at, **extra)
    return str(answer["id"])


def outlook_send(sandbox: SandboxClient, number: int, *, sent_at: datetime | None = None, **extra: Any) -> str:
    answer = sandbox.send_outlook(
        OWNER, to=[SAM], body=f"I'll send draft {number} by Friday.", sent_at=sent_at, **extra
    )
    return str(answer["id"])


def history_calls(sandbox: SandboxClient) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests("gmail") if r["path"] == "/gmail/v1/users/me/history"]


# Gmail ----------------------------------------------------------------------------------------------------
def test_gmail_sent_delta_lists_sent_mail_only_and_the_inbox_delta_never_lists_it(sandbox: SandboxClient) -> None:
    provider = gmail_provider(sandbox)
    inbox_cursor, sent_cursor = provider.current_cursor(), provider.current_cursor(folder="sent")
    received = sandbox.deliver(OWNER, incoming(1))["id"]
    sent = [gmail_send(sandbox, 1), gmail_send(sandbox, 2, in_reply_to=received)]
    reply = sandbox.deliver_gmail_reply(OWNER, sent[1], sender=SAM, body="Thanks, Friday is fine.")["id"]
    sandbox.clear_requests()

    sent_delta = provider.fetch_delta(sent_cursor, folder="sent")
    inbox_delta = provider.fetch_delta(inbox_cursor)

    assert sent_delta.message_ids == sent
    assert inbox_delta.message_ids == [received, reply]
    sent_query, inbox_query = (r["query"] for r in history_calls(sandbox))
    assert "labelId=SENT" in sent_query and "labelId=INBOX" in inbox_query
    # The Sent cursor moved past the sent mail, and reads nothing more; mail sent later is its next delta.
    assert provider.fetch_delta(sent_delta.new_cursor, folder="sent").message_ids == []
    later = gmail_send(sandbox, 3)
    assert provider.fetch_delta(sent_delta.new_cursor, folder="sent").message_ids == [later]
    assert provider.fetch_delta(inbox_delta.new_cursor).message_ids == []


def test_gmail_mail_sent_to_oneself_is_one_message_in_both_folders_and_each_delta_lists_it(
    sandbox: SandboxClient,
) -> None:
    provider = gmail_provider(sandbox)
    inbox_cursor, sent_cursor = provider.current_cursor(), provider.current_cursor(folder="sent")
    note = sandbox.deliver(OWNER, incoming(1).replace(f"From: {SAM}", f"From: {OWNER}"), labels=["SENT", "INBOX"])

    assert provider.fetch_delta(inbox_cursor).message_ids == [note["id"]]
    assert provider.fetch_delta(sent_cursor, folder="sent").message_ids == [note["id"]]  # one id, two folders


def test_gmail_a_cursor_of_one_folder_is_refused_by_the_other_before_any_history_is_read(
    sandbox: SandboxClient,
) -> None:
    provider = gmail_provider(sandbox)
    inbox_cursor, sent_cursor = provider.current_cursor(), provider.current_cursor(folder="sent")
    gmail_send(sandbox, 1)
    sandbox.clear_requests()

    with pytest.raises(CursorExpired):
        provider.fetch_delta(sent_cursor)  # a Sent cursor for the inbox
    with pytest.raises(CursorExpired):
        provider.fetch_delta(inbox_cursor, folder="sent")  # the inbox's for Sent

    assert history_calls(sandbox) == []  # refused here: no folder read from another folder's position


def test_gmail_an_expired_sent_cursor_raises_and_the_sent_resync_finds_what_is_in_sent(
    sandbox: SandboxClient,
) -> None:
    provider = gmail_provider(sandbox)
    now = datetime.now(UTC)
    gmail_send(sandbox, 0, sent_at=now - timedelta(days=30))  # long before the last read: not owed
    handled = gmail_send(sandbox, 1, sent_at=now - timedelta(hours=5))
    sent_cursor = provider.current_cursor(folder="sent")
    recent = [gmail_send(sandbox, n, sent_at=now - timedelta(hours=4 - n)) for n in range(2, 5)]
    sandbox.deliver(OWNER, incoming(1))  # inbox mail is not Sent's
    sandbox.expire_history(OWNER)

    with pytest.raises(CursorExpired):
        provider.fetch_delta(sent_cursor, folder="sent")
    delta = provider.resync(
        now - timedelta(days=1), 2, cursor=sent_cursor, handled=lambda ids: {handled} & set(ids), folder="sent"
    )

    assert delta.message_ids == recent[-2:]  # the newest of what the ledger lacks, oldest first
    assert delta.not_read == 1  # over the bound, counted
    assert provider.fetch_delta(delta.new_cursor, folder="sent").message_ids == []
    with pytest.raises(CursorExpired):
        provider.fetch_delta(delta.new_cursor)  # still a Sent cursor


def test_gmail_first_read_of_sent_covers_14_days_and_counts_what_is_over_its_bound(sandbox: SandboxClient) -> None:
    provider = gmail_provider(sandbox)
    now = datetime.now(UTC)
    gmail_send(sandbox, 0, sent_at=now - timedelta(days=FIRST_READ_DAYS + 1))
    window = [gmail_send(sandbox, n, sent_at=now - timedelta(days=FIRST_READ_DAYS - 1 - n)) for n in range(5)]
    sandbox.deliver(OWNER, incoming(1), internal_date=now - timedelta(days=1))

    delta = provider.first_read(now - timedelta(days=FIRST_READ_DAYS), 3, folder="sent")

    assert delta.message_ids == window[-3:]  # the newest three, oldest first
    assert delta.not_read == 2
    later = gmail_send(sandbox, 9)
    assert provider.fetch_delta(delta.new_cursor, folder="sent").message_ids == [later]


def test_gmail_a_sent_message_carries_its_recipients_and_its_conversation(sandbox: SandboxClient) -> None:
    provider = gmail_provider(sandbox)
    original = sandbox.deliver(OWNER, incoming(1))
    sent = sandbox.send_gmail(OWNER, to=[SAM], cc=[CHRIS], body="Yes, by Friday.", in_reply_to=original["id"])

    first, answer = provider.fetch_emails([original["id"], sent["id"]]).emails

    assert answer.to == (Recipient("Sam Lee", "sam@example.org"),)
    assert answer.cc == (Recipient("Chris Doe", "chris@example.org"),)
    assert answer.sender.endswith(OWNER) and answer.subject == "Re: Question 1"
    assert answer.thread_id == first.thread_id == original["threadId"]
    assert answer.conversation_key == first.conversation_key == "q1@example.org"


def test_gmail_a_watch_of_inbox_and_sent_pushes_for_sent_mail_and_the_default_watch_stays_the_inbox(
    sandbox: SandboxClient,
) -> None:
    provider = gmail_provider(sandbox)
    sandbox.push_settings(gmail_rate_limit=False)
    with serving(Receiver()) as receiver:
        sandbox.pubsub_subscribe(TOPIC, f"{receiver.url}/push", SERVICE_ACCOUNT)
        provider.watch(TOPIC)
        watch = sandbox.gmail_watch(OWNER)
        assert watch is not None and watch["labelIds"] == ["INBOX"]  # what push.py asks today
        gmail_send(sandbox, 1)
        sandbox.wait_notifications_idle()
        assert receiver.received == []

        provider.watch(TOPIC, folders=("inbox", "sent"))
        sent = sandbox.send_gmail(OWNER, to=[SAM], body="Sending it now.")
        (push,) = receiver.wait_for(1)

    watch = sandbox.gmail_watch(OWNER)
    assert watch is not None and watch["labelIds"] == ["INBOX", "SENT"]
    assert push_data(push)["historyId"] == int(sent["historyId"])


# Outlook --------------------------------------------------------------------------------------------------
def test_outlook_sentitems_delta_lists_sent_mail_only_and_the_inbox_delta_never_lists_it(
    sandbox: SandboxClient,
) -> None:
    provider = outlook_provider(sandbox)
    inbox = provider.fetch_delta(provider.initial_cursor())
    sandbox.clear_requests()
    first = provider.first_read(datetime.now(UTC) - timedelta(days=FIRST_READ_DAYS), 10, folder="sent")
    assert inbox.message_ids == first.message_ids == []
    [listing] = sandbox.requests("graph")
    assert listing["path"] == "/v1.0/me/mailFolders/sentitems/messages/delta"
    received = str(sandbox.deliver_outlook(OWNER, incoming(1))["id"])
    sent = [outlook_send(sandbox, 1), outlook_send(sandbox, 2, in_reply_to=received)]
    reply = str(sandbox.deliver_outlook_reply(OWNER, sent[1], sender=SAM, body="Friday is fine.")["id"])
    sandbox.clear_requests()

    sent_delta = provider.fetch_delta(first.new_cursor, folder="sent")
    inbox_delta = provider.fetch_delta(inbox.new_cursor)

    assert sent_delta.message_ids == sent
    assert inbox_delta.message_ids == [received, reply]
    assert not sent_delta.backfill
    graph = sandbox.requests("graph")
    assert len({r["path"] for r in graph}) == 2  # each delta its own folder's
    assert all('IdType="ImmutableId"' in r["headers"].get("Prefer", "") for r in graph)
    assert provider.fetch_delta(sent_delta.new_cursor, folder="sent").message_ids == []
    later = outlook_send(sandbox, 3)
    assert provider.fetch_delta(sent_delta.new_cursor, folder="sent").message_ids == [later]
    assert provider.fetch_delta(inbox_delta.new_cursor).message_ids == []


def test_outlook_a_delta_link_of_one_folder_is_refused_by_the_other_before_any_request(
    sandbox: SandboxClient,
) -> None:
    provider = outlook_provider(sandbox)
    inbox_link = provider.fetch_delta(provider.initial_cursor()).new_cursor
    sent_link = provider.first_read(datetime.now(UTC) - timedelta(days=1), 10, folder="sent").new_cursor
    outlook_send(sandbox, 1)
    sandbox.clear_requests()

    with pytest.raises(CursorExpired):
        provider.fetch_delta(sent_link)
    with pytest.raises(CursorExpired):
        provider.fetch_delta(inbox_link, folder="sent")
    with pytest.raises(CursorExpired):
        provider.fetch_delta(cursor_for("sent", provider.initial_cursor()), folder="sent")  # names the inbox

    assert sandbox.requests("graph") == []


def test_outlook_an_expired_sent_delta_link_raises_and_the_sent_resync_finds_what_is_in_sent(
    sandbox: SandboxClient,
) -> None:
    provider = outlook_provider(sandbox)
    now = datetime.now(UTC)
    outlook_send(sandbox, 0, sent_at=now - timedelta(days=30))
    handled = outlook_send(sandbox, 1, sent_at=now - timedelta(hours=5))
    sent_link = provider.first_read(now - timedelta(days=1), 10, folder="sent").new_cursor
    recent = [outlook_send(sandbox, n, sent_at=now - timedelta(hours=4 - n)) for n in range(2, 5)]
    sandbox.deliver_outlook(OWNER, incoming(1))
    sandbox.expire_outlook_delta(OWNER)

    with pytest.raises(CursorExpired):
        provider.fetch_delta(sent_link, folder="sent")  # Graph's 410
    delta = provider.resync(
        now - timedelta(days=1), 2, cursor=sent_link, handled=lambda ids: {handled} & set(ids), folder="sent"
    )

    assert delta.message_ids == recent[-2:]
    assert delta.not_read == 1
    assert provider.fetch_delta(delta.new_cursor, folder="sent").message_ids == []
    with pytest.raises(CursorExpired):
        provider.fetch_delta(delta.new_cursor)


def test_outlook_first_read_of_sent_covers_14_days_and_counts_what_is_over_its_bound(
    sandbox: SandboxClient,
) -> None:
    provider = outlook_provider(sandbox)
    now = datetime.now(UTC)
    outlook_send(sandbox, 0, sent_at=now - timedelta(days=FIRST_READ_DAYS + 1))
    window = [outlook_send(sandbox, n, sent_at=now - timedelta(days=FIRST_READ_DAYS - 1 - n)) for n in range(5)]
    sandbox.deliver_outlook(OWNER, incoming(1), received_at=now - timedelta(days=1))

    delta = provider.first_read(now - timedelta(days=FIRST_READ_DAYS), 3, folder="sent")

    assert delta.message_ids == window[-3:]
    assert delta.not_read == 2
    assert set(delta.received) == set(window[-3:])
    later = outlook_send(sandbox, 9)
    assert provider.fetch_delta(delta.new_cursor, folder="sent").message_ids == [later]


def test_outlook_a_sent_message_carries_its_recipients_and_its_conversation(sandbox: SandboxClient) -> None:
    provider = outlook_provider(sandbox)
    original = sandbox.deliver_outlook(OWNER, incoming(1))
    sent = sandbox.send_outlook(OWNER, to=[SAM], cc=[CHRIS], body="Yes, by Friday.", in_reply_to=original["id"])

    first, answer = provider.fetch_emails([str(original["id"]), str(sent["id"])]).emails

    assert answer.to == (Recipient("Sam Lee", "sam@example.org"),)
    assert answer.cc == (Recipient("Chris Doe", "chris@example.org"),)
    assert answer.sender == f"Grace Hopper <{OWNER}>" and answer.subject == "Re: Question 1"
    assert answer.thread_id == first.thread_id == original["conversationId"]
    assert answer.conversation_key == first.conversation_key
