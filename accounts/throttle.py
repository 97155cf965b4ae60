"""Password guessing is slowed down: after LOGIN_FAILURES_PER_ACCOUNT failed logins for one account, or
LOGIN_FAILURES_PER_ADDRESS from one client address, within LOGIN_FAILURE_WINDOW_MINUTES, every further
attempt gets a 429 page until the window passes, whatever the password. Counted in the shared Redis cache
(django-ratelimit), so every web process sees the same counts; the person's own page and the admin's.

Resetting the password by email is never throttled here, and a reset forgets the account's failures
(`login_failures_forget`): someone guessing can lock an account for a while, but its owner gets back in."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render
from django_ratelimit.core import get_usage

logger = logging.getLogger(__name__)


def _usage(request: HttpRequest, *, per: str, key: Any, limit: int, count: bool) -> Any:
    return get_usage(
        request,
        group=f"login-failures-{per}",
        key=key,
        rate=f"{limit}/{settings.LOGIN_FAILURE_WINDOW_MINUTES}m",
        method="POST",
        increment=count,
    )


def _generation_key(account: str) -> str:
    # hashed like django-ratelimit's own keys: an account name is whatever was typed, of any length
    return "login-failures-generation:" + hashlib.sha256(account.encode()).hexdigest()


def login_failures_forget(*, account: str) -> None:
    """Start the account's count of failed logins afresh. django-ratelimit offers no way to delete a counter,
    so the account's counter key carries a generation number, and this moves to the next one."""
    cache = caches[settings.RATELIMIT_USE_CACHE]
    key = _generation_key(account.strip().lower())
    # Never expires (one small key per account that ever reset): were it to, the count would restart once more.
    cache.add(key, 0, timeout=None)
    cache.incr(key)


def _counters(request: HttpRequest, account: str) -> list[tuple[str, Any, int]]:
    generation = caches[settings.RATELIMIT_USE_CACHE].get(_generation_key(account), 0)
    account_key = f"{account}#{generation}"
    return [
        ("account", lambda group, req: account_key, settings.LOGIN_FAILURES_PER_ACCOUNT),
        # django-ratelimit's client address: RATELIMIT_IP_META_KEY says where it is behind a proxy.
        ("address", "ip", settings.LOGIN_FAILURES_PER_ADDRESS),
    ]


def login_throttled(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Wrap a login view: refuse while a counter is over its limit, count the attempts that fail."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        account = str(request.POST.get("username", "")).strip().lower()[:254]
        counters = _counters(request, account)
        for per, key, limit in counters:
            usage = _usage(request, per=per, key=key, limit=limit, count=False)
            if usage is not None and usage["count"] >= limit:
                wait = max(1, int(usage["time_left"]))
                logger.warning("login refused: too many failed attempts (per %s), %d s left", per, wait)
                refusal = render(request, "accounts/login_throttled.html", {"wait_minutes": -(-wait // 60)}, status=429)
                refusal["Retry-After"] = str(wait)
                return refusal
        response = view(request, *args, **kwargs)
        if not request.user.is_authenticated:  # a failed attempt
            for per, key, limit in counters:
                _usage(request, per=per, key=key, limit=limit, count=True)
        return response

    return wrapped
