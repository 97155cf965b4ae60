"""A demo deployment on the sandbox served over https (docs/deploy.md): every client trusts the sandbox's
certificate, the one file SANDBOX_CA_BUNDLE names; a certificate not written yet crashes no command and makes
a run say what is missing; the sandbox's certificate, a day long, is new at each start and renewed in time."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from cryptography import x509
from django.conf import settings as django_settings

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.server import SandboxServer
from sandbox.tls import certificate_generate
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask
from tests.processes import ROOT

pytestmark = pytest.mark.django_db


def not_after(path: Path) -> datetime:
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc


def over_tls(settings: Any, sandbox_server: SandboxServer, ca_bundle: str) -> None:
    """Gmail, Google's token endpoint and Gemini reached at the sandbox's https listener, as in a demo."""
    tls = sandbox_server.tls_url
    settings.GMAIL_API_ENDPOINT = tls
    settings.GMAIL_BATCH_URI = f"{tls}/batch/gmail/v1"
    settings.GOOGLE_TOKEN_URI = f"{tls}/google/token"
    settings.GEMINI_BASE_URL = f"{tls}/"
    settings.GOOGLE_CA_BUNDLE = settings.GEMINI_CA_BUNDLE = ca_bundle


def test_a_run_reads_gmail_and_calls_gemini_over_https_trusting_the_sandboxs_certificate(
    gmail: GmailBox, sandbox_server: SandboxServer, consenting_user: User, settings: Any
) -> None:
    over_tls(settings, sandbox_server, django_settings.MICROSOFT_CA_BUNDLE)
    gmail.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert Task.objects.filter(user=consenting_user).count() == 1


def test_a_run_says_the_sandboxs_certificate_is_missing(
    gmail: GmailBox, sandbox_server: SandboxServer, consenting_user: User, settings: Any, tmp_path: Path
) -> None:
    over_tls(settings, sandbox_server, str(tmp_path / "not-written-yet.pem"))
    gmail.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.FAILED
    assert "trusts the sandbox's certificate" in run.error_message and "start the sandbox" in run.error_message


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_a_command_runs_while_httplib2_ca_certs_names_a_file_not_written_yet(tmp_path: Path) -> None:
    env = {**os.environ, "HTTPLIB2_CA_CERTS": str(tmp_path / "tls-cert.pem")}
    script = "import django; django.setup(); import httplib2; from integrations.providers import gmail; print('ok')"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


def test_a_running_worker_trusts_the_certificate_a_restarted_sandbox_wrote(
    gmail: GmailBox, consenting_user: User, settings: Any, tmp_path: Path
) -> None:
    path = tmp_path / "tls-cert.pem"
    gemini = SandboxServer(tls_port=0, cert_path=path).start()
    port = urlsplit(gemini.tls_url).port
    settings.GEMINI_BASE_URL, settings.GEMINI_CA_BUNDLE = f"{gemini.tls_url}/", str(path)
    try:
        gmail.deliver(ask(1))
        assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
        gemini.stop()
        gemini = SandboxServer(tls_port=port, cert_path=path).start()  # a new certificate in the same file
        gmail.deliver(ask(2))

        run = run_extraction(consenting_user)

        assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
        assert Task.objects.filter(user=consenting_user).count() == 2
    finally:
        gemini.stop()


def test_the_sandbox_replaces_an_expired_certificate_when_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "tls-cert.pem"
    expired, _ = certificate_generate(now=datetime.now(UTC) - timedelta(days=3))
    path.write_bytes(expired)

    server = SandboxServer(tls_port=0, cert_path=path).start()
    try:
        assert not_after(path) > datetime.now(UTC) + timedelta(hours=23)
        assert requests.get(f"{server.tls_url}/_sandbox/requests", verify=str(path), timeout=10).ok
    finally:
        server.stop()


def test_a_running_sandbox_renews_its_certificate_before_it_expires(tmp_path: Path) -> None:
    path = tmp_path / "tls-cert.pem"
    server = SandboxServer(tls_port=0, cert_path=path).start()
    try:
        first = path.read_bytes()
        certificate = server._tls_server.certificate  # type: ignore[union-attr]
        certificate.current(now=datetime.now(UTC) + timedelta(hours=12))
        assert path.read_bytes() == first  # half a day left: kept
        certificate.current(now=datetime.now(UTC) + timedelta(hours=20))  # four hours left: renewed

        assert path.read_bytes() != first and not_after(path) > datetime.now(UTC) + timedelta(hours=23)
        # A client reading the current file trusts what the listener now serves.
        assert requests.get(f"{server.tls_url}/_sandbox/requests", verify=str(path), timeout=10).ok
    finally:
        server.stop()


def test_an_outlook_run_says_the_sandboxs_certificate_is_missing(
    outlook: Any, consenting_user: User, settings: Any, tmp_path: Path
) -> None:
    settings.MICROSOFT_CA_BUNDLE = str(tmp_path / "not-written-yet.pem")
    outlook.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.FAILED
    assert "trusts the sandbox's certificate" in run.error_message and "start the sandbox" in run.error_message
