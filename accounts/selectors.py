from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, QuerySet

from accounts.models import AIConsent, PersonalAccessToken, User


def consent_current(*, user: User) -> AIConsent | None:
    """The consent in force for the current consent text, if any."""
    return AIConsent.objects.current().filter(user=user).first()


def consent_is_current(*, user_id: int) -> bool:
    return AIConsent.objects.current().filter(user_id=user_id).exists()


@dataclass(frozen=True)
class ReadingChoices:
    """What a person allows a run to read: anything at all (a current AI consent), and bulk mail too."""

    consented: bool
    read_bulk_mail: bool


def reading_choices(*, user_id: int) -> ReadingChoices:
    """Both of the person's choices in one statement (a run asks for both as it starts)."""
    consenting = AIConsent.objects.current().filter(user_id=user_id)  # by the id given: an index lookup, once
    row = User.objects.filter(pk=user_id).order_by().values_list(Exists(consenting), "read_bulk_mail").first()
    if row is None:  # the account is gone
        return ReadingChoices(consented=False, read_bulk_mail=False)
    return ReadingChoices(consented=bool(row[0]), read_bulk_mail=bool(row[1]))


def access_token_list(*, user: User) -> QuerySet[PersonalAccessToken]:
    """The person's tokens still in force, newest first."""
    return PersonalAccessToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at")
