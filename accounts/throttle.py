"""Password guessing is slowed down, without letting a stranger keep the owner out (OWASP's Authentication
Cheat Sheet, "Account lockout", and its "Slow Down Online Guessing Attacks with Device Cookies").

Every password tried (the login page, the admin's, and the confirmation page, which asks for the password of the
account its link names) is counted before it is checked, in sliding windows on the shared Redis
(accounts/counting.py):

- per client address: at most LOGIN_FAILURES_PER_ADDRESS within LOGIN_FAILURE_WINDOW_MINUTES, whoever tries;
- per account, for browsers that never logged in to it: past LOGIN_FAILURES_PER_ACCOUNT within
  LOGIN_ACCOUNT_WINDOW_HOURS, each further attempt waits LOGIN_DELAY_SECONDS after the one before, doubled for
  each one beyond, up to LOGIN_DELAY_MAX_SECONDS. A slowdown, not a lockout: at the cap that is one guess a
  few minutes for all strangers together, and never a long block. (The window is kept short because every
  name typed costs a small Redis key for that long, existing account or not: counting only existing accounts
  would tell a guesser which ones exist.);
- a browser that logged in to the account before holds its device cookie (signed, HttpOnly, given at each
  successful login and each password reset, for LOGIN_DEVICE_COOKIE_DAYS) and is not slowed by the account's
  count, only by its own: LOGIN_FAILURES_PER_DEVICE a day. Past that it is treated as any other browser, so a
  stolen cookie adds that many guesses a day, no more.

A refused attempt is a 429 with Retry-After and never reaches the password check, even with the right password.
An attempt that logs in is taken out of the counts again. While Redis cannot be reached nothing can be counted,
so no password is checked either: a 503 page with Retry-After says to try again in a moment.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.utils.crypto import salted_hmac
from django_ratelimit.core import _get_ip

from accounts.counting import (
    Counted,
    Counter,
    CountingUnavailable,
    CountRefused,
    count_take,
    counted_forget,
    counter_key,
)
from config.unavailable import RETRY_AFTER_S, unavailable_response

logger = logging.getLogger(__name__)

DEVICE_COOKIE_PREFIX = "tasklift_device_"
_DEVICE_SALT = "accounts.throttle.device"


def account_name(email: str) -> str:
    """The form in which an account is counted, whether the address was typed or named by a link."""
    return email.strip().lower()[:254]


def client_address(request: HttpRequest) -> str:
    # django-ratelimit's client address (RATELIMIT_IP_META_KEY says where it is behind a proxy; IPv6 by /64), so
    # that every limit of the site agrees on who the client is.
    return str(_get_ip(request))


def _device_cookie_name(account: str) -> str:
    # One cookie per account, so that two people sharing a browser keep theirs; the name is a keyed digest, not
    # the address. Django signs a cookie with its name in the salt, so a value cannot be moved to another name.
    return DEVICE_COOKIE_PREFIX + salted_hmac(_DEVICE_SALT, account).hexdigest()[:20]


def _device_of(request: HttpRequest, account: str) -> str | None:
    """The id of this browser's device cookie for the account, if it holds a valid one."""
    try:
        device = request.get_signed_cookie(
            _device_cookie_name(account), salt=_DEVICE_SALT, max_age=settings.LOGIN_DEVICE_COOKIE_DAYS * 86400
        )
    except (KeyError, signing.BadSignature):  # none, forged, from another key or expired
        return None
    return str(device) or None


def device_cookie_give(*, response: HttpResponseBase, email: str) -> None:
    """Recognise this browser for the account from now on: a new device id each time (a new count of its own)."""
    response.set_signed_cookie(
        _device_cookie_name(account_name(email)),
        secrets.token_urlsafe(16),
        salt=_DEVICE_SALT,
        max_age=settings.LOGIN_DEVICE_COOKIE_DAYS * 86400,
        secure=settings.SESSION_COOKIE_SECURE,  # https only in production
        httponly=True,
        samesite="Lax",
    )


@dataclass(frozen=True)
class LoginAttempt:
    counted: Counted


class LoginThrottled(Exception):
    def __init__(self, retry_after: int, *, unavailable: bool = False) -> None:
        super().__init__(f"login attempt refused for {retry_after} s")
        self.retry_after = retry_after
        self.unavailable = unavailable  # Redis out of reach, not too many attempts


def _window_s() -> float:
    return float(settings.LOGIN_FAILURE_WINDOW_MINUTES) * 60


def _account_window_s() -> float:
    return float(settings.LOGIN_ACCOUNT_WINDOW_HOURS) * 3600


def login_attempt_begin(*, request: HttpRequest, account: str) -> LoginAttempt:
    """Count one password about to be checked for `account`, or raise LoginThrottled: check nothing then."""
    account = account_name(account)
    address = Counter(
        key=counter_key("login-address", client_address(request)),
        limit=settings.LOGIN_FAILURES_PER_ADDRESS,
        window_s=_window_s(),
    )
    strangers = Counter(
        key=counter_key("login-account", account),
        limit=settings.LOGIN_FAILURES_PER_ACCOUNT,
        window_s=_account_window_s(),
        delay_s=settings.LOGIN_DELAY_SECONDS,
        max_delay_s=settings.LOGIN_DELAY_MAX_SECONDS,
    )
    device = _device_of(request, account)
    try:
        if device is not None:
            own = Counter(
                key=counter_key("login-device", device), limit=settings.LOGIN_FAILURES_PER_DEVICE, window_s=86400
            )
            try:
                return LoginAttempt(count_take(address, own))
            except CountRefused as refusal:
                if refusal.counter is not own:
                    raise
                logger.warning("login: a device cookie is past its own failures; counted as any browser")
        return LoginAttempt(count_take(address, strangers))
    except CountRefused as refusal:
        per = "address" if refusal.counter is address else "account"
        logger.warning("login refused: too many failed attempts (per %s), %d s left", per, refusal.retry_after)
        raise LoginThrottled(refusal.retry_after) from None
    except CountingUnavailable as error:
        logger.error("login refused: the attempt could not be counted (Redis: %s)", error)
        raise LoginThrottled(RETRY_AFTER_S, unavailable=True) from None


def login_attempt_succeeded(*, attempt: LoginAttempt, request: HttpRequest, response: HttpResponseBase) -> None:
    """The password was right and the person is logged in: not a failure, and this browser is now known."""
    counted_forget(attempt.counted)
    device_cookie_give(response=response, email=str(getattr(request.user, "email", "")))


def login_throttled_response(request: HttpRequest, refusal: LoginThrottled) -> HttpResponse:
    if refusal.unavailable:
        return unavailable_response(request)
    wait = refusal.retry_after
    context = {"wait_seconds": wait, "wait_minutes": -(-wait // 60)}
    response = render(request, "accounts/login_throttled.html", context, status=429)
    response["Retry-After"] = str(wait)
    return response


def login_throttled(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Wrap a login view whose form names the account as `username` (ours, and the admin's)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        try:
            attempt = login_attempt_begin(request=request, account=str(request.POST.get("username", "")))
        except LoginThrottled as refusal:
            return login_throttled_response(request, refusal)
        before = request.user  # not evaluated: django.contrib.auth.login() replaces it, and only it does
        response = view(request, *args, **kwargs)
        if request.user is not before and request.user.is_authenticated:
            login_attempt_succeeded(attempt=attempt, request=request, response=response)
        return response

    return wrapped
