from __future__ import annotations

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User


def consent_current(*, user: User) -> AIConsent | None:
    """The consent in force for the current consent text, if any."""
    return AIConsent.objects.filter(user=user, revoked_at__isnull=True, text_version=CONSENT_VERSION).first()


def consent_is_current(*, user_id: int) -> bool:
    return AIConsent.objects.filter(user_id=user_id, revoked_at__isnull=True, text_version=CONSENT_VERSION).exists()
