"""Encryption of secrets at rest (OAuth tokens, MSAL caches) with Fernet keys from the environment.

`settings.ENCRYPTION_KEYS` holds several keys, newest first: everything is encrypted with the first and
decrypted with any, so a key is rotated by putting a new one in front and re-encrypting.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadable(Exception):
    """Stored secret cannot be decrypted with any configured key (a key was removed too early)."""


def encryption_keys_check(keys: list[str]) -> None:
    """ImproperlyConfigured naming, by position only (a key is a secret), the first key Fernet cannot take."""
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key.encode())
        except ValueError:  # not URL-safe base64, or not 32 bytes
            raise ImproperlyConfigured(
                f"TASKLIFT_ENCRYPTION_KEYS: key {position} of {len(keys)} is not a Fernet key (44 characters of "
                "URL-safe base64, 32 bytes); make one with python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'."
            ) from None


# The 32 bytes of a key Fernet made hold about 30 different values, never fewer than 8 in practice (the odds are
# about 1e-37); a key with fewer was made by hand: zeros, one byte repeated, a short pattern.
KEY_MIN_DISTINCT_BYTES = 8


def encryption_keys_strength_check(keys: list[str]) -> None:
    """Production's refusal of Fernet keys that parse but protect nothing, each named by position: a key anyone
    could guess, or a key listed twice (a rotation that put the old key in front again). After
    encryption_keys_check, so that each decodes."""
    decoded = [base64.urlsafe_b64decode(key.encode()) for key in keys]  # as Fernet decodes it
    for position, key in enumerate(decoded, start=1):
        distinct = len(set(key))
        if distinct < KEY_MIN_DISTINCT_BYTES:
            raise ImproperlyConfigured(
                f"TASKLIFT_ENCRYPTION_KEYS: key {position} of {len(keys)} is not random: its 32 bytes take only "
                f"{distinct} of the 256 byte values, where a random key's take about 30 (a key of zeros or of one "
                "byte repeated is anyone's to guess); make one with python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'."
            )
        if key in decoded[: position - 1]:  # the same bytes, however the base64 was written
            raise ImproperlyConfigured(
                f"TASKLIFT_ENCRYPTION_KEYS: key {position} of {len(keys)} is key {decoded.index(key) + 1} again; "
                "list each key once, newest first."
            )


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.ENCRYPTION_KEYS))


def encrypt_json(value: dict[str, Any]) -> str:
    return _current().encrypt(json.dumps(value, separators=(",", ":")).encode()).decode()


def decrypt_json(token: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(_current().decrypt(token.encode()))
    except InvalidToken:
        raise SecretUnreadable("A stored secret cannot be decrypted with the configured keys.") from None
    return data


def reencrypt(token: str) -> str:
    """The same secret under the newest key."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("A stored secret cannot be decrypted with the configured keys.") from None
