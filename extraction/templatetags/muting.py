"""The Settings section of muted senders, as an include of its own (the page is shared with other sections), and
whether a task row offers to mute its sender."""

from __future__ import annotations

from typing import Any

from django import template

from extraction.muting import mute_offered, muted_sender_list, own_addresses
from tasks.models import Task

register = template.Library()


@register.inclusion_tag("accounts/_muted_senders.html", takes_context=True)
def muted_senders_section(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    return {"muted": muted_sender_list(user=request.user), "csrf_token": context.get("csrf_token")}


@register.simple_tag(takes_context=True)
def offers_mute(context: template.Context, task: Task) -> bool:
    """Whether the row of `task` offers "Never make tasks from this sender" (extraction/muting.py). The person's
    own addresses are those of the page's mailboxes when it lists them, else asked once per page."""
    request = context["request"]
    own = getattr(request, "_own_addresses", None)
    if own is None:
        mailboxes = context.get("integrations")
        if mailboxes is None:
            own = own_addresses(user=request.user)
        else:
            own = {address.lower() for address in [request.user.email, *(m.account_address for m in mailboxes)]}
        request._own_addresses = own
    return mute_offered(task, own)
