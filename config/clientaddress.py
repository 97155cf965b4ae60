"""The address a request came from, as every per-address limit counts it: django-ratelimit's `ip` key (login
throttling, sign-up and reset limits, CSP reports) calls `client_address` (RATELIMIT_IP_META_KEY in settings).

Behind a proxy, gunicorn's peer (REMOTE_ADDR) is the proxy, and the operator's RATELIMIT_IP_META_KEY names the
header the proxy writes the client's address in (settings.CLIENT_ADDRESS_META_KEY):
- X-Forwarded-For, which each proxy appends to and whose start is whatever the client sent: the right-most
  address that is not one of TRUSTED_PROXIES, the one the outermost trusted proxy saw (production refuses this
  header without TRUSTED_PROXIES);
- a header the proxy sets, replacing the client's (X-Real-IP): its value.
When TRUSTED_PROXIES is named, a request whose peer is not one of them reached gunicorn directly and counts as that
peer, whatever its headers say; so does a request whose header is missing or unreadable (never a 500).

Written here rather than taken from django-ipware: its defaults read several headers a client can write and the
left-most address; the rule wanted is this one header and the proxies named, a few lines of `ipaddress`.
"""

from __future__ import annotations

import ipaddress
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

FORWARDED_FOR = "HTTP_X_FORWARDED_FOR"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_networks(entries: list[str]) -> tuple[Network, ...]:
    """TRUSTED_PROXIES' addresses and networks (`127.0.0.1`, `10.0.0.0/8`, `::1`); ImproperlyConfigured naming
    an entry that is neither."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"TRUSTED_PROXIES: {entry!r} is not an IP address or network (write 127.0.0.1, 10.0.0.0/8 or ::1)."
            ) from None
    return tuple(networks)


@cache
def _trusted(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return proxy_networks(list(entries))


def _address(entry: str) -> Address | None:
    """An address as a proxy writes it: bare, `[v6]:port` or `v4:port` (some load balancers add the port)."""
    entry = entry.strip()
    if entry.startswith("[") and "]" in entry:
        entry = entry[1 : entry.index("]")]
    elif entry.count(":") == 1:
        entry = entry.split(":", 1)[0]
    try:
        return ipaddress.ip_address(entry)
    except ValueError:
        return None


def _is_proxy(address: Address | None, proxies: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in proxies)


def client_address(request: HttpRequest) -> str:
    peer = str(request.META.get("REMOTE_ADDR") or "")
    header = settings.CLIENT_ADDRESS_META_KEY
    if not header:
        return peer
    proxies = _trusted(tuple(settings.TRUSTED_PROXIES))
    if proxies and not _is_proxy(_address(peer), proxies):
        return peer
    entries = str(request.META.get(header, "")).split(",")
    if header != FORWARDED_FOR:
        entries = entries[-1:]  # a header the proxy sets has one address; a list's last is the nearest hop's
    for entry in reversed(entries):
        address = _address(entry)
        if address is None:
            break  # past what a proxy wrote: nothing further left can be believed
        if not _is_proxy(address, proxies):
            return str(address)
    return peer
