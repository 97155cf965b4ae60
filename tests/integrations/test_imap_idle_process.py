"""The Procfile's `imap-idle` process (`python -m config.imap_idle`), as a deployment runs it: it holds IDLE on an
IMAP mailbox's Inbox, rings for a run within seconds of new mail, says it is alive to `config.healthcheck
imap-idle`, and stops on SIGTERM at once, letting go of its connections."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from accounts.models import User
from extraction.models import ExtractionRun
from tests.conftest import ImapBox, run_extraction
from tests.mail import ask
from tests.processes import process_env
from tests.procfile import ROOT, procfile_commands
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # a process of its own


def test_the_imap_idle_process_rings_for_new_mail_and_stops_on_sigterm(imap: ImapBox, consenting_user: User) -> None:
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    command = procfile_commands()["imap-idle"].split()
    assert command[0] == "python"
    idle = subprocess.Popen(
        [sys.executable, *command[1:]], cwd=ROOT, env=process_env(IMAP_IDLE_REFRESH_SECONDS="1"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: any(
                session and session[-1].split()[1:2] == ["IDLE"] for session in imap.dovecot.sessions(imap.address)
            ),
            timeout=30,
            what="IDLE held on the Inbox",
        )
        health = subprocess.run(
            [sys.executable, "-m", "config.healthcheck", "imap-idle"], cwd=ROOT, env=process_env(),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert health.returncode == 0, health.stdout + health.stderr
        imap.deliver(ask(1))
        run = wait_for(
            lambda: ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.WEBHOOK).first(),
            timeout=10,
            what="a run asked for by the process's ring",
        )
        assert run is not None and run.user_id == consenting_user.pk
    finally:
        idle.send_signal(signal.SIGTERM)
        output, _ = idle.communicate(timeout=30)
    assert idle.returncode == 0, output
    assert "imap idle: stopped" in output
    sessions = imap.dovecot.sessions(imap.address)
    assert all(not session or session[-1].split()[1:2] == ["LOGOUT"] for session in sessions), sessions[-1:]
