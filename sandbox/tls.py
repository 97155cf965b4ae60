"""A certificate for the sandbox's HTTPS listener, generated at start.

Microsoft identity must be HTTPS (MSAL refuses an http authority), so the sandbox serves it, and Graph, over
TLS. The certificate is self-signed for 127.0.0.1 and localhost and is its own trust anchor (CA:TRUE): the
app trusts exactly the PEM file written here (settings.SANDBOX_CA_BUNDLE) and never turns verification off.
The private key never touches the disk longer than it takes the ssl module to load it.

It lasts a day: a sandbox makes a new one when it starts (whatever the file held: missing, expired or not),
and, while it runs, when less than RENEW_BEFORE of it is left (checked as each connection comes in), each
time rewriting the file. Its clients read the file when they connect (requests, httplib2), or make their
client again when the file changes (extraction/llm.py gemini_client).
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=1)
CLOCK_SKEW = timedelta(minutes=5)
RENEW_BEFORE = timedelta(hours=6)


def certificate_generate(*, now: datetime | None = None) -> tuple[bytes, bytes]:
    """A fresh (certificate PEM, private key PEM) pair for 127.0.0.1 and localhost, valid from now."""
    now = now or datetime.now(UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tasklift sandbox"),
            x509.NameAttribute(NameOID.COMMON_NAME, "Tasklift sandbox (127.0.0.1)"),
        ]
    )
    public_key = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


class RenewingCertificate:
    """The certificate of a sandbox's https listener: new at start, renewed before it expires."""

    def __init__(self, cert_path: str | Path) -> None:
        self.path = Path(cert_path)
        self._lock = threading.Lock()
        self.context = self._renew()

    def _renew(self) -> ssl.SSLContext:
        made = datetime.now(UTC)
        self.context = tls_context(self.path, now=made)
        self.not_after = made + VALIDITY
        return self.context

    def current(self, *, now: datetime | None = None) -> ssl.SSLContext:
        """The context to serve a connection with now (`now`: a clock of the tests): a new certificate's once
        the old one is near its end."""
        with self._lock:
            if self.not_after - (now or datetime.now(UTC)) < RENEW_BEFORE:
                self._renew()
            return self.context


def tls_context(cert_path: str | Path, *, now: datetime | None = None) -> ssl.SSLContext:
    """A server SSL context with a new certificate, whose PEM is written (atomically) to `cert_path`."""
    cert_pem, key_pem = certificate_generate(now=now)
    path = Path(cert_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under a temporary name, then renamed: a client never reads half a certificate.
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as out:
        out.write(cert_pem)
    os.replace(out.name, path)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # load_cert_chain reads files only: certificate and key live in a private temporary file for that one
    # call (not read back from `cert_path`, which another sandbox on the same path may be rewriting).
    fd, chain_file = tempfile.mkstemp(prefix="tasklift-sandbox-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as chain_out:
            chain_out.write(cert_pem + key_pem)
        context.load_cert_chain(chain_file)
    finally:
        os.unlink(chain_file)
    return context
