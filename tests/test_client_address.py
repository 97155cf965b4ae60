"""Every per-address limit (login throttling, sign-up and reset limits, CSP reports) counts the address the
trusted proxy saw the client come from, never one the client wrote: behind X-Forwarded-For, which each proxy
appends to, that is the right-most address that is not one of TRUSTED_PROXIES."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.test import RequestFactory

from config.clientaddress import client_address
from tests.processes import ROOT, process_env


def address(settings, header: str, proxies: list[str], remote: str, value: str | None) -> str:  # type: ignore[no-untyped-def]
    settings.CLIENT_ADDRESS_META_KEY = header
    settings.TRUSTED_PROXIES = proxies
    meta = {"REMOTE_ADDR": remote} | ({header: value} if header and value is not None else {})
    request = RequestFactory().get("/")
    request.META.update(meta)
    return client_address(request)


XFF = "HTTP_X_FORWARDED_FOR"


@pytest.mark.parametrize(
    ("header", "proxies", "remote", "value", "expected"),
    [
        # nginx on this machine appending $remote_addr; the client sent its own first entry
        (XFF, ["127.0.0.1"], "127.0.0.1", "6.6.6.6, 198.51.100.7", "198.51.100.7"),
        # two proxies (a load balancer, then nginx): the address the outer one saw
        (XFF, ["127.0.0.1", "10.0.0.0/8"], "127.0.0.1", "6.6.6.6, 198.51.100.7, 10.1.2.3", "198.51.100.7"),
        # a client reaching gunicorn directly writes whatever it likes: counted as itself
        (XFF, ["127.0.0.1"], "203.0.113.9", "198.51.100.7", "203.0.113.9"),
        # an entry with its port (some load balancers), IPv6 in brackets, spaces
        (XFF, ["10.0.0.0/8"], "10.0.0.2", "198.51.100.7:43122", "198.51.100.7"),
        (XFF, ["10.0.0.0/8"], "10.0.0.2", " [2001:db8::7]:443 ", "2001:db8::7"),
        # nothing readable past the proxies, or no header at all: the peer
        (XFF, ["127.0.0.1"], "127.0.0.1", "not-an-address", "127.0.0.1"),
        (XFF, ["127.0.0.1"], "127.0.0.1", None, "127.0.0.1"),
        # a header the proxy sets, replacing the client's (X-Real-IP), as configured before TRUSTED_PROXIES
        ("HTTP_X_REAL_IP", [], "127.0.0.1", "198.51.100.7", "198.51.100.7"),
        ("HTTP_X_REAL_IP", [], "127.0.0.1", None, "127.0.0.1"),
        ("HTTP_X_REAL_IP", [], "127.0.0.1", "6.6.6.6, 198.51.100.7", "198.51.100.7"),
        # ... and with TRUSTED_PROXIES named, only from them
        ("HTTP_X_REAL_IP", ["127.0.0.1"], "203.0.113.9", "198.51.100.7", "203.0.113.9"),
        ("", [], "203.0.113.9", None, "203.0.113.9"),
    ],
)
def test_the_client_address_is_the_one_the_trusted_proxy_saw(settings, header, proxies, remote, value, expected):  # type: ignore[no-untyped-def]
    assert address(settings, header, proxies, remote, value) == expected


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)  # the child process writes the accounts; flushed after
def test_a_client_writing_its_own_x_forwarded_for_is_still_limited_as_one_address() -> None:
    """Settings as an operator writes them (RATELIMIT_IP_META_KEY=HTTP_X_FORWARDED_FOR, TRUSTED_PROXIES naming
    nginx): sign-ups from one client, each claiming another address first in X-Forwarded-For, are refused past
    the per-address limit; another client behind the same proxy is not."""
    script = """
import django, json; django.setup()
from django.test import Client
def sign_up(n, client_ip, claimed):
    proxy = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"{claimed}, {client_ip}")
    data = {"email": f"person{n}@example.com", "name": "", "password1": "a-long-pass-9", "password2": "a-long-pass-9"}
    return proxy.post("/signup/", data).status_code
print(json.dumps([sign_up(n, "198.51.100.7", f"10.9.9.{n}") for n in range(4)] + [sign_up(9, "198.51.100.8", "x")]))
"""
    child = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=process_env(
            RATELIMIT_IP_META_KEY="HTTP_X_FORWARDED_FOR", TRUSTED_PROXIES="127.0.0.1", ACCOUNT_REQUESTS_PER_ADDRESS="3"
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout.splitlines()[-1]) == [302, 302, 302, 429, 302]
