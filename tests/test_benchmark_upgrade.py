"""The smoke form of benchmarks/upgrade.py: the previous release built from this repository, filled, upgraded to
this checkout under the supervisor with mail arriving, its settings reloaded, dumped and restored, at a small size.

Its figures are judged by the benchmark itself (`checks_failed`); this test fails when the benchmark breaks, that
is, when it no longer measures anything (no upgrade from the previous version, no mail, no JSON line).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.processes import deployment_benchmark
from tests.procfile import ROOT

pytestmark = pytest.mark.slow  # two releases' deployments of processes (tests/slow.py)

PREVIOUS = ("v0.1.0", "117793e")  # its tag; the commit it tags, should a clone have come without its tags
SMOKE = ["--people", "2", "--tasks-per-person", "20", "--emails", "1", "--upgrade-seconds", "8"]
SMOKE += ["--drain-timeout", "120", "--llm-latency-ms", "0"]
FIELDS = {
    "from_version",
    "to_version",
    "migrate_s",
    "downtime_s",
    "emails",
    "lost",
    "duplicates",
    "tasks_before",
    "tasks_after",
    "read_twice_after_restore",
    "lost_after_restore",
    "settings_reload_ok",
    "checks_failed",
}


def _previous_release() -> str | None:
    for name in PREVIOUS:
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], cwd=ROOT, capture_output=True
        )
        if found.returncode == 0:
            return name
    return None


def test_upgrade_benchmark_upgrades_the_previous_release_under_mail_and_restores_its_dump() -> None:
    previous = _previous_release()
    if previous is None:
        pytest.skip("a clone without the history of the previous release (v0.1.0): it cannot be built here")
    status, figures, output = deployment_benchmark("upgrade", "--from", previous, *SMOKE, timeout=600)
    assert figures.keys() >= FIELDS, output
    assert figures["from_version"] == "0.1.0" and figures["from_version"] != figures["to_version"]
    assert figures["emails"] > 0 and figures["emails_during_upgrade"] > 0, output
    assert figures["tasks_before"] >= 2 * 20, output
    assert figures["emails_in_dump"] > 0 and figures["emails_after_dump"] > 0, output
    assert status == (1 if figures["checks_failed"] else 0)
