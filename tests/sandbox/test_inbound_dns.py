"""The sandbox's DNS and DKIM signing, as the inbound mail checks will meet them: dnspython asks the sandbox's
UDP port and gets the records a test set, dkimpy verifies the sandbox's signatures against the key it
publishes there, and pyspf passes mail from an address the domain's SPF record names."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import dkim
import dns.resolver
import pytest
import spf

from sandbox.client import SandboxClient, SandboxControlError
from sandbox.server import SandboxServer

MESSAGE = (
    b"From: Ana Silva <ana@example.org>\r\n"
    b"To: inbox-7f3a@tasklift.test\r\n"
    b"Subject: The Q3 report\r\n"
    b"Date: Mon, 03 Mar 2025 09:00:00 +0000\r\n"
    b"Message-ID: <q3-report@example.org>\r\n"
    b"\r\n"
    b"Could you send me the Q3 report by Friday?\r\n"
)


@pytest.fixture
def resolver(sandbox_server: SandboxServer) -> dns.resolver.Resolver:
    """A resolver of the test's own that asks only the sandbox (the global one is left alone)."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = sandbox_server.port
    resolver.lifetime = 3
    return resolver


@pytest.fixture
def default_resolver(resolver: dns.resolver.Resolver) -> Iterator[None]:
    """dnspython's default resolver pointed at the sandbox, as Tasklift points it, for pyspf, which asks no other."""
    previous = dns.resolver.default_resolver
    dns.resolver.default_resolver = resolver
    try:
        yield
    finally:
        dns.resolver.default_resolver = previous


def _txt_lookup(resolver: dns.resolver.Resolver) -> Callable[..., bytes | None]:
    """dkimpy's dnsfunc, through `resolver`."""

    def lookup(name: bytes, timeout: float = 5) -> bytes | None:
        try:
            answer = resolver.resolve(name.decode(), "TXT", lifetime=timeout)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return None
        return b"".join(answer[0].strings)

    return lookup


def _texts(answer: dns.resolver.Answer) -> list[str]:
    return sorted(b"".join(record.strings).decode() for record in answer)


