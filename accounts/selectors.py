from __future__ import annotations

from accounts.models import AIConsent, User


def consent_current(*, user: User) -> AIConsent | None:
    """The consent in force for the current consent text, if any."""
    return AIConsent.objects.current().filter(user=user).first()


def consent_is_current(*, user_id: int) -> bool:
    return AIConsent.objects.current().filter(user_id=user_id).exists()
