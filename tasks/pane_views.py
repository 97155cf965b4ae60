"""The reading pane's view: one task's email, read from its mailbox now (tasks.reading). htmx puts the pane into
the list page's dialog; without JavaScript it is a page of its own. Another person's task is a 404; a provider
that fails is a message in the pane, with the link that opens the email at the provider."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.errors import NotFoundError
from config.http import is_htmx, request_user
from tasks.reading import EmailUnavailable, task_email_read
from tasks.selectors import task_get


@login_required
@require_GET
@never_cache  # the email's text: kept by no cache, the browser's included
def task_email_pane(request: HttpRequest, task_id: int) -> HttpResponse:
    try:
        task = task_get(user=request_user(request), task_id=task_id)
    except NotFoundError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        raise Http404(error.message) from error
    context: dict[str, object] = {"task": task}
    try:
        context["reading"] = task_email_read(task=task)
    except EmailUnavailable as error:
        context["problem"] = error
    template = "tasks/_email_pane.html" if is_htmx(request) else "tasks/email.html"
    return render(request, template, context)
