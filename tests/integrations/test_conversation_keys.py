"""Every email carries its conversation and its recipients, from real sandbox mail of both providers: a reply
and its original share one conversation key, in one mailbox and across Gmail and Outlook (issue 22 point 2)."""

from __future__ import annotations

from datetime import datetime

from integrations.mail.conversation import Recipient, references
from integrations.mail.message import Email
from integrations.providers.gmail import GmailProvider, gmail_credentials
from integrations.providers.outlook import OutlookProvider
from sandbox.client import SandboxClient

OWNER = "grace@example.com"
CHRIS = "Chris Doe <chris@example.org>"
ROOT_ID = "budget-2026-root@mail.example.org"
ORIGINAL = (
    "From: Sam Lee <sam@example.org>\r\n"
    'To: Grace Hopper <grace@example.com>, "Ada L." <ADA@example.org>\r\n'
    "Cc: Chris Doe <chris@example.org>\r\n"
    "Subject: Budget review\r\n"
    "Date: Mon, 02 Nov 2026 10:00:00 +0000\r\n"
    f"Message-ID: <{ROOT_ID}>\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "Could you send the Q3 numbers by Friday?\r\n"
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
    sandbox.create_outlook_mailbox(OWNER)
    token = sandbox.issue_microsoft_token(OWNER)["access_token"]
    return OutlookProvider(lambda force_refresh=False: token, address=OWNER)


def fetch(provider: GmailProvider | OutlookProvider, *ids: str) -> list[Email]:
    fetched = provider.fetch_emails(list(ids))
    assert not fetched.failed
    return fetched.emails


def test_gmail_fills_thread_replies_and_recipients_from_the_headers(sandbox: SandboxClient) -> None:
    provider = gmail_provider(sandbox)
    original = sandbox.deliver(OWNER, ORIGINAL)
    reply = sandbox.deliver_gmail_reply(
        OWNER, original["id"], sender="Sam Lee <sam@example.org>", body="Any news?", cc=[CHRIS]
    )

    first, answer = fetch(provider, original["id"], reply["id"])

    assert first.thread_id == answer.thread_id == original["threadId"]
    assert first.to == (Recipient("Grace Hopper", "grace@example.com"), Recipient("Ada L.", "ada@example.org"))
    assert first.cc == (Recipient("Chris Doe", "chris@example.org"),)
    assert (first.in_reply_to, first.references) == ("", ())
    assert answer.in_reply_to == ROOT_ID
    assert answer.references == (ROOT_ID,)
    assert [r.address for r in answer.to] == [OWNER]
    assert answer.cc == (Recipient("Chris Doe", "chris@example.org"),)
    assert first.conversation_key == answer.conversation_key == ROOT_ID


def test_outlook_fills_conversation_replies_and_recipients(sandbox: SandboxClient) -> None:
    provider = outlook_provider(sandbox)
    original = sandbox.deliver_outlook(OWNER, ORIGINAL)
    reply = sandbox.deliver_outlook_reply(
        OWNER, original["id"], sender="Sam Lee <sam@example.org>", body="Any news?", cc=[CHRIS]
    )

    first, answer = fetch(provider, original["id"], reply["id"])

    assert first.thread_id == answer.thread_id == original["conversationId"]
    assert first.to == (Recipient("Grace Hopper", "grace@example.com"), Recipient("Ada L.", "ada@example.org"))
    assert first.cc == (Recipient("Chris Doe", "chris@example.org"),)
    assert answer.in_reply_to == ROOT_ID
    assert answer.references == (ROOT_ID,)
    assert [r.address for r in answer.to] == [OWNER]
    assert first.conversation_key == answer.conversation_key == ROOT_ID


def test_one_conversation_through_gmail_and_outlook_has_one_key(sandbox: SandboxClient) -> None:
    gmail, outlook = gmail_provider(sandbox), outlook_provider(sandbox)
    in_gmail = sandbox.deliver(OWNER, ORIGINAL)
    in_outlook = sandbox.deliver_outlook(OWNER, ORIGINAL)
    gmail_reply = sandbox.deliver_gmail_reply(OWNER, in_gmail["id"], sender="sam@example.org", body="Any news?")
    later = sandbox.deliver_outlook_reply(OWNER, in_outlook["id"], sender="ada@example.org", body="Me too.")
    # The next reply answers the Gmail reply, and reaches Outlook only.
    [answered] = fetch(gmail, gmail_reply["id"])
    raw = (
        "From: Ada L. <ada@example.org>\r\nTo: grace@example.com\r\nSubject: Re: Budget review\r\n"
        "Date: Tue, 03 Nov 2026 09:00:00 +0000\r\nMessage-ID: <third@mail.example.org>\r\n"
        f"In-Reply-To: <{answered.internet_message_id}>\r\n"
        f"References: <{ROOT_ID}> <{answered.internet_message_id}>\r\n\r\nHere they are.\r\n"
    )
    third = sandbox.deliver_outlook(OWNER, raw)

    keys = {email.conversation_key for email in fetch(gmail, in_gmail["id"], gmail_reply["id"])}
    keys |= {email.conversation_key for email in fetch(outlook, in_outlook["id"], later["id"], third["id"])}

    assert keys == {ROOT_ID}


def test_mail_without_any_message_id_falls_back_to_the_providers_thread(sandbox: SandboxClient) -> None:
    provider = gmail_provider(sandbox)
    bare = ORIGINAL.replace(f"Message-ID: <{ROOT_ID}>\r\n", "")
    delivered = sandbox.deliver(OWNER, bare)

    [email] = fetch(provider, delivered["id"])

    assert email.internet_message_id == ""
    assert email.conversation_key == f"gmail:{delivered['threadId']}"


def test_references_are_bounded_and_keep_the_root() -> None:
    header = " ".join(f"<m{n}@example.org>" for n in range(5_000))

    kept = references(header)

    assert len(kept) == 20
    assert kept[0] == "m0@example.org"
    numbers = [int(key.removeprefix("m").removesuffix("@example.org")) for key in kept]
    assert numbers[1:] == list(range(numbers[1], numbers[1] + 19))  # then the newest ones read, in order
