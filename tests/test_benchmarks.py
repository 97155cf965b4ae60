"""Every benchmark in benchmarks/, in a short form, so that none rots unseen: each runs as its README says
(a process of its own, its own sandbox, database and queue) and must have measured something (a Gemini call,
a task, a run, a page). Each holds the checks of its default form
but those that time something (load on a shared machine moves them), so that the smoke form and the default
cannot diverge: chaos's and conversations' are invariants (no email lost, no task duplicated, no run stuck,
every labelled item ending as labelled), the others' counts (Gemini calls, statements, tasks per email).

benchmarks/production.py has a smoke test of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from config.settings_test import PER_RUN_ENV
from tests.databases import template_database

pytestmark = pytest.mark.slow  # each benchmark runs as a process of its own (tests/slow.py)

ROOT = Path(__file__).resolve().parent.parent

# What config/settings_test.py points at this test session; a benchmark chooses its own (its database, Redis
# database 2, its queue and cache prefix, a sandbox it starts), as when a person runs it.
_TEST_SESSION_ENV = (
    *PER_RUN_ENV,
    "DJANGO_SETTINGS_MODULE",
    "REDIS_DB",
    "GEMINI_RETRY_INITIAL_DELAY_S",
    "PUSH_ENABLED",
)


def run_benchmark(name: str, *args: str, timeout: float = 300) -> tuple[int, dict[str, Any]]:
    """Run benchmarks/<name>.py; its exit status and the figures of its last line (a crash fails here)."""
    env = {k: v for k, v in os.environ.items() if k not in _TEST_SESSION_ENV}
    env["TASKLIFT_DATABASE_TEMPLATE"] = template_database()  # migrated once for the whole test run
    done = subprocess.run(
        [sys.executable, f"benchmarks/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = done.stdout.strip().splitlines()
    try:
        figures = json.loads(lines[-1])
    except (IndexError, ValueError):
        output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        pytest.fail(f"{name} printed no figures (exit {done.returncode}):\n{output}")
    assert isinstance(figures, dict)
    return done.returncode, figures


def test_extract_gmail_reads_its_mail_through_gemini() -> None:  # about 10 s
    code, figures = run_benchmark("extract_gmail", "--emails", "30")
    assert code == 0, figures["checks_failed"]  # the default form's checks, at 30 emails
    assert figures["status"] == "succeeded"
    assert figures["gemini_calls"] > 0
    assert figures["tasks_created"] > 0
    assert figures["ledger_rows"] == 30


def test_extract_outlook_reads_its_mail_through_gemini() -> None:  # about 15 s
    code, figures = run_benchmark("extract_outlook", "--emails", "30")
    assert code == 0, figures["checks_failed"]  # the default form's checks, at 30 emails
    assert figures["status"] == "succeeded"
    assert figures["gemini_calls"] > 0
    assert figures["tasks_created"] > 0
    assert figures["ledger_rows"] == 30


def test_backlog_is_read_in_several_runs_by_a_worker() -> None:  # about 30 s
    code, figures = run_benchmark("backlog", "--emails", "120", "--llm-latency-ms", "2000", "--soft-limit", "6")
    assert code == 0, figures["checks_failed"]
    assert figures["gemini_calls"] > 0
    assert figures["tasks"] > 0
    assert figures["runs"] > 1  # the backlog was cut, which is what it measures
    assert figures["lost"] == 0


def test_scheduler_queues_and_measures_idle_checks() -> None:  # about 15 s
    code, figures = run_benchmark("scheduler", "--people", "200", "--sample", "3")
    assert code == 0, figures["checks_failed"]
    assert figures["due_per_tick"] == 200
    assert figures["broker_messages"] == 2  # one idle-check job per hundred mailboxes
    assert (figures["runs_queued"], figures["run_rows_written_idle"]) == (0, 0)
    assert figures["idle_runs"] == 3


def test_scale_simulates_its_scan_and_executes_idle_checks() -> None:  # about 20 s
    code, figures = run_benchmark("scale", "--people", "500", "--sample", "100", "--minutes", "3")
    assert code == 0, figures["checks_failed"]
    assert figures["mailboxes"] == 1000
    assert figures["idle_checks_executed"] > 0
    assert figures["run_rows_written_idle"] == 0


def test_retention_removes_what_is_past_its_age_beside_the_batch_writes() -> None:  # about 20 s
    _, figures = run_benchmark("retention", "--ledger", "20000", "--runs", "10000", "--people", "100", "--seconds", "2")
    assert figures["runs_removed"] > 0 and figures["ledger_compacted"] > 0
    assert figures["runs_left_past_age"] <= 100  # each person's latest run stays
    assert "no Message-ID key past its age left" not in figures["checks_failed"]  # the rest is timing
    assert figures["retention_batches"] > 0 and figures["write_ms_beside"] > 0
    assert 0 < figures["longest_transaction_s"] < figures["longest_batch_s"]


def test_task_list_measures_every_page() -> None:  # about 20 s
    _, figures = run_benchmark("task_list", "--tasks", "3000", "--requests", "2")  # its middle pages full at a tenth
    assert [c for c in figures["checks_failed"] if " p95 " not in c] == []  # all but the timed ones
    statuses = {k: v for k, v in figures.items() if k.endswith("_status")}
    assert statuses
    assert all(status in (200, 204) for status in statuses.values()), statuses  # 204: the poll, nothing new


def test_people_sends_each_digest_once_under_a_kill_and_bounds_the_pages() -> None:  # about 20 s
    """Its checks but the timed ones (CPU, latency: load moves them): every due person's digest once, with a
    worker killed mid-chunk too, and the statements and bytes within issue 33's bounds."""
    _, figures = run_benchmark("people", "--people", "2000", "--sample", "20", "--chunk", "20")
    timed = ("digest CPU", "calendar 304")
    assert [c for c in figures["checks_failed"] if not c.startswith(timed)] == []
    assert figures["due"] == 200 and figures["digests_sent"] == 200 and figures["worker_killed"]
    assert figures["digests_missing"] == figures["digests_duplicated"] == 0


