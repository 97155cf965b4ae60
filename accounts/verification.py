"""Email confirmation: the signed, expiring link that proves a person reads the mail of their account's address,
and the gate that keeps a mailbox from being connected to an account whose address is not confirmed.

The link is a TimestampSigner signature of the account's id and a digest of its address: it expires after
EMAIL_VERIFICATION_MAX_AGE_HOURS, and stops working if the address changes. Nothing is stored."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core import signing
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse

from accounts.models import User
from config.errors import ApplicationError

_SALT = "accounts.email-verification"


class VerificationLinkInvalid(ApplicationError):
    def __init__(self) -> None:
        super().__init__(
            "This confirmation link is not valid. Check that you opened the whole link from the email, "
            "or ask for a new one below.",
            code="verification_link_invalid",
        )


class VerificationLinkExpired(ApplicationError):
    def __init__(self, *, email: str) -> None:
        hours = settings.EMAIL_VERIFICATION_MAX_AGE_HOURS
        super().__init__(
            f"This confirmation link has expired: a link works for {hours} hours. Ask for a new one below.",
            code="verification_link_expired",
        )
        self.email = email


def _address_digest(email: str) -> str:
    return hashlib.sha256(email.lower().encode()).hexdigest()[:16]


def verification_link_make(*, user: User) -> str:
    """The full address of the page that confirms this account's email address."""
    token = signing.TimestampSigner(salt=_SALT).sign(f"{user.pk}.{_address_digest(user.email)}")
    return settings.SITE_URL + reverse("signup_confirm", kwargs={"token": token})


def verification_link_user(*, token: str) -> User:
    """The active account a confirmation link was made for; VerificationLinkInvalid or VerificationLinkExpired."""
    signer = signing.TimestampSigner(salt=_SALT)
    max_age = settings.EMAIL_VERIFICATION_MAX_AGE_HOURS * 3600
    expired = False
    try:
        value = signer.unsign(token, max_age=max_age)
    except signing.SignatureExpired:
        expired = True
        value = signer.unsign(token)  # the signature is good, only old: name the account to send a new link
    except signing.BadSignature:
        raise VerificationLinkInvalid() from None
    user_id, _, digest = value.partition(".")
    user = User.objects.filter(pk=int(user_id), is_active=True).first() if user_id.isdigit() else None
    if user is None or digest != _address_digest(user.email):
        raise VerificationLinkInvalid()
    if expired:
        raise VerificationLinkExpired(email=user.email)
    return user


def email_verified_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Refuse a view to a signed-in person whose address is not confirmed, with a message on the Mailboxes page,
    so that an account made in bulk or with someone else's address never reads mail. Put it under
    login_required (on connecting a mailbox: the start of the OAuth flow and its callback)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        user = request.user
        if isinstance(user, User) and not user.email_verified:
            messages.error(
                request,
                f"Confirm your email address before connecting a mailbox: open the link we emailed to {user.email} "
                "(the banner at the top of the page sends it again).",
            )
            return redirect("mailboxes")
        return view(request, *args, **kwargs)

    return wrapped
