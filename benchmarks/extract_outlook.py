"""One extraction run over N new Outlook emails, end to end through the sandbox (Microsoft Graph and Microsoft
identity over its HTTPS listener), measured.

    uv run python benchmarks/extract_outlook.py [--emails 1000] [--llm-latency-ms 0] [--tasks-ratio 0.5] [--seed 1]

Setup, not timed: the sandbox runs in a process of its own, with its HTTPS listener on a free port and its
certificate in a temporary directory; this process trusts exactly that certificate (MICROSOFT_CA_BUNDLE and
SANDBOX_TLS_URL are set before django.setup(); verification is never turned off). A fresh database
`tasklift_bench_outlook` is created on the PostgreSQL server config.settings uses and dropped at the end;
Redis database 2 is used. A consenting user connects a sandbox Outlook mailbox the way the OAuth callback
does: the real MSAL auth-code flow (MicrosoftOAuthFlow: initiate_auth_code_flow, the sandbox consent page
approved over the trusted session, acquire_token_by_auth_code_flow) gives the MSAL token cache, and
outlook_connect stores it with the first cursor (the inbox delta filtered to the backfill window). A first
run reads the still empty mailbox and takes the first deltaLink. Then N emails are delivered: a seeded random
mix of emails with one to three asks and emails with none.

Timed: one ExtractionPipeline run (delta pages that carry the bodies, Gemini calls, writes, commit).

Human-readable figures first; the last line printed is one JSON object with every figure. The exit
status is 1 when a check fails (the run did not succeed, Gemini calls or delta pages are not what the
batch and page sizes give, a Graph request other than a delta page, a token refresh, the per-batch query
count varies...).
"""

from __future__ import annotations

import argparse
import html
import math
import os
import platform
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import (
    Benchmark,
    SandboxProcess,
    concurrency_figures,
    configure_run,
    git_version,
    mail_mix,
    main,
    parse_args,
    report_rest,
    report_run,
    timed_run,
)

if TYPE_CHECKING:  # imported for real only after django.setup()
    from accounts.models import User
    from integrations.models import Integration

BENCH_DATABASE = "tasklift_bench_outlook"  # not extract_gmail's: the two can run side by side
ADDRESS = "bench@outlook.example.com"


def first_date(window_start: datetime) -> datetime:
    """The date of the first email: yesterday 00:00 UTC, or just after `window_start` if that is later.

    Outlook's first cursor keeps only mail received since `window_start` (MAIL_BACKFILL_DAYS before the
    connect), and every later delta round keeps that filter, so the mail cannot carry a fixed date as
    extract_gmail's does. The emails are one second apart: with the default window the prompts are the same
    all day, and their lengths (so the token counts) on every day.
    """
    yesterday = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    return yesterday if yesterday >= window_start else window_start.replace(microsecond=0) + timedelta(seconds=1)


# Connecting without a browser ------------------------------------------------------------------------------
def approve_consent_page(http: requests.Session, authorize_url: str, address: str) -> dict[str, str]:
    """Load the sandbox's Microsoft consent page and accept it as `address`, like a person would; returns the
    query of the redirect back to Tasklift (code, state, client_info), which is not followed."""
    page = http.get(authorize_url, timeout=10)
    page.raise_for_status()
    form = re.search(r'<form method="post" action="([^"]+)"', page.text)
    if form is None:
        raise RuntimeError(f"no consent form at {authorize_url}: {page.text[:500]}")
    fields = {
        html.unescape(name): html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
    }
    fields.update(address=address, decision="accept")
    base = "{0.scheme}://{0.netloc}".format(urlsplit(authorize_url))
    answer = http.post(base + html.unescape(form[1]), data=fields, allow_redirects=False, timeout=10)
    if answer.status_code not in (302, 303):
        raise RuntimeError(f"the consent page answered {answer.status_code}: {answer.text[:500]}")
    return {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["Location"]).query).items()}


