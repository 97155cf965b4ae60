"""What an operator watches: every Prometheus metric of Tasklift, and `/metrics`, which serves them.

Counters and the histogram are written by whichever process does the work (gunicorn's workers, Celery's
pool processes) into files under PROMETHEUS_MULTIPROC_DIR, one set per process (prometheus_client's
multiprocess mode), and `/metrics` sums every file of that directory. That directory must be one for the
whole deployment on a machine and emptied when the deployment starts, before any process (`manage.py
metrics_clear`): a process that ends leaves its file, so that its counts stay in the totals, and without
that emptying the files of every process since the first start would pile up (a new process of a pid seen
before even carries on from that one's counts). A Celery worker on another machine writes its own directory,
which a web process there must serve.

The gauges are read when Prometheus asks, never kept: the mailboxes behind from one aggregate statement
over the mailboxes table, and the queue's length from one Redis LLEN.

Labels are bounded: a trigger, a status, a provider, a kind. Never a person, a mailbox or an address.
"""

from __future__ import annotations

import hmac
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.version import version

# prometheus_client chooses between one process and many when it is first imported: the settings name the
# directory before that (and they set the variable for the processes this one starts).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(settings.PROMETHEUS_MULTIPROC_DIR))

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from extraction.models import ExtractionRun

logger = logging.getLogger(__name__)

