from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from config.errors import ApplicationError, RateLimitedError
from config.http import is_htmx, request_user
from extraction.models import ExtractionRun
from extraction.muting import sender_mute, sender_unmute
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_get
from extraction.services import extraction_run_request
from tasks.selectors import task_get


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


def _back(request: HttpRequest) -> HttpResponse:
    """Back to the page the person was on (the list with its filters), or home."""
    referer = request.headers.get("Referer", "")
    if url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(referer)
    return redirect("home")


@login_required
@require_POST
def mute_sender(request: HttpRequest, task_id: int) -> HttpResponse:
    """ "Never make tasks from this sender" on a task, "Not a task" on a dismissed one."""
    user = request_user(request)
    try:
        muted = sender_mute(user=user, task=task_get(user=user, task_id=task_id), reason=request.POST.get("reason", ""))
    except ApplicationError as error:
        messages.error(request, error.message)
        return _back(request)
    messages.success(request, f"Tasklift will make no more tasks from {muted.address}. You can undo this in Settings.")
    return _back(request)


@login_required
@require_POST
def unmute_sender(request: HttpRequest, muted_id: int) -> HttpResponse:
    try:
        address = sender_unmute(user=request_user(request), muted_id=muted_id)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("settings")
    messages.success(request, f"Mail from {address} is read again from the next run on.")
    return redirect("settings")
