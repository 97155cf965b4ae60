"""The demo mailboxes: a Gmail and an Outlook inbox of realistic mail for `python -m sandbox --demo ADDRESS`."""

from __future__ import annotations

from datetime import UTC, datetime

from sandbox.state import SandboxState


def load_demo_mailbox(state: SandboxState, address: str) -> None:
    """Create the Gmail mailbox of `address` if missing and deliver the demo messages into it.

    Each message's internalDate is given as its Date header (delivery itself would say "now"), so the inbox
    looks received over the last days.
    """
    from sandbox.demo.messages import demo_messages
    from sandbox.gmail import date_header, mailbox_ensure, message_deliver

    mailbox_ensure(state, address)
    for raw in demo_messages(datetime.now(UTC)):
        message_deliver(state, address, raw, internal_date=date_header(raw))


def load_demo_outlook(state: SandboxState, address: str) -> None:
    """Create the Outlook mailbox of `address` if missing and deliver the same demo messages into it, each
    turned into a Graph message (html or text body like the original; receivedDateTime given as its Date header).

    Seeding twice does not duplicate mail: a message whose Message-ID is already there is skipped.
    """
    from email.parser import BytesHeaderParser

    from sandbox.demo.messages import demo_messages
    from sandbox.gmail import date_header
    from sandbox.graph import mailbox_ensure, message_deliver_rfc822

    with state.lock:
        mailbox = mailbox_ensure(state, address)
        present = {m.internet_message_id for m in mailbox.messages.values()}
        for raw in demo_messages(datetime.now(UTC)):
            if str(BytesHeaderParser().parsebytes(raw).get("Message-ID", "")).strip() not in present:
                message_deliver_rfc822(state, address, raw, received=date_header(raw))


def demo_fill_if_empty(state: SandboxState, provider: str, address: str) -> int:
    """The consent page's "Fill this mailbox with the demo mail": the demo messages into the `provider`
    ("gmail" or "outlook") mailbox of `address`, created if missing, when it holds no mail yet. Returns how
    many were delivered (0 when it held mail already: filling twice never duplicates it)."""
    from sandbox.demo.messages import demo_messages

    if provider == "gmail":
        from sandbox.gmail import mailbox_ensure as gmail_ensure

        if gmail_ensure(state, address).messages:
            return 0
        load_demo_mailbox(state, address)
    else:
        from sandbox.graph import mailbox_ensure as outlook_ensure

        if outlook_ensure(state, address).messages:
            return 0
        load_demo_outlook(state, address)
    return len(demo_messages(datetime.now(UTC)))
