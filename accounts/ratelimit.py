"""Sign-up, new confirmation links and password resets are bounded: ACCOUNT_REQUESTS_PER_ADDRESS of each kind
from one client address, and ACCOUNT_EMAILS_PER_RECIPIENT account emails to one address (of any kind), within
ACCOUNT_RATE_WINDOW_MINUTES. Counted in the shared Redis cache (django-ratelimit), so every web process sees
the same counts. A count never depends on whether an account exists, so a refusal tells nothing about that."""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage

from config.errors import RateLimitedError

AccountAction = Literal["signup", "resend", "password-reset"]


def account_rate_check(*, request: HttpRequest, action: AccountAction, recipient: str) -> None:
    """Count one request that sends an email to `recipient`; raise RateLimitedError past either limit."""
    window = settings.ACCOUNT_RATE_WINDOW_MINUTES
    recipient = recipient.strip().lower()
    counters: list[tuple[str, Any, int]] = [
        # django-ratelimit's client address: RATELIMIT_IP_META_KEY says where it is behind a proxy.
        (f"account-{action}-per-address", "ip", settings.ACCOUNT_REQUESTS_PER_ADDRESS),
        ("account-emails-per-recipient", lambda group, req: recipient, settings.ACCOUNT_EMAILS_PER_RECIPIENT),
    ]
    for group, key, limit in counters:
        usage = get_usage(request, group=group, key=key, rate=f"{limit}/{window}m", method="POST", increment=True)
        if usage is not None and usage["should_limit"]:
            retry_after = max(1, int(usage["time_left"]))
            raise RateLimitedError(
                "There were too many requests of this kind from your network or for this email address. "
                f"Try again in about {-(-retry_after // 60)} minute{'s' if retry_after > 60 else ''}.",
                retry_after=retry_after,
            )
