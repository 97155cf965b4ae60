"""At most EXTRACTION_RUNS_PER_MINUTE requested runs a minute per person ("Extract now" on the page, reading
set-aside mail again, the API), in a sliding window on the shared Redis (accounts/counting.py), so that every
web process sees the same count and no window edge lets a second minute's worth through at once. While Redis
cannot be reached nothing can be counted, so no run is requested: a 503 with Retry-After."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from accounts.counting import Counter, CountingUnavailable, CountRefused, count_take, counter_key
from accounts.throttle import client_address
from config.errors import RateLimitedError
from config.unavailable import unavailable

GROUP = "extraction-request"


def extraction_request_counter(request: HttpRequest) -> Counter:
    """The person's counter (or, signed out, their address's)."""
    user = getattr(request, "user", None)
    who = f"user:{user.pk}" if user is not None and user.is_authenticated else client_address(request)
    return Counter(
        key=counter_key(GROUP, who), limit=settings.EXTRACTION_RUNS_PER_MINUTE, window_s=settings.RATE_WINDOW_SECONDS
    )


def extraction_rate_check(*, request: HttpRequest) -> None:
    """Count this request; raise RateLimitedError (with seconds to wait) past the limit, UnavailableError
    while Redis is out of reach."""
    try:
        count_take(extraction_request_counter(request))
    except CountRefused as refusal:
        raise RateLimitedError(
            f"You can start at most {settings.EXTRACTION_RUNS_PER_MINUTE} extractions a minute. "
            f"Try again in {refusal.retry_after} seconds.",
            retry_after=refusal.retry_after,
        ) from None
    except CountingUnavailable:
        raise unavailable() from None
