from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from config.errors import ApplicationError, RateLimitedError
from config.http import is_htmx, request_user
from extraction.models import ExtractionRun
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_get
from extraction.services import extraction_run_request


@login_required
@require_POST
def extract_now(request: HttpRequest) -> HttpResponse:
    """The "Extract now" button: queue a run (at most EXTRACTION_RUNS_PER_MINUTE a minute) and show it."""
    try:
        extraction_rate_check(request=request)
    except RateLimitedError as error:
        context = {"retry_after": error.retry_after, "limit": settings.EXTRACTION_RUNS_PER_MINUTE}
        if is_htmx(request):
            # Beside the runs' status, not instead of it: the queued run keeps showing how it goes.
            response = render(request, "extraction/_limited.html", context, status=429)
            response["HX-Retarget"] = "#rate-limit"
            response["HX-Reswap"] = "outerHTML"
        else:
            response = render(request, "extraction/limited.html", context, status=429)
        response["Retry-After"] = str(error.retry_after)
        return response
    run, _ = extraction_run_request(user=request_user(request), trigger=ExtractionRun.Trigger.MANUAL)
    if is_htmx(request):
        return render(request, "extraction/_run_started.html", {"run": run}, status=202)
    messages.info(request, "Extraction started.")
    return redirect("home")


@login_required
@require_GET
def run_status(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_get(user=request_user(request), run_id=run_id)
    except ApplicationError as error:
        return HttpResponse(error.message, status=error.status)
    response = render(request, "extraction/_run.html", {"run": run})
    if run.is_finished:
        response["HX-Trigger"] = "tasksChanged"
    return response
