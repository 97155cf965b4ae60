import pytest
from django.test import Client

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User
from accounts.selectors import consent_current
from accounts.services import consent_grant, consent_revoke

pytestmark = pytest.mark.django_db


def test_consent_page_says_what_is_sent_and_what_is_not(client: Client, user: User) -> None:
    client.force_login(user)
    body = client.get("/consent/").content.decode()
    assert "What is sent to Gemini" in body
    assert "its subject line" in body
    assert "attachments" in body
    assert "No consent" in body


def test_consent_page_says_secrets_are_replaced_before_anything_is_sent(client: Client, user: User) -> None:
    client.force_login(user)
    body = client.get("/consent/").content.decode()
    assert "one-time codes, passwords, card numbers, IBANs" in body
    assert "replaced by placeholders such as [password]" in body


def test_granting_records_the_text_version_and_time(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/consent/", {"action": "grant"})
    assert response.status_code == 302
    consent = AIConsent.objects.get(user=user)
    assert consent.text_version == CONSENT_VERSION
    assert consent.revoked_at is None
    assert consent_current(user=user) == consent


def test_revoking_keeps_the_row_and_ends_consent(client: Client, user: User) -> None:
    consent_grant(user=user)
    client.force_login(user)
    client.post("/consent/", {"action": "revoke"})
    consent = AIConsent.objects.get(user=user)
    assert consent.revoked_at is not None
    assert consent_current(user=user) is None


def test_granting_twice_keeps_one_current_consent(user: User) -> None:
    first = consent_grant(user=user)
    second = consent_grant(user=user)
    assert first == second
    assert AIConsent.objects.filter(user=user, revoked_at__isnull=True).count() == 1


def test_consent_to_an_older_text_is_not_current(user: User) -> None:
    AIConsent.objects.create(user=user, text_version="0")
    assert consent_current(user=user) is None
    consent_grant(user=user)
    assert AIConsent.objects.get(user=user, text_version="0").revoked_at is not None
    assert consent_current(user=user) is not None


def test_grant_revoke_grant_keeps_the_history(user: User) -> None:
    consent_grant(user=user)
    consent_revoke(user=user)
    consent_grant(user=user)
    assert AIConsent.objects.filter(user=user).count() == 2


def test_an_unknown_consent_action_is_a_message_not_an_error(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/consent/", {"action": "maybe"}, follow=True)
    assert response.status_code == 200
    assert "Choose to give or to revoke consent" in response.content.decode()
    assert not AIConsent.objects.exists()