def test_tokens_builds_prompts_of_its_inbox() -> None:  # a few seconds
    _, figures = run_benchmark("tokens")
    assert figures["sent_to_llm"] > 0
    assert figures["prompt_tokens"] > 0
    assert figures["asks_labelled"] > 0


def test_freshness_sees_pushed_mail_become_tasks() -> None:  # about 40 s
    _, figures = run_benchmark("freshness", "--duration", "8", "--interval", "4", "--llm-latency-ms", "100")
    assert [c for c in figures["checks_failed"] if c != "p95"] == []  # its latency is the timed one
    assert figures["emails"] > 0
    assert figures["notifications"] > 0
    assert figures["gemini_calls"] > 0
    assert figures["runs"] > 0


def test_webhook_burst_rings_and_reads_every_email() -> None:  # about 30 s
    code, figures = run_benchmark("webhook_burst", "--emails", "4", "--spread-ms", "1000", "--llm-latency-ms", "100")
    assert code == 0, figures["checks_failed"]
    assert figures["notifications"] > 0
    assert figures["runs"] > 0
    assert figures["gemini_calls"] > 0
    assert figures["tasks"] > 0


def test_chaos_in_short_loses_nothing_under_kills_and_faults() -> None:  # about a minute
    code, figures = run_benchmark(
        "chaos",
        *("--people", "4", "--emails", "20", "--duration", "16", "--kill-every", "4"),
        *("--llm-latency-ms", "100", "--poll-seconds", "10", "--drain-timeout", "150"),
        timeout=600,
    )
    # It tested something: mail read by Gemini during the chaos, runs rung by pushes, workers killed.
    assert figures["gemini_calls"] > 0
    assert figures["read_in_chaos"] > 0
    assert figures["runs_by_trigger"].get("webhook", 0) > 0
    assert figures["kills"] > 0
    assert figures["tasks"] > 0
    assert figures["checks_failed"] == [], json.dumps(figures, indent=1)
    assert code == 0


def test_conversations_in_short_end_with_every_item_as_labelled() -> None:  # about a minute, or two on a busy machine
    code, figures = run_benchmark("conversations", "--smoke", timeout=600)
    # It read something: both folders' mail reached the mailboxes as the dataset says, and Gemini read it.
    assert figures["delivery_mismatches"] == 0
    assert figures["gemini_calls"] > 0
    assert figures["asks"] > 0 and figures["commitments"] > 0 and figures["waiting"] > 0
    # Issue 22's figures: answered asks closed by their reply, promises and waiting items found and settled,
    # nothing of someone else's or quoted made an item, nothing lost or made twice.
    assert figures["checks_failed"] == [], json.dumps(figures, indent=1)
    assert code == 0


def test_reminders_ring_each_once_by_email_and_web_push_under_a_kill() -> None:  # about 25 s
    """Its checks but the timed one (lateness: load moves it): every reminder rung once by email, each of the
    people with a browser pushed once, with a worker killed mid-chunk."""
    _, figures = run_benchmark(
        "reminders",
        *("--people", "60", "--reminders", "300", "--window", "5", "--chunk", "40"),
        *("--lease", "10", "--lead", "4"),
    )
    assert [c for c in figures["checks_failed"] if not c.startswith("late p95")] == []
    assert figures["sent"] == figures["email_sent"] == 300 and figures["worker_killed"]
    assert figures["web_push_sent"] == figures["push_reminders"] > 0
    assert figures["statements_per_reminder"] > 0


def test_imap_reads_checks_and_idles_against_dovecot() -> None:  # about 15 s
    from sandbox.dovecot import dovecot_missing

    if dovecot_missing():
        pytest.skip(str(dovecot_missing()))
    code, figures = run_benchmark("imap", "--emails", "30", "--mailboxes", "5", "--idle-emails", "3")
    # the default form's checks, in short, but the timed one (a loaded machine moves it)
    assert set(figures["checks_failed"]) <= {"IDLE freshness p95 <= 5 s"}, figures["checks_failed"]
    assert code == (1 if figures["checks_failed"] else 0)
    assert figures["gemini_calls"] == 3 and figures["tasks_created"] > 0
    assert figures["idle_connections"] == 6 and figures["idle_freshness_p95_s"] > 0
    assert (figures["lost"], figures["duplicates"], figures["writes_sent"]) == (0, 0, 0)


def test_inbound_takes_forwards_over_smtp_and_the_webhook_through_two_kills() -> None:  # about 20 s
    code, figures = run_benchmark("inbound", "--people", "10", "--emails", "80", "--webhook", "20")
    assert code == 0, figures["checks_failed"]
    assert figures["inbound_killed"] == 2 and figures["strangers"] > 0
    assert (figures["refused_wrongly"], figures["accepted_from_strangers"]) == (0, 0)
    assert (figures["lost"], figures["duplicates"], figures["storage_left"]) == (0, 0, 0)
    assert figures["tasks"] == figures["accepted"] and figures["gemini_calls"] > 0
    assert figures["smtp_p95_ms"] > 0
