"""The doorbells while PostgreSQL or Redis is out of reach (a restart): each answers 503 with Retry-After and
a JSON error, never a 500 with a traceback, and nothing is lost (the ring is noted, or sent again, and beat's
scan reads the mailbox).

Real failures: the web process (gunicorn, as the Procfile starts it) runs with DATABASE_URL or REDIS_URL
naming a port where nothing listens, beside this session's database, Redis and sandbox, which stay up.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from django.utils import timezone

from accounts.models import User
from config.crypto import encrypt_json
from config.ports import free_port
from extraction.models import ExtractionRun
from extraction.scheduling import mailboxes_claim_due
from integrations.models import Integration, PushChannel
from sandbox.client import SandboxClient
from tests.factories import IntegrationFactory
from tests.integrations.test_push_gmail import envelope, good_claims
from tests.integrations.test_push_outlook import SECRET, change
from tests.processes import ROOT, process_env
from tests.waiting import wait_for

# slow: gunicorn with its database or Redis gone (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def closed_port() -> int:
    return free_port()  # nothing listens there


class Web:
    def __init__(self, log: Path, **env: str) -> None:
        self.port = closed_port()
        self.log = log
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "gunicorn.conf.py"],
                cwd=ROOT,
                env=process_env(PORT=str(self.port), WEB_CONCURRENCY="1", LOG_FORMAT="json", **env),
                stdout=output,
                stderr=output,
            )
        deadline = time.monotonic() + 90
        while True:  # up once it answers anything (its /healthz says 503 while a part is down)
            assert self.process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                requests.get(f"http://127.0.0.1:{self.port}/healthz", timeout=60)
                return
            except requests.ConnectionError:
                time.sleep(0.3)

    def post(self, path: str, body: bytes, **headers: str) -> requests.Response:
        headers = {"Content-Type": "application/json", **headers}
        return requests.post(f"http://127.0.0.1:{self.port}{path}", data=body, headers=headers, timeout=60)

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        return self.log.read_text()


@pytest.fixture
def web_without_database(tmp_path: Path) -> Iterator[Web]:
    web = Web(tmp_path / "web.log", DATABASE_URL=f"postgresql://tasklift@127.0.0.1:{closed_port()}/tasklift")
    yield web
    web.stop()


@pytest.fixture
def web_without_redis(tmp_path: Path) -> Iterator[Web]:
    web = Web(tmp_path / "web.log", REDIS_URL=f"redis://127.0.0.1:{closed_port()}/1")
    yield web
    web.stop()


def assert_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, response.text[:2000]
    assert int(response.headers["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "unavailable"


@pytest.fixture
def outlook_channel(consenting_user: User) -> PushChannel:
    """An Outlook mailbox read a moment ago (so that only a ring makes it due) and its Graph subscription."""
    integration = IntegrationFactory(
        user=consenting_user, provider=Integration.Provider.OUTLOOK, last_success_at=timezone.now()
    )
    return PushChannel.objects.create(
        integration=integration,
        external_id="sub-1",
        secret_encrypted=encrypt_json({"client_state": SECRET}),
        expires_at=timezone.now() + timedelta(days=2),
    )


def graph(notes: list[dict[str, Any]]) -> bytes:
    return json.dumps({"value": notes}).encode()


def test_every_doorbell_answers_503_while_the_database_is_down(
    web_without_database: Web, sandbox: SandboxClient, settings: Any, outlook_channel: PushChannel
) -> None:
    token = sandbox.pubsub_token(claims=good_claims(settings))  # genuine: the ring gets as far as the database
    gmail = web_without_database.post(
        "/webhooks/gmail", envelope("person@example.com", 1234), Authorization=f"Bearer {token}"
    )
    notify = web_without_database.post("/webhooks/outlook", graph([change("sub-1", SECRET)]))
    lifecycle = web_without_database.post(
        "/webhooks/outlook/lifecycle", graph([{**change("sub-1", SECRET), "lifecycleEvent": "missed"}])
    )

    for response in (gmail, notify, lifecycle):
        assert_unavailable(response)
    log = web_without_database.stop()
    assert "Traceback" not in log
    assert log.count("answered 503: django.db.utils.OperationalError") == 3


def test_every_doorbell_answers_503_while_redis_is_down_and_the_ring_is_not_lost(
    web_without_redis: Web, sandbox: SandboxClient, settings: Any, outlook_channel: PushChannel
) -> None:
    token = sandbox.pubsub_token(claims=good_claims(settings))
    gmail = web_without_redis.post(
        "/webhooks/gmail", envelope("person@example.com", 1234), Authorization=f"Bearer {token}"
    )
    notify = web_without_redis.post("/webhooks/outlook", graph([change("sub-1", SECRET)]))
    removed = web_without_redis.post(
        "/webhooks/outlook/lifecycle", graph([{**change("sub-1", SECRET), "lifecycleEvent": "subscriptionRemoved"}])
    )

    for response in (gmail, notify, removed):
        assert_unavailable(response)
    log = web_without_redis.stop()
    assert "Traceback" not in log
    assert "answered 503: redis.exceptions.ConnectionError" in log  # the cache: certificates, push counters
    assert "answered 503: kombu.exceptions.OperationalError" in log  # the broker: the subscription's job
    # Nothing half-written: no run waits for a job that was never sent; the ring is noted, and beat's scan
    # (here, with Redis back) takes the mailbox up.
    assert not ExtractionRun.objects.exists()
    integration = Integration.objects.get(pk=outlook_channel.integration_id)
    assert integration.notified_at is not None
    settings.EXTRACTION_SCAN_SECONDS = 1
    claimed = wait_for(mailboxes_claim_due, timeout=10, what="beat's scan takes up the mailbox that rang")
    assert [(c.user_id, c.rung_unread) for c in claimed] == [(integration.user_id, True)]
