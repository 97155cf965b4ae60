"""`/metrics`: who may read it, and that what it says is what happened, whichever process did the work."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounts.models import User
from extraction.jobs import extraction_reap_job
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request
from integrations.models import Integration
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, run_extraction
from tests.extraction.test_bulk_skip import NEWSLETTER
from tests.factories import IntegrationFactory, UserFactory
from tests.mail import ask, no_ask
from tests.processes import ROOT, process_env, run_extract
from tests.test_settings import _environment, _production

TOKEN = "metrics-token-for-tests"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: Client) -> Samples:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content[:500]
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def token(settings: Any) -> str:
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


# Who may read them -----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_metrics_want_the_bearer_token_when_one_is_set(client: Client, token: str) -> None:
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401 and wrong.json()["code"] == "metrics_unauthorized"
    assert client.get("/metrics", headers={"Authorization": f"Basic {token}"}).status_code == 401

    response = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"tasklift_queue_length" in response.content


@pytest.mark.django_db
def test_without_a_token_development_serves_metrics_to_this_machine_only(client: Client, settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    refused = client.get("/metrics", REMOTE_ADDR="10.0.0.7")
    assert refused.status_code == 403 and refused.json()["code"] == "metrics_loopback_only"


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_production_without_a_token_refuses_metrics_and_with_one_wants_it() -> None:
    """Asked over plain http, as Prometheus scrapes a web process on the private network: answered, not
    redirected to https."""
    script = (
        "import django, json; django.setup();"
        "from django.test import Client; from django.test.utils import setup_test_environment;"
        "setup_test_environment(); c = Client();"
        "r = c.get('/metrics'); print(r.status_code, json.loads(r.content)['code'])"
    )

    def status(**env: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-c", script],
            env=_environment(**_production(**env)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.split()

    assert status(METRICS_TOKEN="") == ["403", "metrics_token_missing"]
    assert status(METRICS_TOKEN=TOKEN) == ["401", "metrics_unauthorized"]


# What they say ---------------------------------------------------------------------------------------
@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)
def test_a_run_in_a_worker_process_shows_in_the_web_process_scrape(
    client: Client, token: str, gmail: GmailBox, sandbox: SandboxClient
) -> None:
    """A real run through the sandbox, in a process of its own (as a Celery pool process runs it): its
    outcome, its emails, its Gemini calls and tokens are in the scrape this process serves."""
    for raw in (ask(1), ask(2), no_ask(3), NEWSLETTER):
        gmail.deliver(raw)
    poison = gmail.deliver(ask(4))
    sandbox.fault("gemini", 200, body={"promptFeedback": {"blockReason": "SAFETY"}}, times=None, match="project 4 ")
    before = scrape(client)

    result = run_extract(gmail.integration.user.email)

    assert result.returncode == 0, result.stderr[-2000:]
    run = ExtractionRun.objects.get(pk=json.loads(result.stdout)["id"])
    assert run.status == "succeeded" and run.tasks_created == 2 and run.emails_quarantined == 1
    assert run.ledger.filter(message_id=poison, outcome="quarantined").exists()
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("tasklift_extraction_runs_total", trigger="admin", outcome="succeeded") == 1
    assert grew("tasklift_extraction_emails_total", kind="fetched") == 5
    assert grew("tasklift_extraction_emails_total", kind="skipped_bulk") == 1
    assert grew("tasklift_extraction_emails_total", kind="quarantined") == 1
    assert grew("tasklift_extraction_emails_total", kind="sent_to_llm") == run.emails_sent_to_llm == 3
    assert grew("tasklift_extraction_tasks_created_total") == 2
    assert run.llm_calls >= 3  # the batch, its halves, the probe, the poison alone
    assert grew("tasklift_gemini_calls_total", outcome="ok") == run.llm_calls
    assert grew("tasklift_gemini_call_seconds_count") == run.llm_calls
    assert grew("tasklift_gemini_tokens_total", kind="prompt") == run.prompt_tokens > 0
    assert grew("tasklift_gemini_tokens_total", kind="output") == run.output_tokens > 0


@pytest.mark.django_db
def test_gemini_429s_are_counted(client: Client, token: str, gmail: GmailBox, sandbox: SandboxClient) -> None:
    gmail.deliver(ask(1))
    sandbox.fault("gemini", 429, times=1, headers={"Retry-After": "0"})
    before = scrape(client)

    run = run_extraction(gmail.integration.user)

    assert run.status == "succeeded"
    after = scrape(client)
    rate_limited = ("tasklift_gemini_calls_total", (("outcome", "rate_limited"),))
    assert after.get(rate_limited, 0) - before.get(rate_limited, 0) == 1


@pytest.mark.django_db
def test_mailboxes_behind_show_the_throttled_the_ones_to_reconnect_and_the_oldest_read(
    client: Client, token: str, user: User
) -> None:
    now = timezone.now()
    IntegrationFactory(user=user, last_success_at=now - timedelta(hours=2), retry_after=now + timedelta(minutes=10))
    IntegrationFactory(user=user, last_success_at=now - timedelta(minutes=5), notified_at=now - timedelta(minutes=3))
    IntegrationFactory(user=user, status=Integration.Status.NEEDS_REAUTH, last_success_at=now - timedelta(days=9))
    IntegrationFactory(user=user, provider="outlook", last_success_at=now - timedelta(minutes=1))

    samples = scrape(client)

    assert value(samples, "tasklift_mailboxes_throttled", provider="gmail") == 1
    assert value(samples, "tasklift_mailboxes_needing_reconnect", provider="gmail") == 1
    assert value(samples, "tasklift_mailboxes_active", provider="gmail") == 2
    # The oldest read among the active ones (the one to reconnect is counted apart, not as behind).
    assert 7200 <= value(samples, "tasklift_mailbox_oldest_read_age_seconds", provider="gmail") < 7260
    assert 180 <= value(samples, "tasklift_mailbox_oldest_unread_ring_age_seconds", provider="gmail") < 240
    assert value(samples, "tasklift_mailboxes_throttled", provider="outlook") == 0
    assert 60 <= value(samples, "tasklift_mailbox_oldest_read_age_seconds", provider="outlook") < 120
    assert value(samples, "tasklift_scrape_part_up", part="mailboxes") == 1


@pytest.mark.django_db
def test_the_queue_length_is_the_jobs_waiting(client: Client, token: str, broker_queue: Callable[[], int]) -> None:
    assert value(scrape(client), "tasklift_queue_length") == 0
    for _ in range(3):
        extraction_reap_job.delay()

    samples = scrape(client)

    assert value(samples, "tasklift_queue_length") == broker_queue() == 3
    assert value(samples, "tasklift_scrape_part_up", part="queue") == 1


@pytest.mark.django_db
def test_the_reaper_counts_the_runs_it_takes_up(client: Client, token: str, user: User) -> None:
    ExtractionRun.objects.create(user=user, trigger="schedule", status="running", deliveries=1)  # its runner died
    ExtractionRun.objects.create(user=UserFactory(), trigger="schedule", status="running", deliveries=3)
    before = scrape(client)

    extraction_reap_job()

    after = scrape(client)
    requeued = ("tasklift_extraction_reaped_runs_total", (("outcome", "requeued"),))
    given_up = ("tasklift_extraction_reaped_runs_total", (("outcome", "given_up"),))
    assert after.get(requeued, 0) - before.get(requeued, 0) == 1
    assert after.get(given_up, 0) - before.get(given_up, 0) == 1
    failed = ("tasklift_extraction_runs_total", (("outcome", "failed"), ("trigger", "schedule")))
    assert after.get(failed, 0) - before.get(failed, 0) == 1  # the run given up has ended


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db
def test_a_child_process_counter_appears_in_the_scrape_of_this_one() -> None:
    """Multiprocess mode in its barest form: a counter incremented in a process that then exits."""
    script = (
        "import django; django.setup(); from config.metrics import PUSH_RINGS;"
        "PUSH_RINGS.labels('gmail', 'malformed').inc(7)"
    )
    from config.metrics import metrics_registry

    def malformed() -> float:
        labels = {"provider": "gmail", "outcome": "malformed"}
        return metrics_registry().get_sample_value("tasklift_push_rings_total", labels) or 0.0

    before = malformed()
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=process_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert malformed() - before == 7


@pytest.mark.django_db
def test_push_rings_are_counted_by_provider_and_outcome(
    client: Client, token: str, gmail: GmailBox, sandbox: SandboxClient, settings: Any
) -> None:
    from tests.integrations.test_push_gmail import envelope, good_claims, push

    gmail.deliver(ask(1))
    body = envelope(gmail.address, int(gmail.history_id()))
    before = scrape(client)

    push(client, body, sandbox.pubsub_token(claims=good_claims(settings), signer="stranger"))
    push(client, body, sandbox.pubsub_token(claims=good_claims(settings), signer="sandbox"))
    push(client, b"not json", sandbox.pubsub_token(claims=good_claims(settings), signer="sandbox"))
    client.post("/webhooks/outlook", data=b"[]", content_type="application/json")

    after = scrape(client)
    for provider, outcome in [
        ("gmail", "refused"),
        ("gmail", "accepted"),
        ("gmail", "malformed"),
        ("outlook", "malformed"),
    ]:
        key = ("tasklift_push_rings_total", (("outcome", outcome), ("provider", provider)))
        assert after.get(key, 0) - before.get(key, 0) == 1, (provider, outcome)


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)
def test_a_run_in_a_celery_pool_process_shows_in_the_scrape(
    client: Client, token: str, gmail: GmailBox, django_capture_on_commit_callbacks: Any
) -> None:
    """A real worker (the Procfile's, with a prefork pool of two) takes the job: what its pool process counted
    is in this process's scrape, and the pool's processes leave without an error when the worker stops."""
    gmail.deliver(ask(1))
    before = scrape(client)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2"],
        cwd=ROOT,
        env=process_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with django_capture_on_commit_callbacks(execute=True):
            run, _ = extraction_run_request(user=gmail.integration.user, trigger=ExtractionRun.Trigger.MANUAL)
        deadline = time.monotonic() + 90
        while not ExtractionRun.objects.get(pk=run.pk).is_finished and time.monotonic() < deadline:
            time.sleep(0.5)
        after = scrape(client)
    finally:
        worker.terminate()
        _, stderr = worker.communicate(timeout=60)
    assert ExtractionRun.objects.get(pk=run.pk).status == "succeeded", stderr[-3000:]
    key = ("tasklift_extraction_runs_total", (("outcome", "succeeded"), ("trigger", "manual")))
    assert after.get(key, 0) - before.get(key, 0) == 1
    tasks = ("tasklift_extraction_tasks_created_total", ())
    assert after.get(tasks, 0) - before.get(tasks, 0) == 1
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.mark.django_db
def test_http_requests_are_counted_by_route_method_and_status_with_their_time(client: Client, token: str) -> None:
    """Issue 35: /metrics had no HTTP series, so webhook 503s showed only in the logs. Each answer is counted by
    its route's pattern (never its path: ids and tokens stay out of the labels), method and status."""
    before = scrape(client)
    assert client.get("/login/").status_code == 200
    assert client.get("/login/").status_code == 200
    assert client.get("/tasks/123456/email").status_code == 302  # to the login page
    assert client.get("/no/such/page/secret-token").status_code == 404
    assert client.generic("BREW", "/login/").status_code == 405
    after = scrape(client)

    def grew(route: str, method: str, status: str) -> float:
        labels = {"route": route, "method": method, "status": status}
        return value(after, "tasklift_http_requests_total", **labels) - value(
            before, "tasklift_http_requests_total", **labels
        )

    assert grew("login/", "GET", "200") == 2
    assert grew("tasks/<int:task_id>/email", "GET", "302") == 1
    assert grew("unmatched", "GET", "404") == 1
    assert grew("login/", "other", "405") == 1
    timed = value(after, "tasklift_http_request_seconds_count", route="login/") - value(
        before, "tasklift_http_request_seconds_count", route="login/"
    )
    assert timed == 3  # the histogram has the BREW too
    assert not [key for key in after if "secret-token" in str(key) or "123456" in str(key)]
