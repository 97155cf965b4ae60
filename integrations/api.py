"""The mailboxes API: each connected mailbox with how it is doing, as the Mailboxes page shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema

from config.http import request_user
from extraction.selectors import MailboxStatus, mailbox_status_list
from integrations.models import Integration

router = Router(tags=["mailboxes"])


class SetAsideOut(Schema):
    reason: str
    link: str
    when: datetime


class MailboxOut(Schema):
    id: int
    provider: str  # "gmail" or "outlook"
    provider_name: str
    address: str
    status: str  # "active", or "needs_reauth" when it must be connected again
    health: Literal["ok", "failing", "needs_reconnect"]
    last_read_at: datetime | None  # the last successful read
    last_problem: str  # the last error, in words ("" when there was none)
    last_problem_code: str
    retry_at: datetime | None  # when Tasklift reads it again after failures
    unread: int  # emails that could not be read yet (tried again by the next runs)
    set_aside_count: int  # emails set aside so that they do not hold up the rest
    set_aside: list[SetAsideOut]  # the most recent of them
    resync_note: str  # what the last automatic resync did ("" when there was none)
    resynced_at: datetime | None


def mailbox_as_dict(status: MailboxStatus) -> dict[str, Any]:
    integration = status.integration
    if integration.status == Integration.Status.NEEDS_REAUTH:
        health = "needs_reconnect"
    elif integration.failure_count or integration.last_error:
        health = "failing"
    else:
        health = "ok"
    return {
        "id": integration.pk,
        "provider": integration.provider,
        "provider_name": integration.get_provider_display(),
        "address": integration.account_address,
        "status": integration.status,
        "health": health,
        "last_read_at": integration.last_success_at,
        "last_problem": integration.last_error,
        "last_problem_code": integration.last_error_code,
        "retry_at": integration.retry_after,
        "unread": status.unread,
        "set_aside_count": status.set_aside_count,
        "set_aside": [{"reason": s.reason, "link": s.link, "when": s.when} for s in status.set_aside],
        "resync_note": status.resync_note,
        "resynced_at": integration.resynced_at,
    }


@router.get("/mailboxes", response=list[MailboxOut], summary="List your connected mailboxes with their status")
def list_mailboxes(request: HttpRequest) -> list[dict[str, Any]]:
    return [mailbox_as_dict(status) for status in mailbox_status_list(user=request_user(request))]
