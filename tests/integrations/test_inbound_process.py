"""The Procfile's `inbound` process (`python -m config.inbound`), as a deployment runs it: killed (kill -9) between
receiving a forwarded message and answering 250, it loses nothing and stores nothing twice once the sender's
server sends the message again; it says it is alive to `config.healthcheck inbound`, and stops on SIGTERM."""

from __future__ import annotations

import signal
import smtplib
import subprocess
import sys

import pytest

from accounts.models import User
from config.ports import free_port
from extraction.models import ExtractionRun
from integrations.inbound.addresses import forward_address
from integrations.models import InboundMessage
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import run_extraction
from tests.forwards import gmail_forward, smtp_send
from tests.processes import process_env
from tests.procfile import ROOT, procfile_commands
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # a process of its own


def _inbound(port: int, **env: str) -> subprocess.Popen[str]:
    command = procfile_commands()["inbound"].split()
    assert command[0] == "python"
    process = subprocess.Popen(
        [sys.executable, *command[1:]], cwd=ROOT,
        env=process_env(INBOUND_SMTP_HOST="127.0.0.1", INBOUND_SMTP_PORT=str(port), **env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def greets() -> bool:
        try:
            with smtplib.SMTP("127.0.0.1", port, timeout=5) as client:
                return client.noop()[0] == 250
        except OSError:
            return False

    wait_for(greets, timeout=60, what="the inbound process greeting")
    return process


@pytest.mark.parametrize("point", ["inbound_received", "inbound_stored_tx", "inbound_committed"])
def test_an_inbound_process_killed_before_its_250_loses_nothing_and_stores_nothing_twice(
    point: str, sandbox: SandboxClient, consenting_user: User
) -> None:
    sandbox.mail_domain("example.com")
    address = forward_address(user=consenting_user).account_address
    person = consenting_user.email
    raw = sandbox.dkim_sign(gmail_forward(person, "Could you send the signed contract by Friday?"), "example.com")
    port = free_port()
    dying = _inbound(port, EXTRACTION_CRASH_POINT=point)
    with pytest.raises(smtplib.SMTPServerDisconnected):  # no 250: the sender keeps the message and retries
        smtp_send(port, mail_from=person, to=address, raw=raw)
    dying.communicate(timeout=30)
    assert dying.returncode == -signal.SIGKILL
    assert InboundMessage.objects.count() == (1 if point == "inbound_committed" else 0)

    again = _inbound(port)
    try:
        assert smtp_send(port, mail_from=person, to=address, raw=raw) == (250, "")  # the sender's retry
    finally:
        again.send_signal(signal.SIGTERM)
        output, _ = again.communicate(timeout=60)
    assert again.returncode == 0, output
    assert "inbound: stopped" in output
    assert InboundMessage.objects.count() == 1
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED and run.tasks_created == 1
    assert Task.objects.filter(user=consenting_user).count() == 1
    assert InboundMessage.objects.count() == 0


def test_the_inbound_process_is_healthy_while_it_greets(sandbox: SandboxClient) -> None:
    port = free_port()
    process = _inbound(port)
    try:
        health = subprocess.run(
            [sys.executable, "-m", "config.healthcheck", "inbound"], cwd=ROOT,
            env=process_env(INBOUND_SMTP_PORT=str(port)), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert health.returncode == 0, health.stdout + health.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    stopped = subprocess.run(
        [sys.executable, "-m", "config.healthcheck", "inbound"], cwd=ROOT,
        env=process_env(INBOUND_SMTP_PORT=str(port)), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stopped.returncode == 1 and "did not greet" in stopped.stdout
