"""Whom the clients of the sandbox trust over https: the sandbox's certificate (SANDBOX_CA_BUNDLE), handed to
each client explicitly, never through the libraries' environment variables (HTTPLIB2_CA_CERTS, SSL_CERT_FILE,
REQUESTS_CA_BUNDLE), which reach every client of the process and, for httplib2, are read at import.

The file is written by the sandbox when it starts: until then a run that needs it says so, rather than fail
on an unreadable TLS error, and every command that does not need it works.
"""

from __future__ import annotations

import os

import requests


def certificate_missing(path: str, *, service: str) -> str | None:
    """What to tell the operator when `path` (a CA file `service` is told to trust) is not there; None when it is."""
    if not path or os.path.isfile(path):
        return None
    return (
        f"{service} trusts the sandbox's certificate {path}, which is not there yet: start the sandbox (it "
        "writes the file when it starts), or set SANDBOX_CA_BUNDLE to the file it writes."
    )


def trusting_session(ca_bundle: str) -> requests.Session:
    """A Session that trusts `ca_bundle` when it is set (the system's store otherwise), never `verify=False`.
    trust_env is turned off with it: a REQUESTS_CA_BUNDLE in the environment would override Session.verify."""
    session = requests.Session()
    if ca_bundle:
        session.trust_env = False
        session.verify = ca_bundle
    return session
