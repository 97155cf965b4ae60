"""Email goes through Django's email framework: SMTP from the environment in production (which refuses to start
without it), a file per message under .local/mail/ in development."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.conf import settings

from tests.test_settings import REAL_SERVICES

pytestmark = pytest.mark.slow  # settings read in a process of their own (tests/slow.py)

SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s;"
    "print(json.dumps([s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS, s.EMAIL_USE_SSL,"
    " s.EMAIL_HOST_USER, s.DEFAULT_FROM_EMAIL, str(s.EMAIL_FILE_PATH)]))"
)
EMAIL_VARIABLES = (
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_USE_TLS",
    "EMAIL_USE_SSL",
    "EMAIL_HOST_USER",
    "DEFAULT_FROM_EMAIL",
)


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    # Without what the test settings added for the development sandbox (OAUTHLIB_INSECURE_TRANSPORT).
    base = {k: v for k, v in os.environ.items() if k not in (*EMAIL_VARIABLES, "OAUTHLIB_INSECURE_TRANSPORT")}
    # the servers this test run uses: the child starts no embedded one of its own
    servers = {"DATABASE_URL": settings.DATABASE_URL, "REDIS_URL": settings.REDIS_URL}
    return subprocess.run(
        [sys.executable, "-c", SHOW],
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings", **servers, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _production(**env: str) -> dict[str, str]:
    return {
        "TASKLIFT_MODE": "production",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "TASKLIFT_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "DEBUG": "false",
        **REAL_SERVICES,  # production refuses the sandbox
        "SITE_URL": "https://tasklift.example.com",  # production has no default: the public https:// address
        **env,
    }


def test_production_refuses_to_start_without_a_mail_server() -> None:
    result = _settings(**_production())
    assert result.returncode != 0
    assert "Production mode needs EMAIL_HOST" in result.stderr


def test_production_sends_through_the_smtp_server_of_the_environment() -> None:
    result = _settings(
        **_production(
            EMAIL_HOST="smtp.example.com",
            EMAIL_PORT="465",
            EMAIL_HOST_USER="tasklift",
            DEFAULT_FROM_EMAIL="Tasklift <hello@example.com>",
        )
    )
    assert result.returncode == 0, result.stderr[-2000:]
    backend, host, port, tls, ssl, user, sender, _ = json.loads(result.stdout)
    assert backend == "django.core.mail.backends.smtp.EmailBackend"
    assert (host, port, tls, ssl, user) == ("smtp.example.com", 465, False, True, "tasklift")
    assert sender == "Tasklift <hello@example.com>"


def test_development_writes_each_email_to_a_file_under_local() -> None:
    result = _settings(TASKLIFT_MODE="development")
    assert result.returncode == 0, result.stderr[-2000:]
    backend, host, port, tls, ssl, *_, path = json.loads(result.stdout)
    assert backend == "django.core.mail.backends.filebased.EmailBackend"
    assert path == str(settings.LOCAL_DIR / "mail")
    assert (host, port, tls, ssl) == ("", 587, True, False)
