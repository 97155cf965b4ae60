"""A DNS server for the inbound mail checks (DKIM, SPF, DMARC), and DKIM signing for a domain whose key it
publishes: what a test needs to send Tasklift mail that passes, or fails, as mail from the world would.

It answers over UDP on the sandbox's own port number (TCP there is HTTP), from the records a test sets through
the control API: TXT, A, AAAA and MX. A name that holds no records, and has none below it, is NXDOMAIN; a known
name without the type asked (or a name with records only below it, as `example.org` beside
`_dmarc.example.org`) is an empty NOERROR answer. A TXT value is sent as strings of at most 255 bytes, as DKIM
keys are published. Every answer has TTL 0, so no resolver carries one test's records into the next. Answers
are never truncated, since there is no DNS over TCP here to fall back to; a 1024-bit DKIM key keeps its answer
under the 512 bytes of plain UDP DNS. dnspython reads and writes the wire format here (dnslib is a dev dependency
only, and a demo deployment, installed without the dev group, runs the sandbox too).

`POST /_sandbox/dkim/sign` signs with a key the sandbox makes for each (domain, selector) on first use: RSA
1024, published as `v=DKIM1; k=rsa; p=...` at `<selector>._domainkey.<domain>` unless a test has put TXT
records there itself (a revoked key, `p=`, say). Keys outlive a reset, as the Pub/Sub key does; their records,
cleared with the rest, are published again when the key is next used.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
import re
import socket
import socketserver
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import dkim
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from dns.rdtypes.ANY.TXT import TXT
from flask import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.state import SandboxState

TXT_STRING_MAX = 255  # RFC 1035 §3.3: a character-string is one length byte and its bytes
DKIM_KEY_BITS = 1024  # a larger key's TXT answer outgrows 512 bytes
DKIM_SIGNED_HEADERS = [b"from", b"to", b"subject", b"date", b"message-id"]
_STORE = "dns"  # name -> {type -> [values]}
_KEYS = "dkim_keys"  # in what outlives a reset: (domain, selector) -> DkimKey
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")  # underscores for _dmarc, _domainkey

logger = logging.getLogger("sandbox.dns")


# Records ---------------------------------------------------------------------------------------------
def _zone(state: SandboxState) -> dict[str, dict[str, list[str]]]:
    zone: dict[str, dict[str, list[str]]] = state.data.setdefault(_STORE, {})
    return zone


def name_normalize(name: str) -> str:
    """A domain name as the sandbox keys it: lower case, without the root's dot. ValueError if it is none."""
    labels = name.strip().lower().removesuffix(".").split(".")
    if len(".".join(labels)) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError("must be a domain name: dot-separated labels of letters, digits, '-' and '_'")
    return ".".join(labels)


def record_value_normalize(rtype: str, value: str) -> str:
    """A record's value in the form the sandbox stores (MX: "preference exchange"). ValueError if it is none."""
    try:
        if rtype == "A":
            return str(ipaddress.IPv4Address(value.strip()))
        if rtype == "AAAA":
            return str(ipaddress.IPv6Address(value.strip()))
    except ipaddress.AddressValueError as exc:
        example = "an IPv4 address, e.g. 192.0.2.1" if rtype == "A" else "an IPv6 address, e.g. 2001:db8::1"
        raise ValueError(f"an {rtype} value is {example}") from exc
    if rtype == "MX":
        preference, _, exchange = value.strip().partition(" ")
        if not preference.isdigit() or int(preference) > 65535:
            raise ValueError("an MX value is 'preference exchange', e.g. '10 mx.example.org'")
        return f"{int(preference)} {'.' if exchange.strip() == '.' else name_normalize(exchange)}"  # '.': RFC 7505
    return value


def dns_records_set(state: SandboxState, *, name: str, rtype: str, values: list[str]) -> None:
    """Replace the records of one name and type; no values removes them (and the name, if it holds no more)."""
    with state.lock:
        zone = _zone(state)
        if values:
            zone.setdefault(name, {})[rtype] = list(values)
        elif name in zone:
            zone[name].pop(rtype, None)
            if not zone[name]:
                del zone[name]