def connect_outlook(user: User, sandbox: SandboxProcess) -> Integration:
    """The OAuth callback's path without a browser: MSAL's auth-code flow, then outlook_connect."""
    from importlib import import_module

    from django.conf import settings

    from integrations.oauth.microsoft import MicrosoftOAuthFlow
    from integrations.providers.outlook import graph_session
    from integrations.services import outlook_connect

    # The trust is this sandbox's certificate and nothing else, and verification is on.
    browser = graph_session()
    trusted = {
        "MICROSOFT_SIMULATED": settings.MICROSOFT_SIMULATED,
        "MICROSOFT_CA_BUNDLE is the sandbox's certificate": str(sandbox.cert_file) == settings.MICROSOFT_CA_BUNDLE,
        "MICROSOFT_AUTHORITY on the sandbox": settings.MICROSOFT_AUTHORITY.startswith(sandbox.tls_url + "/"),
        "GRAPH_API_ENDPOINT on the sandbox": settings.GRAPH_API_ENDPOINT.startswith(sandbox.tls_url + "/"),
        "graph_session verifies with that file only": browser.verify == str(sandbox.cert_file)
        and not browser.trust_env,
    }
    if not all(trusted.values()):
        raise RuntimeError(f"not set up to trust exactly the sandbox's certificate: {trusted}")

    flow = MicrosoftOAuthFlow(import_module(settings.SESSION_ENGINE).SessionStore())
    params = approve_consent_page(browser, flow.get_authorization_url(login_hint=ADDRESS), ADDRESS)
    msal_cache, home_account_id, access_token = flow.get_token_cache(params=params)
    return outlook_connect(user=user, msal_cache=msal_cache, home_account_id=home_account_id, access_token=access_token)


# The benchmark ---------------------------------------------------------------------------------------------
def graph_counts(log: list[dict[str, Any]], inbox_delta: str = "") -> dict[str, int]:
    """The Graph requests of `log`: outer HTTP requests by kind, and the parts inside $batch POSTs. With
    `inbox_delta` (the Inbox cursor's deltaLink), delta pages of another folder (the Sent mail, read since
    issue 27) are counted apart."""
    outer = [r for r in log if not r["batch_part"]]
    deltas = [r for r in outer if r["method"] == "GET" and r["path"].endswith("/messages/delta")]
    inbox_path = urlsplit(inbox_delta).path if inbox_delta else ""
    sent = sum(1 for r in deltas if inbox_path and r["path"] != inbox_path)
    delta = len(deltas) - sent
    batch = sum(1 for r in outer if r["method"] == "POST" and r["path"] == "/v1.0/$batch")
    me = sum(1 for r in outer if r["method"] == "GET" and r["path"] == "/v1.0/me")
    return {
        "http": len(outer),
        "delta_pages": delta,
        "sent_delta_pages": sent,
        "batch_calls": batch,
        "me": me,
        "other": len(outer) - delta - sent - batch - me,
        "batch_parts": len(log) - len(outer),
        "errors": sum(1 for r in log if (r["status"] or 0) >= 400),
    }


