"""The Settings section of the forward-to address (integrations/inbound/addresses.py), as an include of its own."""

from __future__ import annotations

from typing import Any

from django import template

from integrations.inbound.addresses import forward_address, sender_addresses
from integrations.models import ForwardSender

register = template.Library()


@register.inclusion_tag("integrations/_forward_address.html", takes_context=True)
def forward_address_section(context: template.Context) -> dict[str, Any]:
    user = context["request"].user
    added = list(ForwardSender.objects.filter(user=user))
    added_addresses = {sender.address for sender in added}
    return {
        "address": forward_address(user=user).account_address,
        "own": sorted(sender_addresses(user=user) - added_addresses),
        "added": added,
        "csrf_token": context.get("csrf_token"),
    }
