"""Whether a message really comes from the address in its From header: DMARC alignment (RFC 7489 §3.1).

The From domain is aligned when a DKIM signature that verifies (dkimpy) was made by it, or SPF passes (pyspf) for
an envelope sender of it; relaxed alignment (the same organisational domain, by the public suffix list) unless
the domain's DMARC record asks for strict (`adkim=s`, `aspf=s`). Aligned or not is decided whatever policy the
domain publishes (p=none too): a forward-to address takes only mail its person provably sent.

Every lookup goes through dnspython's default resolver, which INBOUND_DNS_SERVER points at a server of the
operator's choice (the sandbox's in tests); a DNS failure is temporary (`temporary`: 451, the sender retries).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from email import message_from_bytes
from email.policy import compat32
from email.utils import getaddresses
from functools import cache

import dkim
import dns.exception
import dns.resolver
import spf
from django.conf import settings
from publicsuffixlist import PublicSuffixList

logger = logging.getLogger(__name__)

DNS_TIMEOUT_S = 5.0
MAX_SIGNATURES = 5  # DKIM signatures verified per message at most (each costs a DNS lookup and an RSA check)

_configured: str | None = None
_configure_lock = threading.Lock()


@dataclass(frozen=True)
class Verdict:
    aligned: bool
    temporary: bool = False  # a DNS lookup failed: nothing is known, the sender should try again
    dkim_domains: tuple[str, ...] = ()  # domains of the DKIM signatures that verified
    spf: str = ""  # SPF's result for the envelope sender: pass, fail, softfail, neutral, none, permerror, temperror


def resolver_configure() -> None:
    """Point dnspython's default resolver (which dkimpy and pyspf ask) at INBOUND_DNS_SERVER, once per value."""
    global _configured
    wanted = settings.INBOUND_DNS_SERVER
    if wanted == _configured:
        return
    with _configure_lock:
        if wanted:
            host, _, port = wanted.rpartition(":")
            resolver = dns.resolver.Resolver(configure=False)
            resolver.nameservers = [host or "127.0.0.1"]
            resolver.port = int(port)
        else:
            resolver = dns.resolver.Resolver()
        resolver.lifetime = DNS_TIMEOUT_S
        dns.resolver.default_resolver = resolver
        _configured = wanted


@cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()


def organisational_domain(domain: str) -> str:
    """The registrable domain (`mail.example.co.uk` → `example.co.uk`); the domain itself when unknown."""
    domain = domain.lower().rstrip(".")
    return _suffixes().privatesuffix(domain) or domain


def _aligned(domain: str, from_domain: str, mode: str) -> bool:
    domain = domain.lower().rstrip(".")
    if mode == "s":
        return domain == from_domain
    return organisational_domain(domain) == organisational_domain(from_domain)


def from_address(raw: bytes) -> str:
    """The From header's address when there is exactly one From header naming exactly one address, else ""."""
    message = message_from_bytes(raw[:200_000], policy=compat32)  # the headers are at the start
    values = message.get_all("From") or []
    if len(values) != 1:
        return ""
    addresses = [address for _, address in getaddresses([str(values[0])]) if address]
    if len(addresses) != 1 or "@" not in addresses[0]:
        return ""
    return addresses[0].strip().lower()


def _dmarc_modes(from_domain: str) -> tuple[str, str]:
    """`adkim` and `aspf` of the domain's DMARC record (or its organisational domain's); relaxed by default."""
    for name in dict.fromkeys([from_domain, organisational_domain(from_domain)]):
        try:
            answer = dns.resolver.resolve(f"_dmarc.{name}", "TXT", raise_on_no_answer=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            continue
        for record in answer.rrset or []:
            text = b"".join(record.strings).decode("ascii", "replace")
            if not text.lower().startswith("v=dmarc1"):
                continue
            tags = dict(
                (key.strip().lower(), value.strip().lower())
                for key, _, value in (part.partition("=") for part in text.split(";"))
            )
            return tags.get("adkim", "r")[:1], tags.get("aspf", "r")[:1]
    return "r", "r"


def _dkim_domains(raw: bytes) -> tuple[str, ...]:
    """The domains of the message's DKIM signatures that verify. Raises dkim.DnsTimeoutError on a DNS failure."""
    message = message_from_bytes(raw[:200_000], policy=compat32)
    count = min(len(message.get_all("DKIM-Signature") or []), MAX_SIGNATURES)
    verified: list[str] = []
    checker = dkim.DKIM(raw)
    for index in range(count):
        try:
            if checker.verify(idx=index):
                verified.append(checker.domain.decode("ascii", "replace").lower())
        except dkim.DnsTimeoutError:
            raise
        except dkim.DKIMException as error:
            logger.info("inbound dkim signature %d refused: %s", index, type(error).__name__)
    return tuple(verified)


def sender_check(raw: bytes, *, address: str, client_ip: str, helo: str, mail_from: str) -> Verdict:
    """Whether `raw`, whose From is `address` (`from_address`), received from `client_ip` (which said `helo`, and
    gave `mail_from` as its envelope sender), aligns with its From domain."""
    resolver_configure()
    from_domain = address.rpartition("@")[2].rstrip(".")
    try:
        adkim, aspf = _dmarc_modes(from_domain)
        domains = _dkim_domains(raw)
        if any(_aligned(domain, from_domain, adkim) for domain in domains):
            return Verdict(aligned=True, dkim_domains=domains)
        envelope = mail_from or f"postmaster@{helo}"
        result, _ = spf.check2(i=client_ip, s=envelope, h=helo or "unknown", timeout=DNS_TIMEOUT_S)
    except (dkim.DnsTimeoutError, dns.exception.DNSException) as error:
        logger.warning("inbound sender check: DNS failed (%s)", type(error).__name__)
        return Verdict(aligned=False, temporary=True)
    if result == "temperror":
        return Verdict(aligned=False, temporary=True, dkim_domains=domains, spf=result)
    aligned = result == "pass" and _aligned(envelope.rpartition("@")[2], from_domain, aspf)
    return Verdict(aligned=aligned, dkim_domains=domains, spf=result)
