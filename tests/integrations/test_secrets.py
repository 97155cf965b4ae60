"""Secrets at rest: encrypted with Fernet keys from the environment, and rotatable."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from config.crypto import SecretUnreadable, decrypt_json, encrypt_json
from integrations.services import integration_credentials
from tests.conftest import GmailBox

pytestmark = pytest.mark.django_db


def test_a_key_is_rotated_without_losing_credentials(gmail: GmailBox, settings) -> None:
    old_key = settings.ENCRYPTION_KEYS[0]
    before = integration_credentials(integration=gmail.integration)
    new_key = Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = [new_key, old_key]  # the new key in front; the old one still decrypts

    call_command("rotate_secrets")

    settings.ENCRYPTION_KEYS = [new_key]  # the old key removed
    gmail.integration.refresh_from_db()
    assert integration_credentials(integration=gmail.integration) == before


def test_a_secret_under_a_removed_key_is_a_clear_error(settings) -> None:
    token = encrypt_json({"token": "t"})
    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(SecretUnreadable):
        decrypt_json(token)


def test_a_mailbox_whose_secret_cannot_be_read_is_left_out_for_reconnecting(
    gmail: GmailBox, consenting_user, settings
) -> None:
    from tests.conftest import run_extraction

    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    run = run_extraction(consenting_user)
    gmail.integration.refresh_from_db()
    assert gmail.integration.status == "needs_reauth"
    assert run.status == "failed"
    assert run.error_code == "provider_auth"
    assert f"Gmail {gmail.address} was left out" in run.error_message
    assert "Connect it again" in gmail.integration.last_error


def test_rotating_reports_credentials_no_key_can_read(gmail: GmailBox, settings) -> None:
    from django.core.management import CommandError

    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CommandError, match="must connect again"):
        call_command("rotate_secrets")


def test_disconnecting_a_mailbox_whose_secret_cannot_be_read_still_works(
    client, gmail: GmailBox, consenting_user, settings
) -> None:
    settings.ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    client.force_login(consenting_user)
    response = client.post(f"/mailboxes/{gmail.integration.pk}/disconnect", follow=True)
    assert response.status_code == 200
    gmail.integration.refresh_from_db()
    assert (gmail.integration.status, gmail.integration.credentials_encrypted) == ("disconnected", "")
