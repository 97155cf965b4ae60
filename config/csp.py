"""The Content-Security-Policy's violation reports: the browser posts one to /csp-report/ for everything the
policy blocked. Each is logged as one line at WARNING (the policy itself is in config/settings.py).

The endpoint takes anyone's posts, so it is bounded: a body over CSP_REPORT_MAX_BYTES is a 413 unread,
more than CSP_REPORTS_PER_MINUTE from one client address within a sliding minute a 429 (a 503 while Redis
cannot be reached to count them), and what is logged is cut short, with the query strings of URLs (which may
hold an OAuth code or a token) left out.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.counting import Counter, CountingUnavailable, CountRefused, count_take, counter_key
from accounts.throttle import client_address
from config.unavailable import RETRY_AFTER_S

logger = logging.getLogger("tasklift.csp")

FIELD_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@csrf_exempt  # browsers send reports without cookies or tokens
@require_POST
def csp_report(request: HttpRequest) -> HttpResponse:
    """Log the violations a browser reports; 204, whatever they say."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.CSP_REPORT_MAX_BYTES:
        return HttpResponse(status=413)
    counter = Counter(
        key=counter_key("csp-report", client_address(request)),
        limit=settings.CSP_REPORTS_PER_MINUTE,
        window_s=settings.RATE_WINDOW_SECONDS,
    )
    try:
        count_take(counter)
    except CountRefused as refusal:
        return HttpResponse(status=429, headers={"Retry-After": str(refusal.retry_after)})
    except CountingUnavailable:
        return HttpResponse(status=503, headers={"Retry-After": str(RETRY_AFTER_S)})
    try:
        reports = _violations(json.loads(request.body[: settings.CSP_REPORT_MAX_BYTES]))
    except ValueError:
        return HttpResponse(status=400)
    for report in reports:
        logger.warning(
            "csp violation: %s blocked %s on %s (%s:%s)",
            _field(
                report.get("effective-directive")
                or report.get("effectiveDirective")
                or report.get("violated-directive")
            ),
            _url(report.get("blocked-uri") or report.get("blockedURL")),
            _url(report.get("document-uri") or report.get("documentURL")),
            _url(report.get("source-file") or report.get("sourceFile")),
            _field(report.get("line-number") or report.get("lineNumber")),
        )
    return HttpResponse(status=204)


def _violations(data: Any) -> list[dict[str, Any]]:
    """The reports of a body: `{"csp-report": {...}}` (report-uri) or the Reporting API's list of
    `{"type": "csp-violation", "body": {...}}`."""
    if isinstance(data, dict) and isinstance(data.get("csp-report"), dict):
        return [data["csp-report"]]
    if isinstance(data, list):
        return [
            item["body"]
            for item in data[:10]
            if isinstance(item, dict) and item.get("type") == "csp-violation" and isinstance(item.get("body"), dict)
        ]
    raise ValueError("not a CSP report")


def _field(value: Any) -> str:
    return _CONTROL.sub(" ", str(value if value is not None else "-"))[:FIELD_CHARS]


def _url(value: Any) -> str:
    """A URL without its query and fragment ("inline", "eval" and the like as they are)."""
    text = _field(value)
    parts = urlsplit(text)
    if parts.scheme in ("http", "https"):
        return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return text
