from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import AIConsent, PersonalAccessToken, User


def consent_current(*, user: User) -> AIConsent | None:
    """The consent in force for the current consent text, if any."""
    return AIConsent.objects.current().filter(user=user).first()


def consent_is_current(*, user_id: int) -> bool:
    return AIConsent.objects.current().filter(user_id=user_id).exists()


def access_token_list(*, user: User) -> QuerySet[PersonalAccessToken]:
    """The person's tokens still in force, newest first."""
    return PersonalAccessToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at")
