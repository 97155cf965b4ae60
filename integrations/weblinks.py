"""Where a link to one message goes: the provider's web client, or, while that provider is the sandbox, the
sandbox's own copy of the message (mail.google.com and Outlook on the web have no such mail in a demo)."""

from __future__ import annotations

from urllib.parse import quote

from django.conf import settings

from integrations.models import Integration


def provider_simulated(provider: str) -> bool:
    if provider == Integration.Provider.GMAIL:
        return bool(settings.GOOGLE_SIMULATED)
    if provider == Integration.Provider.OUTLOOK:
        return bool(settings.MICROSOFT_SIMULATED)
    return False


def message_web_link(*, provider: str, address: str, message_id: str, web_link: str) -> str:
    """The link that opens the message `message_id` of the mailbox `address` for a person: `web_link` (the
    provider's, as stored), or the sandbox's page of it (sandbox/mailview.py) while `provider` is simulated."""
    if provider_simulated(provider) and address and message_id:
        path = "/".join(quote(part, safe="@") for part in (provider, address.lower(), message_id))
        return f"{settings.SANDBOX_URL}/_sandbox/mail/{path}"
    return web_link
