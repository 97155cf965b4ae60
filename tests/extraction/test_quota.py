"""One Gemini quota for all workers (issue 12): calls wait their turn under the shared requests and tokens
per minute instead of collecting 429s, and a 429 with a retry delay seen by one worker slows the others."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.conf import settings

from extraction.llm import GeminiClient, LLMUnavailable
from integrations.providers.base import Email
from sandbox.client import SandboxClient
from tests.waiting import wait_for


def email(n: int) -> Email:
    return Email(
        provider="gmail",
        message_id=f"m{n}",
        thread_id=f"t{n}",
        sender="Alex <alex@example.com>",
        subject=f"Project {n}",
        received_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
        body_text=f"Please send the report for project {n} by Friday.",
        web_link="",
    )


def fresh_minute() -> None:
    """The quota counts in calendar minutes: start well inside one, so the calls below share it."""
    left = 60 - time.time() % 60
    if left < 10:
        time.sleep(left + 0.1)


def calls(sandbox: SandboxClient) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests("gemini") if "generateContent" in r["path"]]


def test_a_429_with_a_retry_delay_in_one_worker_slows_the_other_workers_calls(sandbox: SandboxClient) -> None:
    sandbox.fault("gemini", 429, headers={"Retry-After": "2"}, times=1)
    first_worker, second_worker = GeminiClient(), GeminiClient()  # nothing shared but Redis
    results: dict[str, Any] = {}

    def first() -> None:
        results["first"] = first_worker.extract([email(1)])

    thread = threading.Thread(target=first)
    thread.start()
    paused = f"{settings.CACHES['default']['KEY_PREFIX']}:gemini-quota:*:paused-until"
    connection = redis.Redis.from_url(settings.REDIS_URL)
    wait_for(
        lambda: list(connection.scan_iter(match=paused)), timeout=5, what="the first worker's 429 pauses every worker"
    )
    results["second"] = second_worker.extract([email(2)])
    thread.join(timeout=10)

    log = calls(sandbox)
    throttled = log[0]
    assert throttled["status"] == 429
    second = next(r for r in log if "project 2 " in r["body"])
    assert second["at"] - throttled["at"] >= 1.9  # it waited out the delay Gemini gave the first worker
    assert results["first"].tasks and results["second"].tasks


@pytest.mark.django_db
def test_calls_over_the_shared_requests_per_minute_wait_and_past_the_longest_wait_the_run_ends(
    sandbox: SandboxClient, settings: Any
) -> None:
    settings.GEMINI_REQUESTS_PER_MINUTE = 2
    settings.GEMINI_MAX_RETRY_WAIT_S = 0  # a turn in the next minute is not waited for here
    fresh_minute()
    workers = [GeminiClient(), GeminiClient()]
    workers[0].extract([email(1)])
    workers[1].extract([email(2)])

    with pytest.raises(LLMUnavailable) as refused:
        workers[0].extract([email(3)])

    assert refused.value.code == "rate_limited"
    assert refused.value.retry_after is not None and 0 < refused.value.retry_after <= 60
    assert len(calls(sandbox)) == 2  # the third never reached Gemini: no 429 collected


@pytest.mark.django_db
def test_the_tokens_per_minute_are_shared_too(sandbox: SandboxClient, settings: Any) -> None:
    settings.GEMINI_TOKENS_PER_MINUTE = 1500  # about two small calls' worth
    settings.GEMINI_MAX_RETRY_WAIT_S = 0
    fresh_minute()
    client = GeminiClient()
    client.extract([email(1)])

    with pytest.raises(LLMUnavailable):
        for n in range(2, 6):
            client.extract([email(n)])
    assert 1 <= len(calls(sandbox)) < 5
