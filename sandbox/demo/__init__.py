"""The demo mailboxes: a Gmail and an Outlook inbox of realistic mail for `python -m sandbox --demo ADDRESS`."""

from __future__ import annotations

from datetime import UTC, datetime

from sandbox.state import SandboxState


def load_demo_mailbox(state: SandboxState, address: str) -> None:
    """Create the Gmail mailbox of `address` if missing and deliver the demo messages into it.

    Each message's internalDate is its Date header, so the inbox looks freshly received.
    """
    from sandbox.demo.messages import demo_messages
    from sandbox.gmail import mailbox_ensure, message_deliver

    mailbox_ensure(state, address)
    for raw in demo_messages(datetime.now(UTC)):
        message_deliver(state, address, raw)


def load_demo_outlook(state: SandboxState, address: str) -> None:
    """Create the Outlook mailbox of `address` if missing and deliver the same demo messages into it, each
    turned into a Graph message (html or text body like the original; receivedDateTime from its Date header).

    Seeding twice does not duplicate mail: a message whose Message-ID is already there is skipped.
    """
    from email.parser import BytesHeaderParser

    from sandbox.demo.messages import demo_messages
    from sandbox.graph import mailbox_ensure, message_deliver_rfc822

    with state.lock:
        mailbox = mailbox_ensure(state, address)
        present = {m.internet_message_id for m in mailbox.messages.values()}
        for raw in demo_messages(datetime.now(UTC)):
            if str(BytesHeaderParser().parsebytes(raw).get("Message-ID", "")).strip() not in present:
                message_deliver_rfc822(state, address, raw)
