"""Sign-up, new confirmation links and password resets are bounded, in sliding windows (accounts/counting.py):
ACCOUNT_REQUESTS_PER_ADDRESS of each kind from one client address within ACCOUNT_RATE_WINDOW_MINUTES, and to one
recipient ACCOUNT_EMAILS_PER_RECIPIENT sign-up and confirmation emails together within that window, and as many
password reset links within a link's lifetime (PASSWORD_RESET_TIMEOUT_MINUTES).

Reset links are counted apart, over their own lifetime, so that strangers cannot keep the owner from having one:
sign-ups with the owner's address do not use them up, and when strangers have asked for the most the limit
allows, the owner's inbox holds that many links, every one still working (a link lasts as long as it is
counted, and a new one does not end the earlier ones). The refusal says so.

A count never depends on whether an account exists, so a refusal tells nothing about that."""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.http import HttpRequest

from accounts.counting import Counter, CountRefused, count_take, counter_key
from accounts.throttle import client_address
from config.errors import RateLimitedError

AccountAction = Literal["signup", "resend", "password-reset"]


def _minutes(seconds: int) -> str:
    minutes = -(-seconds // 60)
    return f"{minutes} minute{'s' if minutes > 1 else ''}"


def account_rate_check(*, request: HttpRequest, action: AccountAction, recipient: str) -> None:
    """Count one request that sends an email to `recipient`; raise RateLimitedError past either limit."""
    window_s = settings.ACCOUNT_RATE_WINDOW_MINUTES * 60
    recipient = recipient.strip().lower()
    per_address = Counter(
        key=counter_key(f"account-{action}-per-address", client_address(request)),
        limit=settings.ACCOUNT_REQUESTS_PER_ADDRESS,
        window_s=window_s,
    )
    if action == "password-reset":
        per_recipient = Counter(
            key=counter_key("account-reset-links-per-recipient", recipient),
            limit=settings.ACCOUNT_EMAILS_PER_RECIPIENT,
            window_s=settings.PASSWORD_RESET_TIMEOUT,
        )
    else:
        per_recipient = Counter(
            key=counter_key("account-emails-per-recipient", recipient),
            limit=settings.ACCOUNT_EMAILS_PER_RECIPIENT,
            window_s=window_s,
        )
    try:
        count_take(per_address, per_recipient)
    except CountRefused as refusal:
        wait = refusal.retry_after
        if refusal.counter is per_recipient and action == "password-reset":
            message = (
                "We already sent several links to set a new password to this address in the last "
                f"{_minutes(settings.PASSWORD_RESET_TIMEOUT)}. If it has an account, they all still work: open the "
                f"newest one in that inbox (look in the spam folder too). You can ask again in about {_minutes(wait)}."
            )
        else:
            message = (
                "There were too many requests of this kind from your network or for this email address. "
                f"Try again in about {_minutes(wait)}."
            )
        raise RateLimitedError(message, retry_after=wait) from None