def test_dns_answers_the_records_set_through_the_client(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    sandbox.dns_set("Example.org.", "TXT", ["v=spf1 -all", "site-verification=abc"])
    sandbox.dns_set("mx.example.org", "A", ["192.0.2.10", "192.0.2.11"])
    sandbox.dns_set("mx.example.org", "AAAA", ["2001:db8::10"])
    sandbox.dns_set("example.org", "MX", ["10 mx.example.org", "20 backup.example.net"])

    assert _texts(resolver.resolve("example.org", "TXT")) == ["site-verification=abc", "v=spf1 -all"]
    assert sorted(record.address for record in resolver.resolve("mx.example.org", "A")) == ["192.0.2.10", "192.0.2.11"]
    assert [record.address for record in resolver.resolve("MX.example.org", "AAAA")] == ["2001:db8::10"]
    exchanges = sorted((r.preference, r.exchange.to_text()) for r in resolver.resolve("example.org", "MX"))
    assert exchanges == [(10, "mx.example.org."), (20, "backup.example.net.")]
    assert {"name": "example.org", "type": "MX", "values": ["10 mx.example.org", "20 backup.example.net"]} in (
        sandbox.dns_records()
    )


def test_dns_unknown_name_is_nxdomain_and_a_known_one_without_the_type_answers_empty(
    sandbox: SandboxClient, resolver: dns.resolver.Resolver
):
    sandbox.dns_set("_dmarc.example.org", "TXT", ["v=DMARC1; p=none"])

    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("nowhere.example.org", "TXT")
    with pytest.raises(dns.resolver.NoAnswer):
        resolver.resolve("_dmarc.example.org", "A")
    with pytest.raises(dns.resolver.NoAnswer):  # a name with records below it exists (RFC 8020)
        resolver.resolve("example.org", "TXT")


def test_dns_setting_no_values_removes_the_records(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    sandbox.dns_set("example.org", "A", ["192.0.2.1"])
    sandbox.dns_set("example.org", "A", [])

    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("example.org", "A")


def test_dns_long_txt_value_is_split_into_255_byte_strings(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    value = "v=DKIM1; k=rsa; p=" + "A" * 582  # 600 bytes

    sandbox.dns_set("long._domainkey.example.org", "TXT", [value])

    [record] = resolver.resolve("long._domainkey.example.org", "TXT")
    assert [len(part) for part in record.strings] == [255, 255, 90]
    assert b"".join(record.strings).decode() == value


def test_dns_reset_clears_the_records(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    sandbox.dns_set("example.org", "A", ["192.0.2.1"])

    sandbox.reset()

    assert sandbox.dns_records() == []
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("example.org", "A")


def test_dns_clear_removes_every_record(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    sandbox.mail_domain("example.org")

    sandbox.dns_clear()

    assert sandbox.dns_records() == []
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("_dmarc.example.org", "TXT")


@pytest.mark.parametrize(
    ("name", "rtype", "values", "field"),
    [
        ("example.org", "A", ["2001:db8::1"], "values"),
        ("example.org", "MX", ["mx.example.org"], "values"),
        ("exa mple.org", "TXT", ["x"], "name"),
        ("example.org", "CNAME", ["other.example.org"], "type"),
    ],
)
def test_dns_control_refuses_a_malformed_record_naming_the_field(
    sandbox: SandboxClient, name: str, rtype: str, values: list[str], field: str
):
    with pytest.raises(SandboxControlError) as refused:
        sandbox.dns_set(name, rtype, values)

    assert refused.value.status == 400
    assert '"invalid_field"' in refused.value.body and f'"{field}: ' in refused.value.body


def test_dkim_signature_verifies_against_the_key_the_sandbox_publishes(
    sandbox: SandboxClient, resolver: dns.resolver.Resolver
):
    signed = sandbox.dkim_sign(MESSAGE, "example.org")

    header = signed[: signed.index(b"From:")]
    assert header.startswith(b"DKIM-Signature:") and b"d=example.org" in header and b"s=sandbox" in header
    assert b"c=relaxed/relaxed" in header
    assert signed.endswith(MESSAGE)
    assert _texts(resolver.resolve("sandbox._domainkey.example.org", "TXT"))[0].startswith("v=DKIM1; k=rsa; p=")
    assert dkim.verify(signed, dnsfunc=_txt_lookup(resolver))


def test_dkim_signature_fails_once_the_body_is_changed(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    signed = sandbox.dkim_sign(MESSAGE, "example.org", selector="s2025")

    tampered = signed.replace(b"by Friday", b"by Monday")

    assert dkim.verify(signed, dnsfunc=_txt_lookup(resolver))
    assert not dkim.verify(tampered, dnsfunc=_txt_lookup(resolver))


def test_dkim_key_outlives_a_reset_and_is_published_again_when_used(
    sandbox: SandboxClient, resolver: dns.resolver.Resolver
):
    signed = sandbox.dkim_sign(MESSAGE, "example.org")

    sandbox.reset()
    unpublished = dkim.verify(signed, dnsfunc=_txt_lookup(resolver))
    sandbox.dkim_sign(b"From: ana@example.org\r\n\r\nhello\r\n", "example.org")

    assert not unpublished
    assert dkim.verify(signed, dnsfunc=_txt_lookup(resolver))


def test_dkim_signing_keeps_a_record_the_test_set(sandbox: SandboxClient, resolver: dns.resolver.Resolver):
    sandbox.dns_set("sandbox._domainkey.example.org", "TXT", ["v=DKIM1; k=rsa; p="])  # a revoked key

    signed = sandbox.dkim_sign(MESSAGE, "example.org")

    assert _texts(resolver.resolve("sandbox._domainkey.example.org", "TXT")) == ["v=DKIM1; k=rsa; p="]
    assert not dkim.verify(signed, dnsfunc=_txt_lookup(resolver))


def test_dkim_sign_refuses_what_is_not_base64(sandbox: SandboxClient):
    with pytest.raises(SandboxControlError) as refused:
        sandbox.call("POST", "/dkim/sign", json={"raw_base64": "not base64!", "domain": "example.org"})

    assert refused.value.status == 400 and '"raw_base64: ' in refused.value.body


@pytest.mark.usefixtures("default_resolver")
def test_spf_passes_for_an_address_the_domain_names_through_the_default_resolver(
    sandbox: SandboxClient, resolver: dns.resolver.Resolver
):
    sandbox.mail_domain("example.org")

    passed, _ = spf.check2(i="127.0.0.1", s="a@example.org", h="mx.example.org")
    failed, _ = spf.check2(i="192.0.2.99", s="a@example.org", h="mx.example.org")

    assert (passed, failed) == ("pass", "fail")
    assert _texts(resolver.resolve("_dmarc.example.org", "TXT")) == ["v=DMARC1; p=reject"]
