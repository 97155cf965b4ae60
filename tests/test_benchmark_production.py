"""The smoke form of benchmarks/production.py: the whole production demo (Debian's PostgreSQL and Redis, the
runbook's steps, the Procfile's processes under the supervisor, mail by push) at a small size with one fault.

Its figures are judged by the benchmark itself (`checks_failed`), not here: this test fails when the benchmark
breaks, that is, when it no longer measures anything (no mail read, no Gemini call, no task made, no JSON line).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a deployment of processes (tests/slow.py)

ROOT = Path(__file__).resolve().parent.parent
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
    # The safety nets' waits shortened, so that a run whose queued job went with Redis is sent again quickly.
    env = {**os.environ, "EXTRACTION_QUEUED_STALE_SECONDS": "15", "EXTRACTION_REAPER_SECONDS": "5"}
    process = subprocess.Popen(
        [sys.executable, "benchmarks/production.py", *SMOKE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)  # the benchmark stops everything it started, then exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=120)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("the smoke benchmark did not finish within 300 s")
    lines = stdout.strip().splitlines()
    try:
        figures = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"no JSON line at the end (status {process.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    assert figures.keys() >= FIELDS, stdout[-3000:]
    assert figures["faults"] == ["redis", "web"]
    assert figures["web_recovered_s"] > 0  # gunicorn's master killed, then serving again (issue 35)
    assert figures["emails"] == 2 * 2 * 3 + 1  # and the one delivered after the fault
    assert figures["gemini_calls"] > 0, stdout[-3000:]
    assert figures["tasks"] > 0, stdout[-3000:]
    assert process.returncode == (1 if figures["checks_failed"] else 0)
