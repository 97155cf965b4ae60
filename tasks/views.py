from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.models import User
from accounts.selectors import consent_current
from config.errors import ApplicationError
from config.http import is_htmx, request_user
from extraction.selectors import run_latest
from integrations.selectors import integration_list
from tasks.forms import TaskForm
from tasks.models import Task
from tasks.selectors import task_get, task_list
from tasks.services import task_create, task_set_status


def _home_context(user: User, form: TaskForm | None = None) -> dict[str, object]:
    return {
        "tasks": task_list(user=user)[:200],
        "form": form or TaskForm(),
        "consent": consent_current(user=user),
        "integrations": list(integration_list(user=user)),
        "run": run_latest(user=user),
    }


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "tasks/home.html", _home_context(request_user(request)))


@login_required
@require_GET
def task_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "tasks/_task_list.html", {"tasks": task_list(user=request_user(request))[:200]})


@login_required
@require_POST
def task_add(request: HttpRequest) -> HttpResponse:
    form = TaskForm(request.POST)
    if form.is_valid():
        try:
            task_create(
                user=request_user(request),
                title=form.cleaned_data["title"],
                due_date=form.cleaned_data["due_date"],
                priority=form.cleaned_data["priority"] or "",
            )
        except ApplicationError as error:
            form.add_error("title", error.message)
        else:
            messages.success(request, "Task added.")
            return redirect("home")
    return render(request, "tasks/home.html", _home_context(request_user(request), form), status=400)


@login_required
@require_POST
def task_status(request: HttpRequest, task_id: int) -> HttpResponse:
    status = request.POST.get("status", "")
    try:
        task = task_get(user=request_user(request), task_id=task_id)
        task_set_status(task=task, status=status)
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        messages.error(request, error.message)
        return redirect("home")
    if is_htmx(request):
        return HttpResponse("")  # the row is removed from the open list
    messages.success(request, "Task marked done." if status == Task.Status.DONE else "Task updated.")
    return redirect("home")
