"""The task list pages: list, group, search and filter, a page at a time ("Load more"); add, edit in place,
done / dismiss with undo, bulk; and the cheap endpoint an open list polls to show new tasks and runs
without a reload."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.consent import CONSENT_VERSION
from accounts.models import User
from accounts.selectors import consent_in_force
from config.errors import ApplicationError
from config.http import is_htmx, request_user
from config.pagination import InvalidCursor
from extraction.looking import run_changes_of, runs_looked_at
from extraction.models import ExtractionRun
from extraction.selectors import run_latest
from integrations.models import Integration
from integrations.selectors import integration_list
from tasks.forms import TaskEditForm, TaskForm
from tasks.models import Task
from tasks.quickadd import quick_add_resolve
from tasks.selectors import (
    task_count,
    task_due_counts,
    task_earlier,
    task_earlier_count,
    task_get,
    task_list_version,
    task_page,
)
from tasks.services import (
    task_bulk_set_status,
    task_create,
    task_event_undo,
    task_set_status,
    task_suggestion_answer,
    task_update,
)

PAGE_SIZE = 50  # tasks a page shows; "Load more" (or scrolling to it) appends the next
REFRESH_LIMIT = 500  # tasks a list that loaded several pages shows again when it refreshes itself
EARLIER_LIMIT = 200  # tasks "From before you connected" shows (its heading counts them all)
MAX_CURSOR_CHARS = 300
UNDO_SESSION_KEY = "task_undo"

# Filters ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """What the list shows: a status tab, a search, a mailbox, a source, a kind. Read from the query string.

    Open items waiting for someone else are their own view (`kind=waiting`, the "Waiting for" tab): the open
    list without a kind is the person's own to-dos (asked of them, promised by them). Done and Dismissed
    show every kind."""

    status: str = Task.Status.OPEN
    query: str = ""
    mailbox: int | None = None
    source: str = ""
    kind: str = ""

    @classmethod
    def from_request(cls, request: HttpRequest) -> Filters:
        status = request.GET.get("status", "")
        mailbox = request.GET.get("mailbox", "")
        source = request.GET.get("source", "")
        kind = request.GET.get("kind", "")
        return cls(
            status=status if status in Task.Status.values else Task.Status.OPEN,
            query=request.GET.get("q", "").strip()[:200],
            mailbox=int(mailbox) if mailbox.isdigit() else None,
            source=source if source in Task.Source.values else "",
            kind=kind if kind in Task.Kind.values else "",
        )

    @property
    def querystring(self) -> str:
        """'?status=done&q=…' with only what differs from the default (the empty string when nothing does)."""
        return self.querystring_with()

    def querystring_with(self, **extra: str) -> str:
        """The querystring, with `extra` parameters (a page's cursor) after the filters."""
        params = {
            "status": self.status if self.status != Task.Status.OPEN else "",
            "q": self.query,
            "mailbox": str(self.mailbox) if self.mailbox is not None else "",
            "source": self.source,
            "kind": self.kind,
            **extra,
        }
        params = {k: v for k, v in params.items() if v}
        return "?" + urlencode(params) if params else ""

    @property
    def active(self) -> bool:
        return bool(self.query or self.mailbox is not None or self.source)

    @property
    def waiting(self) -> bool:
        """The "Waiting for" view: open items the person waits for from others."""
        return self.status == Task.Status.OPEN and self.kind == Task.Kind.WAITING

    @property
    def kinds(self) -> tuple[str, ...]:
        if self.kind:
            return (self.kind,)
        return OWN_KINDS if self.status == Task.Status.OPEN else ()


OWN_KINDS = (Task.Kind.ASK.value, Task.Kind.COMMITMENT.value)


@dataclass
class Group:
    key: str
    label: str
    tasks: list[Task] = field(default_factory=list)
    continued: bool = False  # the group went on from the page before: its heading is there already
    count: int | None = None  # all its tasks, on this page and the others
    loaded: bool = True  # its rows are here ("From before you connected" collapsed: only its count, rows on opening)


GROUP_LABELS = {"overdue": "Overdue", "today": "Today", "upcoming": "Upcoming", "no_date": "No date"}
CLOSED_LABELS: dict[str, str] = {Task.Status.DONE: "Done", Task.Status.DISMISSED: "Dismissed"}


def _due_group(due: date | None, today: date) -> str:
    if due is None:
        return "no_date"
    if due < today:
        return "overdue"
    return "today" if due == today else "upcoming"


def _groups(tasks: list[Task], filters: Filters, user: User, *, continues: str = "") -> list[Group]:
    """Open tasks by when they are due, "today" in the person's time zone (activated per request); the
    selector's order (due date, then the email's received time, newest first) holds within each group.
    `continues` is the group the page before ended with. Each heading shown gets its group's count of
    every page (one statement, and none on a page that starts no group)."""
    if filters.status != Task.Status.OPEN:
        if not tasks:
            return []
        group = Group(
            filters.status, CLOSED_LABELS.get(filters.status, ""), tasks, continued=continues == filters.status
        )
        if not group.continued:
            group.count = task_count(user=user, status=filters.status, **_search(filters))
        return [group]
    today = timezone.localdate()
    groups = {key: Group(key, label) for key, label in GROUP_LABELS.items()}
    for task in tasks:
        groups[_due_group(task.due_date, today)].tasks.append(task)
    shown = [group for group in groups.values() if group.tasks]
    if shown and shown[0].key == continues:
        shown[0].continued = True
    if any(not group.continued for group in shown):
        counts = task_due_counts(user=user, today=today, earlier=False, **_search(filters))
        for group in shown:
            group.count = counts[group.key]
    return shown


def _earlier_group(user: User, filters: Filters, *, rows: bool) -> Group | None:
    """The tasks from mail received before its mailbox was connected and past due by then, under one collapsed
    heading above the others, on the first page only (issue 23: a first day does not open on "Overdue 5").
    Collapsed, it costs its count alone: its rows are fetched when it is opened (`task_earlier_rows`). With
    `rows` (a search opens it; a refresh of a list where it was open keeps it so) they come with the page."""
    if not rows:
        count = task_earlier_count(user=user, **_search(filters))
        return Group("earlier", "From before you connected", count=count, loaded=False) if count else None
    tasks, count = task_earlier(user=user, limit=EARLIER_LIMIT, **_search(filters))
    return Group("earlier", "From before you connected", tasks, count=count) if tasks else None


def _search(filters: Filters) -> dict[str, Any]:
    return {"query": filters.query, "integration_id": filters.mailbox, "source": filters.source, "kinds": filters.kinds}


def _list_context(
    user: User,
    filters: Filters,
    integrations: list[Integration] | None = None,
    *,
    after: str = "",
    up_to: str = "",
    continues: str = "",
    earlier_open: bool = False,
) -> dict[str, object]:
    """A page of the list: the first, the one `after` a cursor, or (a refresh of a list that loaded more)
    everything `up_to` the last task it showed. Raises InvalidCursor for a cursor that is not one."""
    page = task_page(
        user=user,
        status=filters.status,
        size=PAGE_SIZE,
        after=after,
        up_to=up_to,
        up_to_limit=REFRESH_LIMIT,
        earlier=False if filters.status == Task.Status.OPEN else None,
        **_search(filters),
    )
    groups = _groups(page.rows, filters, user, continues=continues)
    return {
        "earlier": (
            _earlier_group(user, filters, rows=earlier_open or filters.active)
            if filters.status == Task.Status.OPEN and not after
            else None
        ),
        "tasks": page.rows,
        "groups": groups,
        "filters": filters,
        "has_integrations": bool(integrations) if integrations is not None else None,
        "page": page,
        "after": after,
        "more_query": filters.querystring_with(after=page.next, group=groups[-1].key) if page.next else "",
    }


# Live updates -------------------------------------------------------------------------------------


def _live_version(user: User) -> tuple[str, ExtractionRun | None]:
    """A short token that changes when any of the person's tasks or their latest run changes (two queries,
    each reading one row through an index): '<tasks part>_<run part>'."""
    tasks_part = task_list_version(user=user)
    run = run_latest(user=user)
    run_part = f"{run.pk}.{run.status}.{int(run.updated_at.timestamp() * 1_000_000)}" if run else "none"
    return f"{tasks_part}_{run_part}", run


def _was_running(old_run: str, shown: str, run: ExtractionRun) -> bool:
    """Whether the page's last look (`old_run`, the run part of its version) saw `run` before its end: another
    run, or this one queued or running; and its run line (`shown`: the run and status it draws) has not shown
    the end either (its own poll then left the notice)."""
    pk, _, rest = old_run.partition(".")
    if shown == f"{run.pk}.{run.status}":
        return False
    return pk != str(run.pk) or rest.partition(".")[0] not in ExtractionRun.FINISHED


@login_required
@require_GET
def task_changes(request: HttpRequest) -> HttpResponse:
    """Polled every few seconds by an open list: 204 when nothing changed; otherwise a new poller, the
    latest run's status when it changed, and a `tasksChanged` event when the tasks did (the list then
    fetches itself again with its filters)."""
    version, run = _live_version(request_user(request))
    old_tasks, _, old_run = request.GET.get("v", "").partition("_")
    new_tasks, _, new_run = version.partition("_")
    if (old_tasks, old_run) == (new_tasks, new_run):
        return HttpResponse(status=204)
    context: dict[str, object] = {"version": version, "run": run, "run_changed": old_run != new_run}
    if run is not None and run.is_finished and _was_running(old_run, request.GET.get("run_shown", ""), run):
        # Its end, seen here before the run line's own poll saw it (which then stops): the notice of what the
        # run changed, as that poll would leave it; never left in silence.
        context["changed"] = run_changes_of(run=run)
    response = render(request, "tasks/_live.html", context)
    if old_tasks != new_tasks:
        response["HX-Trigger"] = "tasksChanged"
    return response


# Pages --------------------------------------------------------------------------------------------


def _cursor(request: HttpRequest, name: str) -> str:
    return request.GET.get(name, "")[:MAX_CURSOR_CHARS]


def _home_context(request: HttpRequest, form: TaskForm | None = None) -> dict[str, object]:
    user = request_user(request)
    filters = Filters.from_request(request)
    integrations = list(integration_list(user=user))
    version, run = _live_version(user)
    try:  # `after`: "Load more" followed without JavaScript, a page of its own
        listed = _list_context(user, filters, integrations, after=_cursor(request, "after"))
    except InvalidCursor as error:
        messages.error(request, error.message)
        listed = _list_context(user, filters, integrations)
    return {
        **listed,
        "form": form or TaskForm(),
        "consent": (consent := consent_in_force(user=user)),
        "consent_outdated": consent is not None and consent.text_version != CONSENT_VERSION,
        "integrations": integrations,
        "run": run,
        "version": version,
        "undo": request.session.pop(UNDO_SESSION_KEY, None),
        "status_tabs": [(s.value, s.label) for s in Task.Status],
        "source_choices": [(Task.Source.EMAIL_AI, "AI"), (Task.Source.MANUAL, "By hand")],
        "kind_choices": [(k.value, k.label) for k in Task.Kind],
    }


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    runs_looked_at(request=request, user=request_user(request))  # the run line sums from the last look
    return render(request, "tasks/home.html", _home_context(request))


@login_required
@require_GET
def task_list_partial(request: HttpRequest) -> HttpResponse:
    """The list again (a search, a filter, a refresh: as far as the person had loaded it, `upto`), or with
    `after` the next page's rows, which "Load more" puts in its own place."""
    user = request_user(request)
    filters = Filters.from_request(request)
    after = _cursor(request, "after")
    try:
        if after:
            continues = request.GET.get("group", "")
            context = _list_context(user, filters, after=after, continues=continues)
            return render(request, "tasks/_task_page.html", context)
        # `earlier=open`: the list's own refresh, sent while "From before you connected" was open (its input is
        # included only then, tasks/_earlier.html): it stays open, with its rows.
        earlier_open = request.GET.get("earlier") == "open"
        context = _list_context(user, filters, up_to=_cursor(request, "upto"), earlier_open=earlier_open)
    except InvalidCursor as error:
        return HttpResponse(error.message, status=error.status)
    response = render(request, "tasks/_task_list.html", context)
    if is_htmx(request) and request.headers.get("HX-Trigger") == "task-filters":
        response["HX-Push-Url"] = reverse("home") + filters.querystring  # a search can be bookmarked
    return response


@login_required
@require_GET
def task_earlier_rows(request: HttpRequest) -> HttpResponse:
    """The rows of "From before you connected", fetched when the person opens the group (with the list's
    filters, as the group's count was)."""
    user = request_user(request)
    filters = Filters.from_request(request)
    return render(
        request, "tasks/_earlier_rows.html", {"earlier": _earlier_group(user, filters, rows=True), "filters": filters}
    )


def _add_service_error(form: Form, error: ApplicationError) -> None:
    """Show a service's refusal on the field it names (invalid_due_date on the due date), or the form."""
    name = error.extra.get("field")
    form.add_error(name if name in form.fields else None, error.message)


@login_required
@require_POST
def task_add(request: HttpRequest) -> HttpResponse:
    form = TaskForm(request.POST)
    if form.is_valid():
        try:
            understood = quick_add_resolve(  # "Call Sam tomorrow 3pm" is due tomorrow (tasks/quickadd.py)
                user=request_user(request),
                title=form.cleaned_data["title"],
                due_date=form.cleaned_data["due_date"],
                keep_as_typed=form.cleaned_data["keep_as_typed"],
            )
            task_create(
                user=request_user(request),
                title=understood.title,
                due_date=understood.due_date,
                due_time=understood.at,  # "3pm": the task is due at 15:00 (in the person's time zone)
                priority=form.cleaned_data["priority"] or "",
                repeat=understood.repeat,  # "every month on the 1st"
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, "Task added.")
            return redirect("home")
    return render(request, "tasks/home.html", _home_context(request, form), status=400)


@login_required
@require_GET
def task_row(request: HttpRequest, task_id: int) -> HttpResponse:
    """One task's row (what "Cancel" on an edit puts back); without htmx, the task on a page of its own (where
    the digest's and the calendar's links lead)."""
    try:
        task = task_get(user=request_user(request), task_id=task_id)
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        return render(request, "404.html", status=404)
    return render(request, "tasks/_task.html" if is_htmx(request) else "tasks/task.html", {"task": task})


@login_required
@require_http_methods(["GET", "POST"])
def task_edit(request: HttpRequest, task_id: int) -> HttpResponse:
    """Edit title, notes, due date and priority: in place with htmx (the row becomes a form), or on a page
    of its own without JavaScript."""
    try:
        task = task_get(user=request_user(request), task_id=task_id)
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        messages.error(request, error.message)
        return redirect("home")
    template = "tasks/_task_edit.html" if is_htmx(request) else "tasks/edit.html"
    if request.method == "GET":
        return render(request, template, {"task": task, "form": TaskEditForm(task=task)})
    form = TaskEditForm(request.POST, task=task)
    if form.is_valid():
        try:
            task_update(
                task=task,
                title=form.cleaned_data["title"],
                notes=form.cleaned_data["notes"],
                due_date=form.cleaned_data["due_date"],
                due_time=form.cleaned_data["due_time"],
                priority=form.cleaned_data["priority"] or "",
                repeat=form.cleaned_data["repeat"] or "",
                reminder=form.cleaned_data["reminder"],
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            if not is_htmx(request):
                messages.success(request, "Task saved.")
                return redirect("home")
            response = render(request, "tasks/_task.html", {"task": task_get(user=task.user, task_id=task.pk)})
            response["HX-Trigger-After-Settle"] = "tasksChanged"  # a new due date may move it to another group
            return response
    return render(request, template, {"task": task, "form": form}, status=400)


STATUS_DONE_WORDS = {
    Task.Status.DONE: "marked done",
    Task.Status.DISMISSED: "dismissed",
    Task.Status.OPEN: "open again",
}


def _undo_notice(*, message: str, ids: list[int], previous: str) -> dict[str, object]:
    return {"message": message, "ids": ids, "previous": previous if previous in Task.Status.values else ""}


def _answer_with_undo(request: HttpRequest, notice: dict[str, object], *, refresh: bool) -> HttpResponse:
    """The undo notice: swapped into #undo by htmx, or kept in the session for the next page without it."""
    if not is_htmx(request):
        request.session[UNDO_SESSION_KEY] = notice
        back = request.POST.get("back", "")  # the tab and filters the person was on
        return redirect(reverse("home") + (back[:500] if back.startswith("?") else ""))
    response = render(request, "tasks/_undo.html", {"undo": notice})
    if refresh:
        response["HX-Trigger"] = "tasksChanged"
    return response


@login_required
@require_POST
def task_status(request: HttpRequest, task_id: int) -> HttpResponse:
    """Done, dismiss or reopen one task. With htmx the row goes and an undo notice comes (out of band)."""
    status = request.POST.get("status", "")
    try:
        task = task_get(user=request_user(request), task_id=task_id)
        previous = task.status
        task_set_status(task=task, status=status)
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        messages.error(request, error.message)
        return redirect("home")
    notice = _undo_notice(
        message=f"“{task.title}” {STATUS_DONE_WORDS[Task.Status(status)]}.", ids=[task.pk], previous=previous
    )
    if not is_htmx(request):
        return _answer_with_undo(request, notice, refresh=False)
    # The row is removed (the empty answer replaces it); the notice goes to #undo out of band.
    return render(request, "tasks/_undo.html", {"undo": notice, "oob": True})


MAX_TASK_ID = 2**63 - 1  # a task id is a PostgreSQL bigint: a longer number is no task's, not a 500


def _bulk_ids(values: list[str]) -> tuple[list[int], int]:
    """The task ids a bulk post names, and how many of its other values name no task at all (letters, signs,
    other digits than 0-9, numbers past any id); blank values name nothing."""
    ids: set[int] = set()
    garbled: set[str] = set()
    for value in values:
        value = value.strip()
        if value.isascii() and value.isdigit() and 0 < int(value) <= MAX_TASK_ID:
            ids.add(int(value))
        elif value:
            garbled.add(value)
    return sorted(ids), len(garbled)


def _bulk_left_out(count: int) -> str:
    """What a bulk post says of the tasks it named that are not (or no longer) the person's ("" for none)."""
    if not count:
        return ""
    if count == 1:
        return " 1 of the selected tasks is no longer there and was left out."
    return f" {count} of the selected tasks are no longer there and were left out."


@login_required
@require_POST
def task_bulk(request: HttpRequest) -> HttpResponse:
    """Done, dismiss or reopen the selected tasks; also what Undo posts (`undo=1`, back to `status`).

    Every answer has a message: ids of no task of the person's (deleted, another person's, or not ids at
    all) are counted and named, never silently dropped."""
    user = request_user(request)
    ids, garbled = _bulk_ids(request.POST.getlist("task_ids"))
    status = request.POST.get("status", "")
    undoing = request.POST.get("undo") == "1"
    if not ids:
        notice = _undo_notice(message="Select at least one task first.", ids=[], previous="")
        response = _answer_with_undo(request, notice, refresh=False)
        if is_htmx(request):
            response.status_code = 400  # the caller's mistake; htmx still swaps a 400 into #undo
        return response
    try:
        # Undo of the person's own Done or Dismiss puts back what they had: not a reopen by hand.
        count = task_bulk_set_status(user=user, task_ids=ids, status=status, by_hand=not undoing)
    except ApplicationError as error:
        notice = _undo_notice(message=error.message, ids=[], previous="")
        return _answer_with_undo(request, notice, refresh=False)
    not_found = len(ids) - count + garbled
    if not count:
        # Gone since the list was drawn (another tab, a run), or never the person's: the list is refreshed so
        # that rows of tasks no longer there leave it too.
        those = "That task is" if not_found == 1 else "Those tasks are"
        notice = _undo_notice(message=f"{those} no longer there: nothing was changed.", ids=[], previous="")
    elif undoing:
        notice = _undo_notice(message="Undone." + _bulk_left_out(not_found), ids=[], previous="")
    else:
        words = STATUS_DONE_WORDS[Task.Status(status)]
        message = f"{count} task{'s' if count != 1 else ''} {words}." + _bulk_left_out(not_found)
        notice = _undo_notice(message=message, ids=ids, previous=request.POST.get("previous", ""))
    return _answer_with_undo(request, notice, refresh=True)


# What an email did, undone; what it suggested, answered ------------------------------------------------


def _answer_with_row(request: HttpRequest, task: Task, message: str, *, undo_to: str = "") -> HttpResponse:
    """The task's row again, with a notice (out of band), and the list refreshed (the task may have moved to
    another tab or group). Without htmx: back to the list, the notice in the session."""
    notice = _undo_notice(message=message, ids=[task.pk] if undo_to else [], previous=undo_to)
    if not is_htmx(request):
        return _answer_with_undo(request, notice, refresh=False)
    task = task_get(user=task.user, task_id=task.pk)
    response = render(request, "tasks/_task_changed.html", {"task": task, "undo": notice})
    response["HX-Trigger"] = "tasksChanged"
    return response


def _refused(request: HttpRequest, error: ApplicationError) -> HttpResponse:
    """A refusal in the notice area, the row left as it is."""
    if not is_htmx(request):
        messages.error(request, error.message)
        return redirect("home")
    notice = _undo_notice(message=error.message, ids=[], previous="")
    response = render(request, "tasks/_undo.html", {"undo": notice}, status=error.status)
    response["HX-Retarget"] = "#undo"
    response["HX-Reswap"] = "outerHTML"
    return response


@login_required
@require_POST
def task_event_undo_view(request: HttpRequest, task_id: int, event_id: int) -> HttpResponse:
    """Undo what an email did to a task (closed it, moved its due date), from the Done view or its history."""
    try:
        task = task_event_undo(user=request_user(request), task_id=task_id, event_id=event_id)
    except ApplicationError as error:
        return _refused(request, error)
    message = f"Undone: “{task.title}” is as it was before that email."
    if request.POST.get("from") == "run" and is_htmx(request):
        # From the run line: the notice, the run line drawn again (out of band), and the list (the task is back).
        notice = _undo_notice(message=message, ids=[], previous="")
        run = run_latest(user=request_user(request))
        response = render(request, "tasks/_undo_from_run.html", {"undo": notice, "run": run})
        response["HX-Trigger"] = "tasksChanged"
        return response
    return _answer_with_row(request, task, message)


SUGGESTION_ANSWERS = {"accept": True, "dismiss": False}


@login_required
@require_POST
def task_suggestion(request: HttpRequest, task_id: int, event_id: int) -> HttpResponse:
    """Take (`answer=accept`: Mark done, or the new due date) or set aside (`answer=dismiss`) what an email
    suggested for a task the person had changed by hand."""
    answer = request.POST.get("answer", "")
    try:
        if answer not in SUGGESTION_ANSWERS:
            raise ApplicationError("Answer accept or dismiss.", code="invalid_answer")
        task = task_suggestion_answer(
            user=request_user(request), task_id=task_id, event_id=event_id, accept=SUGGESTION_ANSWERS[answer]
        )
    except ApplicationError as error:
        return _refused(request, error)
    if not SUGGESTION_ANSWERS[answer]:
        return _answer_with_row(request, task, "Suggestion dismissed.")
    if task.status == Task.Status.DONE:
        return _answer_with_row(request, task, f"“{task.title}” marked done.", undo_to=Task.Status.OPEN)
    return _answer_with_row(request, task, f"“{task.title}” is now due {task.due_date:%a %-d %b}.")
