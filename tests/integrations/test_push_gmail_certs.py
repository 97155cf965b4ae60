"""Google's signing certificates, as the Gmail doorbell keeps them: a push token naming a key we do not hold
(or no key at all) is refused like any other forgery, costs at most one fetch of the certificates per
GMAIL_PUSH_CERTS_REFRESH_SECONDS however many such pushes arrive (and however many web processes take them),
and a refresh that fails keeps the certificates we had.

The certificates are the sandbox's (GOOGLE_CERTS_URL); every fetch of them is in its request log.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from extraction.models import ExtractionRun
from sandbox.client import SandboxClient
from tests.conftest import GmailBox
from tests.integrations.test_push_gmail import envelope, good_claims, push
from tests.processes import ROOT, process_env

pytestmark = pytest.mark.django_db

UNKNOWN_KID = "f" * 40  # shaped like Google's key ids; never in the certificates


def cert_fetches(sandbox: SandboxClient) -> int:
    return sum(1 for r in sandbox.requests("pubsub") if r["path"] == "/oauth2/v1/certs")


def test_pushes_naming_an_unknown_key_or_none_are_refused_and_fetch_the_certificates_at_most_once(
    sandbox: SandboxClient,
    gmail: GmailBox,
    settings: Any,
    broker_queue: Callable[[], int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    client = Client(raise_request_exception=False)  # a 500 is an answer to count, not an error of the test
    claims = good_claims(settings)
    body = envelope(gmail.address, int(gmail.cursor) + 1)
    assert push(client, envelope(gmail.address, int(gmail.cursor)), sandbox.pubsub_token(claims)).status_code == 204
    sandbox.clear_requests()

    with django_capture_on_commit_callbacks(execute=True):
        kids = [f"{n:040x}" for n in range(21)]  # a new made-up kid each time: none is worth a fetch
        unknown = [push(client, body, sandbox.pubsub_token(claims, signer="stranger", kid=kid)) for kid in kids]
        missing = [push(client, body, sandbox.pubsub_token(claims, kid=None)) for _ in range(21)]

    assert [r.status_code for r in unknown + missing] == [403] * 42
    assert {r.json()["error"]["code"] for r in unknown + missing} == {"push_refused"}
    assert cert_fetches(sandbox) <= 1
    assert ExtractionRun.objects.count() == 0 and broker_queue() == 0
    # The certificates we had still check a genuine push, without fetching them again.
    with django_capture_on_commit_callbacks(execute=True):
        genuine = push(client, body, sandbox.pubsub_token(claims))
    assert genuine.status_code == 204 and ExtractionRun.objects.count() == 1
    assert cert_fetches(sandbox) <= 1


# Imports Tasklift once, then forks the web processes (as gunicorn does), which start checking together.
WEB_PROCESSES = """
import json, os, sys, traceback
import django

django.setup()
from integrations.push import PushRefused, pubsub_token_verify

tokens, count = json.loads(sys.argv[1]), int(sys.argv[2])
go_read, go_write = os.pipe()
children = []
for _ in range(count):
    out_read, out_write = os.pipe()
    if os.fork() == 0:
        os.read(go_read, 1)
        code, answers = 0, []
        try:
            for token in tokens:
                try:
                    pubsub_token_verify("Bearer " + token)
                    answers.append("accepted")
                except PushRefused as refused:
                    answers.append(refused.status)
        except BaseException:
            traceback.print_exc()
            code, answers = 1, None
        os.write(out_write, json.dumps(answers).encode())
        os._exit(code)
    os.close(out_write)
    children.append(out_read)
os.write(go_write, b"g" * count)
answers = []
for out_read in children:
    with os.fdopen(out_read, "rb") as out:
        answers.append(json.loads(out.read() or b"null"))
print(json.dumps(answers))
"""


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_web_processes_taking_unknown_keys_at_once_share_one_certificate_fetch(
    sandbox: SandboxClient, settings: Any
) -> None:
    """Three web processes, each checking five tokens under an unknown kid at the same moment, on a cache
    that holds no certificates yet: one fetch between them, not one each."""
    claims = good_claims(settings)
    tokens = json.dumps([sandbox.pubsub_token(claims, signer="stranger", kid=UNKNOWN_KID) for _ in range(5)])

    done = subprocess.run(
        [sys.executable, "-c", WEB_PROCESSES, tokens, "3"],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == [[403] * 5] * 3, done.stderr[-3000:]
    assert cert_fetches(sandbox) == 1


BAD_REFRESHES: dict[str, dict[str, Any]] = {
    "Google answers 500": {"status": 500},
    "not JSON": {"status": 200, "body": "<html>gateway error</html>"},
    "an empty map": {"status": 200, "body": {}},
    "not a certificate": {"status": 200, "body": {UNKNOWN_KID: "not a certificate"}},
    "a JWKS instead": {"status": 200, "body": {"keys": [{"kid": UNKNOWN_KID, "kty": "RSA", "n": "x", "e": "AQAB"}]}},
}


@pytest.mark.parametrize("case", list(BAD_REFRESHES))
def test_a_refresh_that_fails_keeps_the_certificates_we_had(
    case: str,
    sandbox: SandboxClient,
    gmail: GmailBox,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.GMAIL_PUSH_CERTS_REFRESH_SECONDS = 1
    client = Client(raise_request_exception=False)
    claims = good_claims(settings)
    assert push(client, envelope(gmail.address, int(gmail.cursor)), sandbox.pubsub_token(claims)).status_code == 204
    sandbox.fault("pubsub", route="/oauth2/v1/certs", **BAD_REFRESHES[case])
    time.sleep(1.1)  # past the refresh interval: an unknown kid may refresh again

    with caplog.at_level(logging.WARNING, logger="integrations.push"):
        unknown = push(client, envelope(gmail.address, 1), sandbox.pubsub_token(claims, signer="stranger", kid="k2"))
    assert unknown.status_code == 403
    assert cert_fetches(sandbox) == 2  # the first, and the refresh that failed
    assert any("keeping the certificates" in r.getMessage() for r in caplog.records), caplog.text

    with django_capture_on_commit_callbacks(execute=True):
        genuine = push(client, envelope(gmail.address, int(gmail.cursor) + 1), sandbox.pubsub_token(claims))
    assert genuine.status_code == 204 and ExtractionRun.objects.count() == 1
