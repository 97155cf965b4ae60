"""The demo mailboxes: a Gmail and an Outlook mailbox of realistic mail for `python -m sandbox --demo ADDRESS`:
the inbox, and the Sent mail of the mailbox's owner (sandbox/demo/messages.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sandbox.state import SandboxState


def load_demo_mailbox(state: SandboxState, address: str) -> None:
    """Create the Gmail mailbox of `address` if missing and deliver the demo messages into it, oldest first:
    received mail with Gmail's default labels (INBOX, UNREAD), the owner's own with SENT only, as mail sent from
    Gmail carries.

    Each message's internalDate is given as its Date header (delivery itself would say "now"), so the mailbox
    looks received and sent over the last days.
    """
    from sandbox.demo.messages import demo_mail
    from sandbox.gmail import mailbox_ensure, message_deliver

    mailbox_ensure(state, address)
    for mail in demo_mail(datetime.now(UTC), owner=address):
        labels = ["SENT"] if mail.folder == "sent" else None
        message_deliver(state, address, mail.raw, labels=labels, internal_date=mail.at)


def load_demo_outlook(state: SandboxState, address: str) -> None:
    """Create the Outlook mailbox of `address` if missing and deliver the same demo messages into it, oldest
    first, each turned into a Graph message (html or text body like the original; receivedDateTime given as its
    Date header): received mail into the inbox, unread; the owner's own into sentitems, read, as Outlook files
    what one sends.

    Seeding twice does not duplicate mail: a message whose Message-ID is already there is skipped.
    """
    from email.parser import BytesHeaderParser

    from sandbox.demo.messages import demo_mail
    from sandbox.graph import mailbox_ensure, message_deliver_rfc822

    with state.lock:
        mailbox = mailbox_ensure(state, address)
        present = {m.internet_message_id for m in mailbox.messages.values()}
        for mail in demo_mail(datetime.now(UTC), owner=address):
            if str(BytesHeaderParser().parsebytes(mail.raw).get("Message-ID", "")).strip() in present:
                continue
            sent = mail.folder == "sent"
            message_deliver_rfc822(
                state, address, mail.raw, received=mail.at, is_read=sent, folder="sentitems" if sent else "inbox"
            )


def demo_fill_if_empty(state: SandboxState, provider: str, address: str) -> int:
    """The consent page's "Fill this mailbox with the demo mail": the demo messages (inbox and Sent mail) into
    the `provider` ("gmail" or "outlook") mailbox of `address`, created if missing, when it holds no mail yet.
    Returns how many were delivered (0 when it held mail already: filling twice never duplicates it)."""
    from sandbox.demo.messages import demo_mail

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
    return len(demo_mail(datetime.now(UTC), owner=address))
