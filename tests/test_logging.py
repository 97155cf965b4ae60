"""What Tasklift logs: one JSON object a line in production, naming the run, the person and the mailbox by
id, and never an OAuth callback's code or state, an address or a token."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from accounts.models import User
from config.ports import free_port
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request
from integrations.models import Integration
from integrations.services import integration_credentials
from sandbox.client import SandboxClient
from tests.conftest import GmailBox
from tests.mail import ask
from tests.processes import ROOT, process_env
from tests.waiting import wait_for


@pytest.mark.parametrize("logger_name", ["django.server", "django.request", "integrations"])
def test_a_callback_url_is_logged_without_its_code_and_state(logger_name: str) -> None:
    logger = logging.getLogger(logger_name)
    handlers = [h for source in (logger, logging.getLogger()) for h in source.handlers]
    handler = next(h for h in handlers if h.filters)  # the configured console handler, with its filters
    assert logger_name != "django.server" or handler in logger.handlers  # the access log goes through it
    record = logging.LogRecord(
        logger_name,
        logging.WARNING,
        __file__,
        1,
        '"GET /integrations/google/callback?state=%s&code=%s&scope=x HTTP/1.1" 302',
        ("st4te-S3CRET", "4/0AbC-auth-c0de"),
        None,
    )

    assert handler.filter(record)
    logged = handler.format(record)

    assert "S3CRET" not in logged and "auth-c0de" not in logged
    assert "state=[redacted]&code=[redacted]&scope=x" in logged


# LOG_FORMAT=json: one object a line, with the ids of the run in progress --------------------------------


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of a process's log, each of which must be a JSON object."""
    lines = [line for line in text.splitlines() if line.strip()]
    not_json = [line for line in lines if not line.startswith("{")]
    assert not not_json, not_json[:20]
    return [json.loads(line) for line in lines]


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)
def test_a_workers_json_lines_carry_the_run_person_and_mailbox_but_no_address_or_secret(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, tmp_path: Path
) -> None:
    """A real worker (the Procfile's command) reads a mailbox: its lines, Celery's own among them, are JSON;
    those of the run, from the threads that fetch and call Gemini too, name the run, the person and the
    mailbox by id; none holds the person's or the mailbox's address, or a token."""
    gmail.deliver(ask(1))
    sandbox.expire_token(address=gmail.address)  # forces a refresh: new tokens travel during the run
    run, _ = extraction_run_request(user=consenting_user, trigger=ExtractionRun.Trigger.MANUAL)
    log = tmp_path / "worker.log"
    with log.open("wb") as stderr:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO"],
            cwd=ROOT,
            env=process_env(LOG_FORMAT="json", LOG_LEVEL="DEBUG", CELERY_WORKER_CONCURRENCY="1"),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 90
        while not ExtractionRun.objects.get(pk=run.pk).is_finished:
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
    finally:
        stop(worker)
    run.refresh_from_db()
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message

    lines = json_lines(log.read_text())
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    ours = [line for line in lines if line.get("run_id") == run.pk]
    assert ours and all(line["user_id"] == consenting_user.pk for line in ours)
    [answered] = [line for line in ours if line["message"] == "gemini answered"]  # a Gemini call's thread
    assert answered["emails"] == 1 and answered["task_id"]  # with its extras, and Celery's job id
    fetched = [line for line in ours if line["logger"] == "integrations.providers.gmail"]  # the fetch thread
    assert fetched and all(line["integration_id"] == gmail.integration.pk for line in fetched)
    assert any(line["logger"].startswith("celery.") for line in lines)  # Celery's own lines, as JSON too
    text = log.read_text()
    integration = Integration.objects.get(pk=gmail.integration.pk)
    tokens = integration_credentials(integration=integration)
    secrets = (tokens["token"], tokens["refresh_token"], integration.credentials_encrypted)
    for secret in (consenting_user.email, gmail.address, *secrets):
        assert secret not in text


@contextlib.contextmanager
def gunicorn_web(log: Path) -> Iterator[str]:
    """gunicorn as the Procfile starts it (one process, JSON lines to `log`), answering /healthz, until the block
    ends; its base URL."""
    port = free_port()
    with log.open("wb") as stderr:
        web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "gunicorn.conf.py"],
            cwd=ROOT,
            env=process_env(LOG_FORMAT="json", PORT=str(port), WEB_CONCURRENCY="1"),
            stdout=stderr,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert web.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                # the socket is open while the worker still imports the app
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=60)
                break
            except requests.ConnectionError:
                time.sleep(0.3)
        base_url = f"http://127.0.0.1:{port}"
        yield base_url
        # An access line is written just after its answer is sent, and the one worker answers in turn: once the
        # line of one more request is written, so is every line before it.
        written = log.read_text().count("GET /healthz ")
        requests.get(f"{base_url}/healthz", timeout=30)
        wait_for(
            lambda: log.read_text().count("GET /healthz ") > written,
            timeout=30,
            what="the access line of a last /healthz",
            detail=lambda: log.read_text()[-3000:],
        )
    finally:
        stop(web)


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_gunicorns_access_log_is_json_without_an_oauth_callbacks_code_and_state(tmp_path: Path) -> None:
    """gunicorn as the Procfile starts it: the access line of an OAuth callback is JSON and keeps neither its
    authorization code nor its state."""
    log = tmp_path / "web.log"
    with gunicorn_web(log) as base_url:
        answer = requests.get(
            f"{base_url}/integrations/google/callback?state=st4te-S3CRET&code=4/0AbC-auth-c0de",
            allow_redirects=False,
            timeout=30,
        )
        assert answer.status_code in (302, 400)

    lines = json_lines(log.read_text())
    [access] = [line for line in lines if line["logger"] == "gunicorn.access" and "callback" in line["message"]]
    assert "GET /integrations/google/callback?state=[redacted]&code=[redacted] HTTP/1.1" in access["message"]
    assert "S3CRET" not in log.read_text() and "auth-c0de" not in log.read_text()
    assert any(line["logger"] == "gunicorn.error" and "Booting worker" in line["message"] for line in lines)


def test_an_exceptions_text_is_in_the_json_line_and_redacted() -> None:
    from config.logformat import JsonFormatter

    try:
        raise ValueError("callback https://x.example/cb?code=4/0AbC-auth-c0de failed")
    except ValueError:
        record = logging.LogRecord("integrations", logging.ERROR, __file__, 1, "it failed", (), sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "it failed" and line["level"] == "ERROR" and line["logger"] == "integrations"
    assert "ValueError: callback https://x.example/cb?code=[redacted] failed" in line["exception"]
    assert "auth-c0de" not in json.dumps(line)