def identity_counts(log: list[dict[str, Any]]) -> dict[str, int]:
    """Microsoft identity requests of `log`: token requests (refresh or code grant), OIDC discovery, other."""
    token = [r for r in log if r["method"] == "POST" and r["path"].endswith("/oauth2/v2.0/token")]
    refresh = sum(1 for r in token if parse_qs(r["body"] or "").get("grant_type") == ["refresh_token"])
    discovery = sum(1 for r in log if r["path"].endswith("/.well-known/openid-configuration"))
    return {
        "all": len(log),
        "token": len(token),
        "refresh": refresh,
        "discovery": discovery,
        "other": len(log) - len(token) - discovery,
    }


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    from django.conf import settings

    from accounts.services import consent_grant, user_create
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.pipeline import ExtractionPipeline
    from integrations.models import SyncCursor
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    user = user_create(email="bench@tasklift.test", password="bench-only-password-never-used")
    consent_grant(user=user)
    client.create_outlook_mailbox(ADDRESS)
    integration = connect_outlook(user, sandbox)
    window_start = datetime.now(UTC) - timedelta(days=settings.MAIL_BACKFILL_DAYS)  # not after the cursor's
    connect_graph = graph_counts(client.requests("graph"))
    connect_identity = identity_counts(client.requests("microsoft"))
    cursor = SyncCursor.objects.get(integration=integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION)

    # The first run: the filtered initial delta of an empty mailbox, which gives the first deltaLink.
    client.clear_requests()
    first = ExtractionPipeline(ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)).execute()
    if first.status != ExtractionRun.Status.SUCCEEDED:
        raise RuntimeError(f"the first run (empty mailbox) did not succeed: {first.status} {first.error_message}")
    first_graph = graph_counts(client.requests("graph"))
    cursor.refresh_from_db()
    cursor_before = cursor.value
    if "$deltatoken=" not in cursor_before:
        raise RuntimeError(f"after the first run the cursor is not a deltaLink: {cursor_before}")

    mails = mail_mix(
        args.emails,
        args.tasks_ratio,
        args.seed,
        to=ADDRESS,
        first_date=first_date(window_start),
        step=timedelta(seconds=1),
        body_bytes=args.body_bytes,
    )
    started = time.perf_counter()
    for mail in mails:
        client.deliver_outlook(ADDRESS, mail.raw, received_at=mail.date)
    with_asks = sum(1 for m in mails if m.asks)
    expected_tasks = sum(m.asks for m in mails)
    print(
        f"setup: connected {integration.account_address} through MSAL's auth-code flow "
        f"({connect_identity['all']} identity and {connect_graph['http']} Graph requests); first run took the "
        f"first deltaLink ({first_graph['delta_pages']} delta page)"
    )
    print(
        f"setup: delivered {len(mails)} emails ({with_asks} with asks, {expected_tasks} asks in all) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    client.set_gemini_latency(args.llm_latency_ms)
    client.clear_requests()
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)

    # The run ------------------------------------------------------------------------------------------
    configure_run(args)
    measured = timed_run(run)
    pipeline, run, wall, cpu = measured.pipeline, measured.run, measured.wall, measured.cpu
    rss_before, rss_peak = measured.rss_before, measured.rss_peak

    # What reached the sandbox ----------------------------------------------------------------------------
    graph = graph_counts(client.requests("graph"), inbox_delta=cursor_before)
    identity = identity_counts(client.requests("microsoft"))
    gemini_calls = sum(1 for r in client.requests("gemini") if r["method"] == "POST")
    cursor.refresh_from_db()
    stats = pipeline.batch_stats
    queries = [s.queries for s in stats] or [0]
    tasks = [s.tasks for s in stats] or [0]
    ledger_rows = ProcessedEmail.objects.count()

    llm_batches = math.ceil(args.emails / settings.EXTRACTION_BATCH_SIZE)
    delta_pages = math.ceil(args.emails / settings.GRAPH_PAGE_SIZE)
    checks = {
        "run succeeded": run.status == ExtractionRun.Status.SUCCEEDED,
        f"gemini calls == {llm_batches}": gemini_calls == llm_batches,
        f"inbox delta pages == {delta_pages} (page size {settings.GRAPH_PAGE_SIZE})": graph["delta_pages"]
        == delta_pages,
        "Sent mail (empty) read in one delta page": graph["sent_delta_pages"] == 1,
        # The delta lists ids and received times; bodies come in $batch of 20 for the mail that is read.
        f"graph $batch POSTs == {math.ceil(args.emails / 20)}": graph["batch_calls"] == math.ceil(args.emails / 20),
        "no Graph request but delta pages and $batch": graph["http"]
        == graph["delta_pages"] + graph["sent_delta_pages"] + graph["batch_calls"],
        "no token refresh": identity["refresh"] == 0,
        "cursor moved to a new deltaLink": cursor.value != cursor_before and "$deltatoken=" in cursor.value,
        "db queries per batch constant": min(queries) == max(queries),
        f"tasks created == {expected_tasks} asks": run.tasks_created == expected_tasks,
        f"ledger rows == {args.emails}": ledger_rows == args.emails,
    }
    if args.tasks_ratio > 0 and len(stats) > 1:
        checks["batches differ in tasks (else the query check proves little)"] = min(tasks) != max(tasks)

    return {
        "emails": args.emails,
        "gemini_calls": gemini_calls,
        "graph_http_requests": graph["http"],
        "db_queries_per_batch_max": max(queries),
        "db_queries_per_batch_min": min(queries),
        "wall_s": round(wall, 3),
        "peak_rss_mb": round(rss_peak, 1),
        "status": run.status,
        "error": run.error_message,
        "tasks_created": run.tasks_created,
        "ledger_rows": ledger_rows,
        "llm_latency_ms": args.llm_latency_ms,
        "tasks_ratio": args.tasks_ratio,
        "seed": args.seed,
        "graph_batch_calls": graph["batch_calls"],
        "delta_pages": graph["delta_pages"],
        "sent_delta_pages": graph["sent_delta_pages"],
        "graph_page_size": settings.GRAPH_PAGE_SIZE,
        "graph_me_requests": graph["me"],
        "graph_other_requests": graph["other"],
        "graph_batch_parts": graph["batch_parts"],
        "graph_errors": graph["errors"],
        "identity_requests": identity["all"],
        "identity_token_refreshes": identity["refresh"],
        "identity_token_requests": identity["token"],
        "identity_discovery_requests": identity["discovery"],
        "identity_other_requests": identity["other"],
        "llm_calls_recorded": run.llm_calls,
        "llm_batches": len(stats),
        "tasks_per_batch_min": min(tasks),
        "tasks_per_batch_max": max(tasks),
        "db_queries_total": measured.queries,
        "db_queries_in_batches": sum(s.queries for s in stats),
        "prompt_tokens": run.prompt_tokens,
        "output_tokens": run.output_tokens,
        "emails_per_s": round(args.emails / wall, 1) if wall else None,
        "cpu_s": round(cpu, 3),
        "peak_rss_before_run_mb": round(rss_before, 1),
        "sandbox_peak_rss_mb": sandbox.peak_rss_mb(),
        "connect_graph_requests": connect_graph["http"],
        "connect_identity_requests": connect_identity["all"],
        "first_run_graph_requests": first_graph["http"],
        "debug": settings.DEBUG,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "git": git_version(),
        **concurrency_figures(args, wall=wall, memory=measured.memory, checks=checks),
        "checks_failed": [name for name, ok in checks.items() if not ok],
    }


def report(figures: dict[str, Any]) -> None:
    f = figures
    report_run(f)
    print(
        f"graph: {f['graph_http_requests']} HTTP requests = {f['delta_pages']} delta pages "
        f"(page size {f['graph_page_size']}) + {f['graph_batch_calls']} $batch POSTs + {f['graph_me_requests']} /me "
        f"+ {f['graph_other_requests']} other ({f['graph_batch_parts']} parts inside the batches, "
        f"{f['graph_errors']} errors)"
    )
    print(
        f"ident: {f['identity_requests']} Microsoft identity requests = {f['identity_token_requests']} token "
        f"({f['identity_token_refreshes']} refreshes) + {f['identity_discovery_requests']} OIDC discovery "
        f"+ {f['identity_other_requests']} other"
    )
    report_rest(f)


if __name__ == "__main__":
    sys.exit(
        main(
            Benchmark(
                name="extract_outlook",
                database=BENCH_DATABASE,
                cache_prefix="tasklift-bench-outlook",
                bench=bench,
                report=report,
                require_tls=True,
            ),
            parse_args(__doc__),
        )
    )