def dns_records_list(state: SandboxState) -> list[dict[str, Any]]:
    with state.lock:
        return [
            {"name": name, "type": rtype, "values": list(values)}
            for name, types in sorted(_zone(state).items())
            for rtype, values in types.items()
        ]


def dns_records_clear(state: SandboxState) -> None:
    with state.lock:
        _zone(state).clear()


# The server ------------------------------------------------------------------------------------------
def _rdata(rtype: str, value: str) -> dns.rdata.Rdata:
    if rtype == "TXT":
        data = value.encode()
        strings = [data[i : i + TXT_STRING_MAX] for i in range(0, len(data), TXT_STRING_MAX)] or [b""]
        return TXT(dns.rdataclass.IN, dns.rdatatype.TXT, strings)
    return dns.rdata.from_text(
        dns.rdataclass.IN, dns.rdatatype.from_text(rtype), value, origin=dns.name.root, relativize=False
    )


def dns_answer(state: SandboxState, query: dns.message.Message) -> dns.message.Message:
    """The sandbox's answer to one query, from the records of `state`."""
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA
    if query.opcode() != dns.opcode.QUERY or len(query.question) != 1:
        response.set_rcode(dns.rcode.NOTIMP if query.opcode() != dns.opcode.QUERY else dns.rcode.FORMERR)
        return response
    question = query.question[0]
    if question.rdclass != dns.rdataclass.IN:
        response.set_rcode(dns.rcode.REFUSED)
        return response
    try:
        name = name_normalize(question.name.to_text())
    except ValueError:
        name = ""  # no record has such a name
    with state.lock:
        zone = _zone(state)
        known = bool(name) and (name in zone or any(other.endswith(f".{name}") for other in zone))
        types = dict(zone.get(name, {}))
    if not known:
        response.set_rcode(dns.rcode.NXDOMAIN)
        return response
    for rtype, values in types.items():
        if question.rdtype in (dns.rdatatype.from_text(rtype), dns.rdatatype.ANY):
            rdatas = [_rdata(rtype, value) for value in values]
            response.answer.append(dns.rrset.from_rdata_list(question.name, 0, rdatas))
    return response


class _Handler(socketserver.BaseRequestHandler):
    server: _UDPServer

    def handle(self) -> None:
        data, sock = self.request
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException:
            logger.debug("dropped a datagram that is no DNS query from %s", self.client_address)
            return
        try:
            wire = dns_answer(self.server.state, query).to_wire()
        except Exception:  # a bug here: SERVFAIL, as a server says so, rather than a client left to time out
            logger.exception("no answer to %s", query.question)
            response = dns.message.make_response(query)
            response.set_rcode(dns.rcode.SERVFAIL)
            wire = response.to_wire()
        sock.sendto(wire, self.client_address)


class _UDPServer(socketserver.ThreadingMixIn, socketserver.UDPServer):
    # allow_reuse_address stays off (dnslib's server turns it on): with SO_REUSEADDR, Linux lets a second socket
    # bind the same UDP port, and two sandboxes would answer each other's questions; here the second bind fails.
    daemon_threads = True

    def __init__(self, state: SandboxState, address: tuple[str, int]) -> None:
        self.state = state
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        # The sandbox stops its listeners one after another, each waiting out its poll: this one adds little.
        super().serve_forever(poll_interval)


def dns_listener(state: SandboxState, host: str, port: int) -> socketserver.UDPServer:
    """The DNS server bound to UDP `host:port` (OSError if that is taken); serve it with serve_forever()."""
    return _UDPServer(state, (host, port))


# DKIM ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DkimKey:
    private_pem: bytes  # PKCS#1, as dkim.sign takes it
    record: str  # the TXT value: v=DKIM1; k=rsa; p=<SubjectPublicKeyInfo, base64>


def _dkim_key_generate() -> DkimKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=DKIM_KEY_BITS)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public_der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return DkimKey(private_pem, f"v=DKIM1; k=rsa; p={base64.b64encode(public_der).decode()}")