# Definitions -------------------------------------------------------------------------------------------
RUNS = Counter(
    "tasklift_extraction_runs",
    "Extraction runs ended, by trigger and outcome (the run's status).",
    ["trigger", "outcome"],
)
RUN_EMAILS = Counter(
    "tasklift_extraction_emails",
    "Emails of ended runs, by what became of them (the run record's counts): fetched, already_done, "
    "sent_to_llm, skipped_bulk, quarantined (set aside).",
    ["kind"],
)
RUN_TASKS = Counter("tasklift_extraction_tasks_created", "Tasks created by ended runs.")
RUN_TASKS_UNGROUNDED = Counter(
    "tasklift_extraction_tasks_ungrounded",
    "Tasks Gemini gave in ended runs whose sentence is not in their email (not kept): a rise is the model, or "
    "the prompt, going wrong.",
)
GEMINI_CALLS = Counter(
    "tasklift_gemini_calls",
    "Gemini generateContent requests, by outcome: ok, rate_limited (429), server_error, client_error, timeout, "
    "transport_error.",
    ["outcome"],
)
GEMINI_TOKENS = Counter("tasklift_gemini_tokens", "Tokens Gemini billed, by kind: prompt, output.", ["kind"])
GEMINI_SECONDS = Histogram(
    "tasklift_gemini_call_seconds",
    "How long one Gemini request took, answered or not.",
    buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
REAPER = Counter(
    "tasklift_extraction_reaped_runs",
    "Runs the reaper took up: requeued (a dead runner's, or a queued job no worker took), given_up.",
    ["outcome"],
)
PUSH_RINGS = Counter(
    "tasklift_push_rings",
    "Doorbell notifications received, by provider and outcome: accepted, refused (a bad token or clientState), "
    "unknown (no mailbox or subscription of ours: acknowledged, ignored), malformed.",
    ["provider", "outcome"],
)

INBOUND = Counter(
    "tasklift_inbound_messages",
    "Messages sent to forward-to addresses, by way in (smtp, webhook) and outcome: accepted, or why refused "
    "(unknown_recipient, not_the_person, not_aligned, no_consent, too_big, rate_person, rate_sender, queue_full, "
    "dns_temporary, unavailable, malformed).",
    ["via", "outcome"],
)

HTTP_REQUESTS = Counter(
    "tasklift_http_requests",
    "Requests answered by the web, by route (the URL pattern, `unmatched` for none), method and status.",
    ["route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "tasklift_http_request_seconds",
    "How long the web took to answer a request, by route.",
    ["route"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
HTTP_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}  # any other: `other` (bounded labels)

RUN_COUNTS = {
    "fetched": "emails_fetched",
    "already_done": "emails_already_done",
    "sent_to_llm": "emails_sent_to_llm",
    "skipped_bulk": "emails_skipped",
    "quarantined": "emails_quarantined",
}


def run_ended(run: ExtractionRun) -> None:
    """Count a run that has just ended, with what its record says it did (its counts summed over all its
    deliveries), once: by the delivery that ended it."""
    if not run.is_finished:
        return
    RUNS.labels(run.trigger, run.status).inc()
    for kind, field in RUN_COUNTS.items():
        RUN_EMAILS.labels(kind).inc(getattr(run, field))
    RUN_TASKS.inc(run.tasks_created)
    RUN_TASKS_UNGROUNDED.inc(run.tasks_ungrounded)


def http_request_observed(request: HttpRequest, status: int, started: float) -> None:
    """One request answered: its route's pattern (never its path, which holds ids and tokens), method, status."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.route:
        route = str(match.route)
    elif request.path.startswith(settings.STATIC_URL):
        route = "static"  # WhiteNoise's, answered before any URL is resolved
    else:
        route = "unmatched"
    method = request.method if request.method in HTTP_METHODS else "other"
    HTTP_REQUESTS.labels(route=route, method=method, status=str(status)).inc()
    HTTP_SECONDS.labels(route=route).observe(time.monotonic() - started)


class HttpMetricsMiddleware:
    """First of the middleware: every request the web answers, static files and 503s included, is counted."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        response = self.get_response(request)
        http_request_observed(request, response.status_code, started)
        return response


def push_rings_count(provider: str, **outcomes: int) -> None:
    """Doorbell notifications of `provider`, counted by outcome (accepted=2, refused=1...)."""
    for outcome, count in outcomes.items():
        PUSH_RINGS.labels(provider, outcome).inc(count)


def inbound_count(via: str, outcome: str) -> None:
    """One message sent to a forward-to address, taken (`accepted`) or refused for `outcome`."""
    INBOUND.labels(via, outcome).inc()


def gemini_call_observed(started: float, *, status: int | None, timed_out: bool = False) -> None:
    """One Gemini request, started at `started` (time.monotonic), answered with HTTP `status` (None: no answer)."""
    GEMINI_SECONDS.observe(time.monotonic() - started)
    if timed_out or status in (408, 504):
        outcome = "timeout"
    elif status is None:
        outcome = "transport_error"
    elif status == 429:
        outcome = "rate_limited"
    elif status >= 500:
        outcome = "server_error"
    elif status >= 400:
        outcome = "client_error"
    else:
        outcome = "ok"
    GEMINI_CALLS.labels(outcome).inc()


def metrics_dir_clear() -> Path:
    """Empty PROMETHEUS_MULTIPROC_DIR (making it when missing). Only when no process of the deployment runs."""
    path = Path(settings.PROMETHEUS_MULTIPROC_DIR)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


# Read at scrape time -----------------------------------------------------------------------------------
class MailboxesBehind(Collector):
    """How far behind the active mailboxes are, and how many wait on a provider or a person. One statement,
    an aggregate over the mailboxes table grouped by provider (a scan of one row per connected mailbox: no
    index serves five aggregates at once, and the table is small beside the runs and the ledger)."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, F, Min, Q
        from django.db.models.functions import Coalesce
        from django.utils import timezone

        from integrations.models import Integration

        now = timezone.now()
        active = Q(status=Integration.Status.ACTIVE)
        rows = (
            Integration.objects.values("provider")
            .order_by("provider")
            .annotate(
                oldest_read=Min(Coalesce("last_success_at", "created_at"), filter=active),
                # A ring after the last successful read: mail the provider said is there and no run has read.
                oldest_ring=Min(
                    "notified_at",
                    filter=active & (Q(last_success_at__isnull=True) | Q(notified_at__gt=F("last_success_at"))),
                ),
                throttled=Count("pk", filter=active & Q(retry_after__gt=now)),
                reconnect=Count("pk", filter=Q(status=Integration.Status.NEEDS_REAUTH)),
                active=Count("pk", filter=active),
            )
        )
        read_age = GaugeMetricFamily(
            "tasklift_mailbox_oldest_read_age_seconds",
            "Seconds since the least recently read active mailbox was last read successfully (or connected).",
            labels=["provider"],
        )
        ring_age = GaugeMetricFamily(
            "tasklift_mailbox_oldest_unread_ring_age_seconds",
            "Seconds since the oldest doorbell ring no successful read has followed yet (0: none waits).",
            labels=["provider"],
        )
        throttled = GaugeMetricFamily(
            "tasklift_mailboxes_throttled", "Active mailboxes a provider asked to wait.", labels=["provider"]
        )
        reconnect = GaugeMetricFamily(
            "tasklift_mailboxes_needing_reconnect",
            "Mailboxes whose access was refused: left out of runs until their owner reconnects them.",
            labels=["provider"],
        )
        active_count = GaugeMetricFamily("tasklift_mailboxes_active", "Active mailboxes.", labels=["provider"])
        for row in rows:
            provider = [row["provider"]]
            oldest_read, oldest_ring = row["oldest_read"], row["oldest_ring"]
            read_age.add_metric(provider, (now - oldest_read).total_seconds() if oldest_read else 0.0)
            ring_age.add_metric(provider, (now - oldest_ring).total_seconds() if oldest_ring else 0.0)
            throttled.add_metric(provider, row["throttled"])
            reconnect.add_metric(provider, row["reconnect"])
            active_count.add_metric(provider, row["active"])
        yield from (read_age, ring_age, throttled, reconnect, active_count)


class InboundWaiting(Collector):
    """Forwarded messages stored and not yet read: how many, and the oldest one's age (a stuck reader shows here)."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, Min
        from django.utils import timezone

        from integrations.models import InboundMessage

        row = InboundMessage.objects.aggregate(count=Count("pk"), oldest=Min("received_at"))
        yield GaugeMetricFamily(
            "tasklift_inbound_waiting", "Forwarded messages stored, not yet read.", value=int(row["count"])
        )
        oldest = row["oldest"]
        yield GaugeMetricFamily(
            "tasklift_inbound_oldest_waiting_age_seconds",
            "Seconds the oldest stored forwarded message has waited (0: none waits).",
            value=(timezone.now() - oldest).total_seconds() if oldest else 0.0,
        )


class QueueLength(Collector):
    """Jobs waiting in the Celery queue (Redis LLEN of it): those no worker has taken yet."""

    def collect(self) -> Iterator[Metric]:
        from config.celery import app

        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        # A connection of the app's pool, kept between scrapes: opening one costs more than the LLEN.
        with app.pool.acquire(block=True, timeout=2) as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
            length = connection.default_channel.client.llen(queue)
        yield GaugeMetricFamily("tasklift_queue_length", "Jobs waiting in the Celery queue.", value=int(length))


class Guarded(Collector):
    """A collector whose failure (the database or Redis down) leaves its metrics out of the scrape, not the
    whole scrape: the counters still answer, and `tasklift_scrape_part_up` says which part failed."""

    def __init__(self, parts: dict[str, Collector]) -> None:
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "tasklift_scrape_part_up", "1 when this part of the scrape could be read.", labels=["part"]
        )
        for name, part in self.parts.items():
            try:
                collected = list(part.collect())
            except Exception as exc:  # the scrape reports each failure instead of raising
                logger.warning("metrics: %s could not be read (%s)", name, type(exc).__name__)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from collected
        yield up


class BuildInfo(Collector):
    """`tasklift_build_info{version="0.2.0"} 1`: which release answers (config/version.py)."""

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("tasklift_build_info", "The Tasklift release this web runs.", labels=["version"])
        info.add_metric([version()], 1)
        yield info


def metrics_registry() -> CollectorRegistry:
    """What one scrape reads: the counters of every process, the gauges read now, and the release."""
    registry = CollectorRegistry()
    registry.register(BuildInfo())
    MultiProcessCollector(registry, path=str(settings.PROMETHEUS_MULTIPROC_DIR))  # type: ignore[no-untyped-call]
    registry.register(Guarded({"mailboxes": MailboxesBehind(), "inbound": InboundWaiting(), "queue": QueueLength()}))
    return registry


# The endpoint ------------------------------------------------------------------------------------------
LOOPBACK = {"127.0.0.1", "::1"}


def _refusal(request: HttpRequest) -> JsonResponse | None:
    """With METRICS_TOKEN set: 401 unless the request carries it as a bearer token. Without it: refused in
    production (403, saying what to set); open to loopback only in development."""
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(offered.strip().encode(), token.encode()):
            return None
        refused = _error(401, "metrics_unauthorized", "Send the metrics token as 'Authorization: Bearer <token>'.")
        refused["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return refused
    if settings.PRODUCTION:
        return _error(403, "metrics_token_missing", "Metrics are off: set METRICS_TOKEN to serve them.")
    if request.META.get("REMOTE_ADDR") not in LOOPBACK:
        return _error(403, "metrics_loopback_only", "Without METRICS_TOKEN, metrics are served to this machine only.")
    return None


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"code": code, "message": message, "extra": {}}, status=status)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_PLAIN_0_0_4)
