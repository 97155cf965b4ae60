from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, QuerySet

from accounts.consent import RECIPIENTS_SINCE, SENT_SINCE, VERSIONS_IN_FORCE
from accounts.models import AIConsent, PersonalAccessToken, User


def consent_current(*, user: User) -> AIConsent | None:
    """The consent in force for the current consent text, if any."""
    return AIConsent.objects.current().filter(user=user).first()


def consent_is_current(*, user_id: int) -> bool:
    return AIConsent.objects.current().filter(user_id=user_id).exists()


def consent_in_force(*, user: User) -> AIConsent | None:
    """The consent in force, for the current text or an earlier one still in force (accounts/consent.py)."""
    return AIConsent.objects.in_force().filter(user=user).first()


def consent_allows_reading(*, user_id: int) -> bool:
    """Whether a run may read mail now: a consent in force, whatever its version."""
    return AIConsent.objects.in_force().filter(user_id=user_id).exists()


@dataclass(frozen=True)
class ReadingChoices:
    """What a person allows a run to read: anything at all (an AI consent in force), whom each email was sent
    to and their Sent mail (each with a consent to a version that says so), and bulk mail too."""

    consented: bool
    read_bulk_mail: bool
    read_recipients: bool = False
    read_sent: bool = False


def versions_since(version: str) -> list[str]:
    """The versions in force that say what `version` first said."""
    return [v for v in VERSIONS_IN_FORCE if int(v) >= int(version)]


def consent_covers_sent(*, user_id: int) -> bool:
    """Whether the person's consent in force covers reading their Sent mail (accounts/consent.py SENT_SINCE)."""
    return AIConsent.objects.in_force().filter(user_id=user_id, text_version__in=versions_since(SENT_SINCE)).exists()


def reading_choices(*, user_id: int) -> ReadingChoices:
    """The person's choices in one statement (a run asks for them as it starts)."""
    in_force = AIConsent.objects.in_force().filter(user_id=user_id)  # by the id given: an index lookup
    with_recipients = in_force.filter(text_version__in=versions_since(RECIPIENTS_SINCE))
    with_sent = in_force.filter(text_version__in=versions_since(SENT_SINCE))
    row = (
        User.objects.filter(pk=user_id)
        .order_by()
        .values_list(Exists(in_force), "read_bulk_mail", Exists(with_recipients), Exists(with_sent))
        .first()
    )
    if row is None:  # the account is gone
        return ReadingChoices(consented=False, read_bulk_mail=False)
    return ReadingChoices(
        consented=bool(row[0]), read_bulk_mail=bool(row[1]), read_recipients=bool(row[2]), read_sent=bool(row[3])
    )


def access_token_list(*, user: User) -> QuerySet[PersonalAccessToken]:
    """The person's tokens still in force, newest first."""
    return PersonalAccessToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at")
