from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from zoneinfo import available_timezones

from django.contrib.auth.hashers import make_password
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.emails import account_exists_email_send, verification_email_send
from accounts.languages import DATE_ORDERS, LANGUAGES
from accounts.models import AIConsent, PersonalAccessToken, User
from config.errors import ApplicationError
from reminders.models import LOOK_AT_ONCE, DigestSubscription, Reminder, leased


def user_create(
    *,
    email: str,
    password: str,
    name: str = "",
    timezone_name: str = "UTC",
    language: str = "en",
    date_order: str = "MDY",
) -> User:
    return User.objects.create_user(
        email=email,
        password=password,
        name=name,
        timezone=timezone_name if timezone_valid(timezone_name) else "UTC",
        language=language if language in LANGUAGES else "en",
        date_order=date_order if date_order in DATE_ORDERS else "MDY",
    )


# Sign-up and email confirmation -------------------------------------------------------------------


def user_signup(
    *,
    email: str,
    password: str,
    name: str = "",
    timezone_name: str = "UTC",
    language: str = "en",
    date_order: str = "MDY",
) -> User | None:
    """Make an account whose address is not confirmed yet and email it its confirmation link. An address that
    already has an account gets an email saying how to log in instead, and its account is left as it is.

    Returns the new account, or None for an address already taken. Sign-up must answer the same either way (no
    account enumeration): the caller shows the same page, and both ways send one email and hash one password.
    """
    email = User.objects.normalize_email(email).strip().lower()
    existing = User.objects.filter(email__iexact=email).first()
    if existing is None:
        try:
            with transaction.atomic():
                user = user_create(
                    email=email,
                    password=password,
                    name=name,
                    timezone_name=timezone_name,
                    language=language,
                    date_order=date_order,
                )
        except IntegrityError:  # the same address signed up at the same moment
            existing = User.objects.filter(email__iexact=email).first()
        else:
            verification_email_send(user=user)
            return user
    make_password(password)  # the work a new account costs, so that the answer takes as long
    if existing is not None and existing.is_active:
        account_exists_email_send(user=existing)
    return None


def email_confirmation_resend(*, email: str) -> None:
    """Send the confirmation link again to an account waiting for it; an account already confirmed gets the
    how-to-log-in email, an unknown address nothing. The caller answers the same in every case."""
    user = User.objects.filter(email__iexact=email.strip(), is_active=True).first()
    if user is None:
        return
    if user.email_verified:
        account_exists_email_send(user=user)
    else:
        verification_email_send(user=user)


def user_email_confirm(*, user: User) -> User:
    """Record that the person reads the mail of their account's address (once: the first time stays)."""
    if user.email_verified_at is None:
        user.email_verified_at = timezone.now()
        user.save(update_fields=["email_verified_at"])
    return user


def user_password_reset_done(*, user: User) -> User:
    """After a person set a new password through a reset link: the link came by email, so the address is
    confirmed. (Failed logins are not forgotten: the view gives that browser the account's device cookie
    instead, which lets it past the account's count without restarting it for strangers.)"""
    user_email_confirm(user=user)
    return user


def timezone_valid(name: str) -> bool:
    return name in available_timezones()


def user_set_timezone(*, user: User, timezone_name: str) -> User:
    if not timezone_valid(timezone_name):
        raise ApplicationError(
            f"{timezone_name[:64]!r} is not a time zone Tasklift knows (for example Europe/Paris).",
            code="invalid_timezone",
            extra={"field": "timezone"},
        )
    with transaction.atomic():
        user.timezone = timezone_name
        user.save(update_fields=["timezone"])
        # The next morning is another moment now: the digest's next look is worked out again by the next scan.
        # Not while a chunk holds it (reminders.models.leased): that chunk's record sets it after.
        digests = DigestSubscription.objects.filter(user=user, enabled=True).exclude(leased(timezone.now()))
        digests.update(due_at=LOOK_AT_ONCE)
        # A task at 15:00 is at 15:00 of the new zone: its reminder rings then.
        from reminders.ring import reminder_refresh  # it imports tasks, which imports this app

        reminder_refresh(task_ids=list(Reminder.objects.filter(task__user=user).values_list("task_id", flat=True)))
    return user


def user_set_language(*, user: User, language: str | None = None, date_order: str | None = None) -> User:
    """The language the person writes tasks in and their dates' order (either may be left as it is)."""
    if language is not None and language not in LANGUAGES:
        raise ApplicationError(
            f"{language[:16]!r} is not a language Tasklift reads dates in ({', '.join(LANGUAGES)}).",
            code="invalid_language",
            extra={"field": "language"},
        )
    if date_order is not None and date_order not in DATE_ORDERS:
        raise ApplicationError(
            "The date order is DMY (day first) or MDY (month first).",
            code="invalid_date_order",
            extra={"field": "date_order"},
        )
    user.language = language or user.language
    user.date_order = date_order or user.date_order
    user.save(update_fields=["language", "date_order"])
    return user


# Personal access tokens ---------------------------------------------------------------------------

TOKEN_PREFIX = "tl_"


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def access_token_create(*, user: User, name: str) -> tuple[PersonalAccessToken, str]:
    """A new token for a program; returns it with its secret, which is shown once and never stored."""
    name = " ".join(name.replace("\x00", "").split())[:100]
    if not name:
        raise ApplicationError("Give the token a name, to know later what uses it.", code="invalid_name")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = PersonalAccessToken.objects.create(user=user, name=name, token_hash=_token_hash(secret), prefix=secret[:10])
    return token, secret


def access_token_revoke(*, user: User, token_id: int) -> None:
    PersonalAccessToken.objects.filter(user=user, pk=token_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def access_token_authenticate(*, secret: str) -> User | None:
    """The active person a token belongs to, or None; notes when it was used (once a minute at most)."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    token = (
        PersonalAccessToken.objects.select_related("user")
        .filter(token_hash=_token_hash(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        PersonalAccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


@transaction.atomic
def consent_grant(*, user: User) -> AIConsent:
    """Record consent to the current text. An older version still in force is closed first. A text that
    covers Sent mail makes a Sent cursor for each mailbox that has none (read from two weeks before now)."""
    from integrations.services import sent_cursors_open

    now = timezone.now()
    current = AIConsent.objects.select_for_update().filter(user=user, revoked_at__isnull=True).first()
    if current is not None:
        if current.text_version == CONSENT_VERSION:
            return current
        current.revoked_at = now
        current.save(update_fields=["revoked_at"])
    consent = AIConsent.objects.create(user=user, text_version=CONSENT_VERSION, granted_at=now)
    sent_cursors_open(user=user)
    return consent


def consent_revoke(*, user: User) -> int:
    """Revoke whatever consent is in force. Returns how many rows were revoked (0 or 1)."""
    return AIConsent.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
