from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User


def user_create(*, email: str, password: str, name: str = "") -> User:
    return User.objects.create_user(email=email, password=password, name=name)


@transaction.atomic
def consent_grant(*, user: User) -> AIConsent:
    """Record consent to the current text. An older version still in force is closed first."""
    now = timezone.now()
    current = AIConsent.objects.select_for_update().filter(user=user, revoked_at__isnull=True).first()
    if current is not None:
        if current.text_version == CONSENT_VERSION:
            return current
        current.revoked_at = now
        current.save(update_fields=["revoked_at"])
    return AIConsent.objects.create(user=user, text_version=CONSENT_VERSION, granted_at=now)


def consent_revoke(*, user: User) -> int:
    """Revoke whatever consent is in force. Returns how many rows were revoked (0 or 1)."""
    return AIConsent.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
