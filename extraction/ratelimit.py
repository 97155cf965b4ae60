"""At most EXTRACTION_RUNS_PER_MINUTE requested runs a minute per person, counted in the shared Redis
cache so that every web process sees the same count."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage

from config.errors import RateLimitedError

GROUP = "extraction-request"


def extraction_rate_check(*, request: HttpRequest) -> None:
    """Count this request; raise RateLimitedError (with seconds to wait) past the limit."""
    usage = get_usage(
        request,
        group=GROUP,
        key="user_or_ip",
        rate=f"{settings.EXTRACTION_RUNS_PER_MINUTE}/m",
        method="POST",
        increment=True,
    )
    if usage is not None and usage["should_limit"]:
        retry_after = max(1, int(usage["time_left"]))
        raise RateLimitedError(
            f"You can start at most {settings.EXTRACTION_RUNS_PER_MINUTE} extractions a minute. "
            f"Try again in {retry_after} seconds.",
            retry_after=retry_after,
        )
