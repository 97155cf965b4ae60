"""The demo mailbox: a Gmail inbox of realistic mail for `python -m sandbox --demo ADDRESS`."""

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
