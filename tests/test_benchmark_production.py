"""The smoke form of benchmarks/production.py: the whole production demo (Debian's PostgreSQL and Redis, the
runbook's steps, the Procfile's processes under the supervisor, mail by push) at a small size with one fault.

Its figures are judged by the benchmark itself (`checks_failed`), not here: this test fails when the benchmark
breaks, that is, when it no longer measures anything (no mail read, no Gemini call, no task made, no JSON line).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.processes import deployment_benchmark

pytestmark = pytest.mark.slow  # a deployment of processes (tests/slow.py)

SMOKE = ["--people", "2", "--emails", "3", "--faults", "redis,web", "--deliver-seconds", "10", "--down-seconds", "3"]
SMOKE += ["--drain-timeout", "60", "--llm-latency-ms", "0"]
FIELDS = {
    "emails",
    "tasks",
    "lost",
    "duplicates",
    "stuck_runs",
    "hand_restarts",
    "recovered_s",
    "web_recovered_s",
    "readyz_503_while_down",
    "webhook_500s",
    "metrics_scraped",
    "checks_failed",
}


def test_production_benchmark_reads_mail_through_a_deployment_that_loses_redis_and_its_web() -> None:
    if importlib.util.find_spec("config.supervise") is None:
        pytest.skip("config.supervise (the Procfile's supervisor) is not in this checkout")
    status, figures, output = deployment_benchmark("production", *SMOKE, timeout=300)
    assert figures.keys() >= FIELDS, output
    assert figures["faults"] == ["redis", "web"]
    assert figures["web_recovered_s"] > 0  # gunicorn's master killed, then serving again (issue 35)
    assert figures["emails"] == 2 * 2 * 3 + 1  # and the one delivered after the fault
    assert figures["gemini_calls"] > 0, output
    assert figures["tasks"] > 0, output
    assert status == (1 if figures["checks_failed"] else 0)
