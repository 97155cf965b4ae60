import os
import secrets
import subprocess
import sys

from django.conf import settings


def test_celery_time_limits_are_ordered_below_the_visibility_timeout() -> None:
    soft = settings.CELERY_TASK_SOFT_TIME_LIMIT
    hard = settings.CELERY_TASK_TIME_LIMIT
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert soft < hard < visibility


def test_celery_is_reliable_by_default() -> None:
    from config.celery import app

    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT


def _import_settings(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_production_refuses_to_start_without_a_real_secret_key() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**environment, "DJANGO_SETTINGS_MODULE": "config.settings", "TASKLIFT_MODE": "production"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "Production mode needs a real SECRET_KEY" in result.stderr


def test_production_refuses_without_encryption_keys() -> None:
    result = _import_settings(TASKLIFT_MODE="production", SECRET_KEY="x" * 60)
    assert result.returncode != 0
    assert "TASKLIFT_ENCRYPTION_KEYS" in result.stderr


def test_a_malformed_number_setting_is_a_clear_error() -> None:
    result = _import_settings(GEMINI_TIMEOUT_S="soon")
    assert result.returncode != 0
    assert "GEMINI_TIMEOUT_S must be a whole number" in result.stderr


def _production(**env: str) -> dict[str, str]:
    from cryptography.fernet import Fernet

    return {
        "TASKLIFT_MODE": "production",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "TASKLIFT_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "DEBUG": "false",
        "EMAIL_HOST": "smtp.example.com",
        **env,
    }


def test_production_refuses_debug() -> None:
    result = _import_settings(**_production(DEBUG="true"))
    assert result.returncode != 0
    assert "Production mode refuses DEBUG=true" in result.stderr


def test_check_deploy_is_clean_at_warning_level_in_production() -> None:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **_production()}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_api_docs_are_for_staff_only_in_production() -> None:
    script = (
        "import django; django.setup();"
        "from django.test import Client; from django.test.utils import setup_test_environment;"
        "setup_test_environment(); c = Client(HTTP_X_FORWARDED_PROTO='https');"
        "print(c.get('/api/docs').status_code, c.get('/api/openapi.json').status_code)"
    )
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **_production()}
    result = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["302", "302"]  # to the admin login: an anonymous caller sees neither