def dkim_key_publish(state: SandboxState, *, domain: str, selector: str) -> DkimKey:
    """The key of (domain, selector), made on first use, and its record published unless the name holds TXT."""
    with state.lock:
        keys: dict[tuple[str, str], DkimKey] = state.keep.setdefault(_KEYS, {})
        key = keys.get((domain, selector))
        if key is None:
            key = keys[(domain, selector)] = _dkim_key_generate()
        name = f"{selector}._domainkey.{domain}"
        if "TXT" not in _zone(state).get(name, {}):
            dns_records_set(state, name=name, rtype="TXT", values=[key.record])
        return key


def dkim_message_sign(state: SandboxState, *, raw: bytes, domain: str, selector: str) -> bytes:
    """`raw` with a DKIM-Signature (relaxed/relaxed) by the key of (domain, selector) on top."""
    key = dkim_key_publish(state, domain=domain, selector=selector)
    linesep = b"\r\n" if b"\r\n" in raw else b"\n"  # the signature folded as the message's own lines are
    signature: bytes = dkim.sign(
        raw,
        selector.encode(),
        domain.encode(),
        key.private_pem,
        canonicalize=(b"relaxed", b"relaxed"),
        include_headers=DKIM_SIGNED_HEADERS,
        linesep=linesep,
    )
    return signature + raw


# Control routes --------------------------------------------------------------------------------------
class RecordsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=254)
    type: Literal["TXT", "A", "AAAA", "MX"]
    values: list[Annotated[str, Field(max_length=4096)]] = Field(max_length=50)

    @field_validator("name")
    @classmethod
    def domain_name(cls, name: str) -> str:
        return name_normalize(name)

    @field_validator("type", mode="before")
    @classmethod
    def upper_case(cls, rtype: Any) -> Any:
        return rtype.upper() if isinstance(rtype, str) else rtype

    @field_validator("values")
    @classmethod
    def values_of_type(cls, values: list[str], info: ValidationInfo) -> list[str]:
        rtype = info.data.get("type")
        if rtype is None:  # refused already
            return values
        normalized = []
        for index, value in enumerate(values):
            try:
                normalized.append(record_value_normalize(rtype, value))
            except ValueError as exc:
                raise ValueError(f"item {index} ({value!r}): {exc}") from exc
        return normalized


class DkimSignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    raw_base64: str = Field(min_length=1)
    domain: str = Field(min_length=1, max_length=254)
    selector: str = Field(default="sandbox", min_length=1, max_length=254)

    @field_validator("domain", "selector")
    @classmethod
    def domain_name(cls, name: str) -> str:
        return name_normalize(name)


@control_route("/dns/records", methods=["PUT"])
def control_records_set() -> Response:
    spec = parse_body(RecordsIn)
    dns_records_set(sandbox_state(), name=spec.name, rtype=spec.type, values=spec.values)
    return json_response({"name": spec.name, "type": spec.type, "values": spec.values})


@control_route("/dns/records", methods=["GET"])
def control_records_list() -> Response:
    return json_response({"records": dns_records_list(sandbox_state())})


@control_route("/dns/records", methods=["DELETE"])
def control_records_clear() -> Response:
    dns_records_clear(sandbox_state())
    return json_response({"ok": True})


@control_route("/dkim/sign", methods=["POST"])
def control_dkim_sign() -> Response:
    spec = parse_body(DkimSignIn)
    try:
        raw = base64.b64decode(spec.raw_base64, validate=True)
    except binascii.Error as exc:
        raise ControlError("invalid_field", "raw_base64: not valid base64") from exc
    try:
        signed = dkim_message_sign(sandbox_state(), raw=raw, domain=spec.domain, selector=spec.selector)
    except dkim.DKIMException as exc:
        raise ControlError("invalid_field", f"raw_base64: the message cannot be signed ({exc})") from exc
    return json_response(
        {
            "raw_base64": base64.b64encode(signed).decode(),
            "domain": spec.domain,
            "selector": spec.selector,
            "record": f"{spec.selector}._domainkey.{spec.domain}",
        }
    )
