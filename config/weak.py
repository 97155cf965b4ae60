"""Values production refuses at start although they parse: a SECRET_KEY that `check --deploy` would call weak,
ALLOWED_HOSTS that answer any host or a public suffix, a SITE_URL that is not https. Each check raises
ImproperlyConfigured naming the setting and what to write instead; config/settings.py runs them in production only,
so that development keeps its embedded defaults (an http loopback SITE_URL, a fixed SECRET_KEY). Weak encryption
keys: config/crypto.py.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured


def secret_key_check(secret_key: str) -> None:
    """Refuses what `manage.py check --deploy` warns of (security.W009), by Django's own test of it."""
    # The very test check --deploy makes, so that the two cannot disagree; private in Django (and so not in its
    # stubs): tests/test_weak_settings.py holds it to check --deploy's verdict. Imported here, as only production
    # pays for loading the checks.
    from django.core.checks.security.base import (  # type: ignore[attr-defined]
        SECRET_KEY_INSECURE_PREFIX,
        SECRET_KEY_MIN_LENGTH,
        SECRET_KEY_MIN_UNIQUE_CHARACTERS,
        _check_secret_key,
    )

    if _check_secret_key(secret_key):
        return
    different = len(set(secret_key))
    if len(secret_key) < SECRET_KEY_MIN_LENGTH:
        why = f"it has {len(secret_key)} characters, fewer than {SECRET_KEY_MIN_LENGTH}"
    elif different < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        why = f"it is made of {different} different characters, fewer than {SECRET_KEY_MIN_UNIQUE_CHARACTERS}"
    elif secret_key.startswith(SECRET_KEY_INSECURE_PREFIX):
        why = f"it starts with '{SECRET_KEY_INSECURE_PREFIX}', the mark of a key made for development"
    else:  # a rule of a later Django
        why = "manage.py check --deploy calls it weak"
    raise ImproperlyConfigured(
        f"Production mode needs a real SECRET_KEY: {why} (security.W009). Make one with "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(64))'."
    )


def allowed_hosts_check(hosts: list[str]) -> None:
    """Refuses an entry that answers any Host header, or every domain under a public suffix (the Public Suffix
    List, both its ICANN and its private part: `.co.uk`, `.github.io`), or is such a suffix itself (`co.uk`)."""
    # `*` answers any Host header (links and redirects built from it, cache poisoning); Django reads no other glob,
    # and a leading dot over one label is every site of a top-level domain, listed or not (`.com`, `.internal`).
    any_host = [host for host in hosts if "*" in host or (host.startswith(".") and "." not in host.strip("."))]
    if any_host:
        raise ImproperlyConfigured(
            f"ALLOWED_HOSTS must name the site's host names in production, not {', '.join(any_host)}: write "
            "tasklift.example.com, or .example.com for every subdomain of one domain."
        )
    # The list ships inside the package (no download); read here, as only production pays for parsing it. An
    # unlisted name (localhost, testserver) is not taken for a suffix, as the list's implicit `*` rule would.
    from publicsuffixlist import PublicSuffixList

    suffixes = PublicSuffixList(accept_unknown=False)
    for host in hosts:
        suffix = host.removeprefix(".")
        if not suffixes.is_public(suffix):
            continue
        what = (
            f"would answer for every domain under {suffix}, a public suffix"
            if host.startswith(".")
            else "is a public suffix, not a host name of this site"
        )
        raise ImproperlyConfigured(
            f"ALLOWED_HOSTS: {host} {what} (on the Public Suffix List: anyone registers domains of their own under "
            f"it). Name the site's host names in production: tasklift.example.{suffix}, or .example.{suffix} for "
            "every subdomain of one domain."
        )


def site_url_check(site_url: str) -> None:
    """`site_url` as the environment gives it: production has no default, and wants https."""
    if not site_url:
        raise ImproperlyConfigured(
            "Production mode needs SITE_URL, the site's public https:// address (OAuth redirect URIs and the links in "
            "emails are built from it): SITE_URL=https://tasklift.example.com."
        )
    try:
        address = urlsplit(site_url)
        https = address.scheme == "https" and bool(address.hostname)
    except ValueError:  # an unclosed [IPv6 address
        https = False
    if not https:
        raise ImproperlyConfigured(
            f"SITE_URL must be the site's public https:// address in production, not {site_url}: OAuth redirect "
            "URIs and the links in emails are built from it, and the session cookie travels over https only. "
            "Write SITE_URL=https://tasklift.example.com."
        )
