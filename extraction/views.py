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
from extraction.controls import NoConsentError, RunFinishedError, extraction_consent_check, extraction_run_cancel
from extraction.looking import run_changes_of
from extraction.models import ExtractionRun
from extraction.muting import sender_mute, sender_unmute
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_get
from extraction.services import extraction_run_request
from tasks.selectors import task_get


@login_required
@require_POST
def extract_now(request: HttpRequest) -> HttpResponse:
    """The "Extract now" button: queue a run (at most EXTRACTION_RUNS_PER_MINUTE a minute) and show it. Without AI
    consent: say so at once, with the way to give it, and queue nothing."""
    try:
        extraction_consent_check(user=request_user(request))
    except NoConsentError as error:
        if is_htmx(request):
            # Beside the run line (in the slot of the rate limit's refusal), which keeps showing the last run.
            # A 400: the one refusal status, with 429, that the page's htmx swaps in (base.html).
            response = render(request, "extraction/_no_consent.html", status=400)
            response["HX-Retarget"] = "#rate-limit"
            response["HX-Reswap"] = "outerHTML"
            return response
        messages.error(request, error.message)
        return redirect("consent")
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
    if not run.is_finished:
        return render(request, "extraction/_run.html", {"run": run})
    # The run has just ended for this page: the list is drawn again, and a task the run closed or re-dated
    # leaves a notice with its Undo, as Done by hand does (the run line names each too).
    response = render(request, "extraction/_run_ended.html", {"run": run, "changed": run_changes_of(run=run)})
    response["HX-Trigger"] = "tasksChanged"
    return response


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop on the run line: the run ends at its next batch boundary (a queued one at once). htmx gets the run
    line as it stands now; without JavaScript, the list, saying so."""
    user = request_user(request)
    try:
        run = extraction_run_cancel(user=user, run_id=run_id)
    except RunFinishedError:
        run = run_get(user=user, run_id=run_id)  # ended before the press: the line tells how
    except ApplicationError as error:
        return HttpResponse(error.message, status=error.status)
    if is_htmx(request):
        response = render(request, "extraction/_run.html", {"run": run})
        if run.is_finished:  # as run_status answers a finished run: the list shows what it wrote
            response["HX-Trigger"] = "tasksChanged"
        return response
    if run.status == ExtractionRun.Status.CANCELLED:
        messages.info(request, "The read was stopped. Your new mail will be read next time.")
    elif run.is_finished:
        messages.info(request, "The read had already finished.")
    else:
        messages.info(request, "The read stops after the batch it is reading; what it found is kept.")
    return redirect("home")


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
