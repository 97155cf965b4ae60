import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

pytestmark = pytest.mark.slow  # settings read in processes of their own (tests/slow.py)


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


def _environment(**env: str) -> dict[str, str]:
    """This process's environment for a child reading config.settings, without what the test settings added
    for the development sandbox (OAUTHLIB_INSECURE_TRANSPORT), plus `env`."""
    inherited = {k: v for k, v in os.environ.items() if k != "OAUTHLIB_INSECURE_TRANSPORT"}
    return {**inherited, "DJANGO_SETTINGS_MODULE": "config.settings", **env}


def _import_settings(script: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        env=_environment(**env),
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
    result = _import_settings(**_production(TASKLIFT_ENCRYPTION_KEYS=""))
    assert result.returncode != 0
    assert "TASKLIFT_ENCRYPTION_KEYS" in result.stderr


def test_a_malformed_number_setting_is_a_clear_error() -> None:
    result = _import_settings(GEMINI_TIMEOUT_S="soon")
    assert result.returncode != 0
    assert "GEMINI_TIMEOUT_S must be a whole number" in result.stderr


# Credentials of the real services (never called by these tests): production refuses the sandbox.
REAL_SERVICES = {
    "GOOGLE_CLIENT_ID": "1234-tasklift.apps.googleusercontent.com",
    "GOOGLE_CLIENT_SECRET": "GOCSPX-not-a-real-secret",
    "MICROSOFT_CLIENT_ID": "00000000-0000-0000-0000-000000000000",
    "MICROSOFT_CLIENT_SECRET": "not-a-real-secret",
    "GEMINI_API_KEY": "not-a-real-key",
}


def _production(**env: str) -> dict[str, str]:
    from cryptography.fernet import Fernet

    return {
        "TASKLIFT_MODE": "production",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "TASKLIFT_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "DEBUG": "false",
        **REAL_SERVICES,
        "EMAIL_HOST": "smtp.example.com",
        "SITE_URL": "https://tasklift.example.com",  # production has no default: the public https:// address
        "DATABASE_URL": settings.DATABASE_URL,  # this test run's servers: production names its own
        "REDIS_URL": settings.REDIS_URL,
        **env,
    }


def test_production_refuses_to_start_on_the_embedded_development_servers() -> None:
    for missing in ("DATABASE_URL", "REDIS_URL"):
        result = _import_settings(**_production(**{missing: ""}))
        assert result.returncode != 0
        assert f"Production mode needs {missing}" in result.stderr


def test_production_refuses_debug() -> None:
    result = _import_settings(**_production(DEBUG="true"))
    assert result.returncode != 0
    assert "Production mode refuses DEBUG=true" in result.stderr


def test_check_deploy_is_clean_at_warning_level_in_production() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=_environment(**_production()),
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
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=_environment(**_production()),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["302", "302"]  # to the admin login: an anonymous caller sees neither


def test_production_refuses_the_sandbox_unless_the_deployment_is_a_demo() -> None:
    for missing in ("GOOGLE_CLIENT_ID", "MICROSOFT_CLIENT_ID", "GEMINI_API_KEY"):
        result = _import_settings(**_production(**{missing: ""}))
        assert result.returncode != 0, missing
        assert "against the local sandbox" in result.stderr and "TASKLIFT_DEMO=true" in result.stderr, missing

    result = _import_settings(**_production(GOOGLE_CLIENT_ID="", MICROSOFT_CLIENT_ID="", GEMINI_API_KEY=""))
    assert "Google sign-in and Gmail (GOOGLE_CLIENT_ID is not set)" in result.stderr
    assert "Microsoft sign-in and Outlook (MICROSOFT_CLIENT_ID is not set)" in result.stderr
    assert "Gemini (GEMINI_API_KEY is not set)" in result.stderr


def test_a_production_demo_runs_on_the_sandbox_without_insecure_oauth_transport() -> None:
    demo = _production(
        TASKLIFT_DEMO="true", SANDBOX_URL="https://sandbox.demo.example", **dict.fromkeys(REAL_SERVICES, "")
    )
    script = (
        "import os; from django.conf import settings;"
        "print(settings.GOOGLE_SIMULATED, settings.MICROSOFT_SIMULATED, settings.GEMINI_SIMULATED,"
        " os.environ.get('OAUTHLIB_INSECURE_TRANSPORT'))"
    )
    result = _import_settings(script, **demo)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True", "True", "None"]

    plain_http = _import_settings(**{**demo, "SANDBOX_URL": "http://127.0.0.1:8765"})
    assert plain_http.returncode != 0
    assert "set SANDBOX_URL to an https:// address" in plain_http.stderr


def test_a_production_demo_trusts_the_one_certificate_file_it_names_for_every_client() -> None:
    demo = _production(TASKLIFT_DEMO="true", SANDBOX_URL="https://127.0.0.1:8766", **dict.fromkeys(REAL_SERVICES, ""))
    script = (
        "from django.conf import settings;"
        "print(settings.GOOGLE_CA_BUNDLE, settings.GEMINI_CA_BUNDLE, settings.MICROSOFT_CA_BUNDLE)"
    )
    result = _import_settings(
        script, **demo, SANDBOX_CA_BUNDLE="/var/lib/tasklift/sandbox/tls-cert.pem", MICROSOFT_CA_BUNDLE=""
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["/var/lib/tasklift/sandbox/tls-cert.pem"] * 3

    # A demo set up before SANDBOX_CA_BUNDLE, naming the sandbox's certificate as Microsoft's, still works.
    earlier = _import_settings(script, **demo, SANDBOX_CA_BUNDLE="", MICROSOFT_CA_BUNDLE="/srv/sandbox.pem")
    assert earlier.returncode == 0, earlier.stderr[-2000:]
    assert earlier.stdout.split() == ["/srv/sandbox.pem"] * 3


def test_production_refuses_oauthlib_insecure_transport() -> None:
    result = _import_settings(**_production(OAUTHLIB_INSECURE_TRANSPORT="1"))
    assert result.returncode != 0
    assert "OAUTHLIB_INSECURE_TRANSPORT must not be set in production" in result.stderr


def test_production_refuses_a_client_id_without_its_secret() -> None:
    result = _import_settings(**_production(MICROSOFT_CLIENT_SECRET=""))
    assert result.returncode != 0
    assert "MICROSOFT_CLIENT_ID is set but MICROSOFT_CLIENT_SECRET is not" in result.stderr


def test_development_on_the_sandbox_lets_oauthlib_use_plain_http_loopback() -> None:
    """`make run`: development mode, every service simulated, the sandbox on plain http."""
    script = "import os; print(os.environ.get('OAUTHLIB_INSECURE_TRANSPORT'))"
    result = _import_settings(script, TASKLIFT_MODE="development")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1"]


def test_logs_are_json_in_production_and_plain_in_development() -> None:
    script = "from django.conf import settings; print(settings.LOG_FORMAT)"
    production = _import_settings(script, **_production(LOG_FORMAT=""))
    development = _import_settings(script, TASKLIFT_MODE="development", LOG_FORMAT="")
    assert production.stdout.split()[-1:] == ["json"], production.stderr[-2000:]
    assert development.stdout.split()[-1:] == ["plain"], development.stderr[-2000:]
    unknown = _import_settings(script, LOG_FORMAT="xml")
    assert unknown.returncode != 0 and "LOG_FORMAT must be 'json' or 'plain'" in unknown.stderr


def test_production_refuses_allowed_hosts_that_answer_any_host() -> None:
    """`*` (or a pattern Django does not read as one, `*.example.com`, or a whole top-level domain) would let any
    Host header through: links built from it, cache poisoning, a name the site never meant to answer to."""
    for hosts in ("*", "tasklift.example.com,*", "*.example.com", ".com"):
        result = _import_settings(**_production(ALLOWED_HOSTS=hosts))
        assert result.returncode != 0, hosts
        assert "ALLOWED_HOSTS must name the site's host names" in result.stderr, (hosts, result.stderr[-2000:])
    subdomains = _import_settings(**_production(ALLOWED_HOSTS="tasklift.example.com,.tasklift.example.com"))
    assert subdomains.returncode == 0, subdomains.stderr[-2000:]


def test_production_refuses_x_forwarded_for_without_the_trusted_proxies_named() -> None:
    """A client writes the start of X-Forwarded-For: counted by it, every per-address limit is the client's to
    choose. Production takes it only with TRUSTED_PROXIES, the proxies whose appended addresses it believes."""
    alone = _import_settings(**_production(RATELIMIT_IP_META_KEY="HTTP_X_FORWARDED_FOR"))
    assert alone.returncode != 0
    assert "RATELIMIT_IP_META_KEY=HTTP_X_FORWARDED_FOR needs TRUSTED_PROXIES" in alone.stderr

    named = _import_settings(
        **_production(RATELIMIT_IP_META_KEY="HTTP_X_FORWARDED_FOR", TRUSTED_PROXIES="127.0.0.1, 10.0.0.0/8, ::1")
    )
    assert named.returncode == 0, named.stderr[-2000:]

    wrong = _import_settings(**_production(RATELIMIT_IP_META_KEY="HTTP_X_REAL_IP", TRUSTED_PROXIES="127.0.0.1,proxy"))
    assert wrong.returncode != 0
    assert "TRUSTED_PROXIES: 'proxy' is not an IP address or network" in wrong.stderr

    header_name = _import_settings(RATELIMIT_IP_META_KEY="X-Real-IP")
    assert header_name.returncode != 0
    assert "RATELIMIT_IP_META_KEY names a request META key such as HTTP_X_REAL_IP" in header_name.stderr


def test_every_encryption_key_is_checked_at_start_and_a_bad_one_named_by_position() -> None:
    from cryptography.fernet import Fernet

    good = Fernet.generate_key().decode()
    for mode in ("production", "development"):
        result = _import_settings(**_production(TASKLIFT_MODE=mode, TASKLIFT_ENCRYPTION_KEYS=f"{good},notakey"))
        assert result.returncode != 0, mode
        assert "TASKLIFT_ENCRYPTION_KEYS: key 2 of 2 is not a Fernet key" in result.stderr, result.stderr[-2000:]
        assert "notakey" not in result.stderr and good not in result.stderr  # named by position, never printed
    alone = _import_settings(**_production(TASKLIFT_ENCRYPTION_KEYS="notakey"))
    assert "TASKLIFT_ENCRYPTION_KEYS: key 1 of 1 is not a Fernet key" in alone.stderr
