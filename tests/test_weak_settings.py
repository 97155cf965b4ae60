"""Issue 32, point 6: production refuses at start what parses but protects nothing (config/weak.py and
config/crypto.py): a SECRET_KEY that check --deploy calls weak, a guessable or repeated encryption key, ALLOWED_HOSTS
over a public suffix, a SITE_URL without https. Each refusal names the setting and what to write instead, and
never prints a secret; sound values start, and check --deploy stays clean on them."""

from __future__ import annotations

import base64
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.core.checks.security.base import check_secret_key
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from config.crypto import encryption_keys_strength_check
from config.weak import secret_key_check
from tests.test_settings import _environment, _import_settings, _production

# What docs/deploy.md has an operator write, besides _production's secrets, services and servers.
SOUND = {"SITE_URL": "https://tasklift.example.com", "ALLOWED_HOSTS": "tasklift.example.com"}


def _start(**env: str) -> subprocess.CompletedProcess[str]:
    """Production's settings read in a process of their own, sound but for `env`."""
    return _import_settings(**_production(**{**SOUND, **env}))


def _assert_refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode != 0, message
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr, (message, result.stderr[-2000:])


def _fernet_key(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.slow  # a process of its own (tests/slow.py)
def test_weak_settings_secret_key_that_check_deploy_calls_weak_is_refused_at_start() -> None:
    random = secrets.token_urlsafe(60)
    for key, why in (
        ("a" * 50, "it is made of 1 different characters, fewer than 5"),
        ("abcd" * 13, "it is made of 4 different characters, fewer than 5"),
        (random[:49], "it has 49 characters, fewer than 50"),
        (f"django-insecure-{random}", "it starts with 'django-insecure-', the mark of a key made for development"),
    ):
        result = _start(SECRET_KEY=key)
        _assert_refused(result, f"Production mode needs a real SECRET_KEY: {why} (security.W009). Make one with")
        assert key not in result.stderr  # a secret is described, never printed


def test_weak_settings_secret_key_refused_at_start_exactly_when_check_deploy_warns() -> None:
    """The start check is Django's own test (security.W009), so the two never disagree, either way."""
    random = secrets.token_urlsafe(60)
    verdicts = set()
    for key in ["a" * 50, "abcd" * 13, "abcde" * 10, random[:49], random[:50], f"django-insecure-{random}", random]:
        try:
            secret_key_check(key)
        except ImproperlyConfigured:
            refused = True
        else:
            refused = False
        with override_settings(SECRET_KEY=key):
            warned = [warning.id for warning in check_secret_key(None)] == ["security.W009"]
        assert refused == warned, key
        verdicts.add(refused)
    assert verdicts == {True, False}  # keys of both kinds were compared


@pytest.mark.slow  # a process of its own (tests/slow.py)
def test_weak_settings_encryption_key_of_zeros_repeated_bytes_or_listed_twice_is_refused_at_start() -> None:
    good, other = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    # The same 32 bytes written otherwise: the last character's two lowest bits are not part of the key.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    respelled = good[:42] + alphabet[alphabet.index(good[42]) ^ 1] + good[43:]
    not_random = "is not random: its 32 bytes take only"
    for keys, message in (
        ("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", f"key 1 of 1 {not_random} 1 of the 256 byte values"),
        (_fernet_key(b"\x5a" * 32), f"key 1 of 1 {not_random} 1 of the 256 byte values"),
        (f"{good},{_fernet_key(bytes(range(4)) * 8)}", f"key 2 of 2 {not_random} 4 of the 256 byte values"),
        (f"{good},{other},{good}", "key 3 of 3 is key 1 again; list each key once, newest first"),
        (f"{good},{respelled}", "key 2 of 2 is key 1 again"),
    ):
        result = _start(TASKLIFT_ENCRYPTION_KEYS=keys)
        _assert_refused(result, f"TASKLIFT_ENCRYPTION_KEYS: {message}")
        assert not any(key in result.stderr for key in keys.split(",")), keys  # named by position only
    generate = "make one with python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
    assert generate in _start(TASKLIFT_ENCRYPTION_KEYS="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").stderr


def test_weak_settings_keys_fernet_generates_are_never_taken_for_weak() -> None:
    """The bar (8 different byte values of 32) is far below any key Fernet makes: a random key holds about 30."""
    encryption_keys_strength_check([Fernet.generate_key().decode() for _ in range(2000)])


@pytest.mark.slow  # a process of its own (tests/slow.py)
def test_weak_settings_allowed_hosts_over_a_public_suffix_are_refused_at_start() -> None:
    for hosts, message in (
        (".co.uk", "ALLOWED_HOSTS: .co.uk would answer for every domain under co.uk, a public suffix"),
        ("co.uk", "ALLOWED_HOSTS: co.uk is a public suffix, not a host name of this site"),
        ("tasklift.example.com,.github.io", "ALLOWED_HOSTS: .github.io would answer for every domain under github.io"),
        ("*", "ALLOWED_HOSTS must name the site's host names in production, not *"),
    ):
        _assert_refused(_start(ALLOWED_HOSTS=hosts), message)
    named = _start(ALLOWED_HOSTS=".co.uk").stderr
    assert "Name the site's host names in production: tasklift.example.co.uk, or .example.co.uk" in named


@pytest.mark.slow  # a process of its own (tests/slow.py)
def test_weak_settings_site_url_over_plain_http_or_unset_is_refused_at_start() -> None:
    _assert_refused(
        _start(SITE_URL="http://tasklift.example.com"),
        "SITE_URL must be the site's public https:// address in production, not http://tasklift.example.com",
    )
    _assert_refused(_start(SITE_URL=""), "Production mode needs SITE_URL, the site's public https:// address")


@pytest.mark.slow  # a process of its own (tests/slow.py)
def test_weak_settings_sound_values_start_and_check_deploy_stays_clean() -> None:
    """A key list being rotated, one subdomain wildcard under a public suffix, https: production starts, and
    check --deploy has nothing to say (its security.W009 included)."""
    sound = _production(
        SECRET_KEY=secrets.token_urlsafe(64),
        TASKLIFT_ENCRYPTION_KEYS=f"{Fernet.generate_key().decode()},{Fernet.generate_key().decode()}",
        ALLOWED_HOSTS="tasklift.example.co.uk,.tasklift.example.co.uk,localhost,127.0.0.1",
        SITE_URL="https://tasklift.example.co.uk",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=_environment(**sound),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
