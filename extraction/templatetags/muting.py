"""The Settings section of muted senders, as an include of its own (the page is shared with other sections)."""

from __future__ import annotations

from typing import Any

from django import template

from extraction.muting import muted_sender_list

register = template.Library()


@register.inclusion_tag("accounts/_muted_senders.html", takes_context=True)
def muted_senders_section(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    return {"muted": muted_sender_list(user=request.user), "csrf_token": context.get("csrf_token")}
