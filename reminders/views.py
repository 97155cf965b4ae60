"""Pages and endpoints of reminders: quick add's preview, snoozing a task, the digest's choice in Settings and
its unsubscribe link (no login), and private calendar feeds (made, shown once, revoked; served by secret)."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.cache import get_conditional_response
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.counting import CountingUnavailable
from accounts.throttle import client_address
from config.errors import ApplicationError
from config.http import is_htmx, request_user
from config.unavailable import RETRY_AFTER_S
from reminders.calendar import (
    CalendarGuessing,
    calendar_feed_create,
    calendar_feed_find,
    calendar_feed_ics,
    calendar_feed_revoke,
    calendar_feed_version,
)
from reminders.digest import (
    UnsubscribeLinkExpired,
    UnsubscribeLinkInvalid,
    UnsubscribeLinkReplaced,
    digest_set,
    unsubscribe_link_subscription,
)
from reminders.models import PushSubscription
from reminders.push import push_subscribe, push_unsubscribe
from tasks.quickadd import quick_add_resolve
from tasks.selectors import task_get
from tasks.snooze import person_zone, task_snooze, task_snoozed_list, task_unsnooze

_TEXT = "text/plain; charset=utf-8"

# Quick add --------------------------------------------------------------------------------------


def _date_or_none(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


@login_required
@require_GET
def quick_add_preview(request: HttpRequest) -> HttpResponse:
    """What the new-task field's text will be saved as, shown under it while the person types."""
    user = request_user(request)
    title = request.GET.get("title", "")[:300]
    due = _date_or_none(request.GET.get("due_date", ""))
    understood = quick_add_resolve(
        user=user, title=title, due_date=due, keep_as_typed=request.GET.get("keep_as_typed") == "on"
    )
    context = {"understood": understood, "explicit_due": due, "zone": person_zone(user).key}
    return render(request, "tasks/_quick_add_preview.html", context)


# Snooze -----------------------------------------------------------------------------------------


@login_required
@require_POST
def snooze(request: HttpRequest, task_id: int) -> HttpResponse:
    """Snooze one task to a date: with htmx its row goes and a notice comes (out of band)."""
    until = _date_or_none(request.POST.get("snoozed_until", ""))
    try:
        task = task_get(user=request_user(request), task_id=task_id)
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        messages.error(request, error.message)
        return redirect("home")
    try:
        if until is None:
            raise ApplicationError("Choose the date the task comes back.", code="invalid_snooze_date")
        task_snooze(task=task, until=until)
    except ApplicationError as error:
        if not is_htmx(request):
            messages.error(request, error.message)
            return redirect("home")
        # The row stays as it was (never replaced by the bare message), and the notice says what was wrong.
        row = render_to_string("tasks/_task.html", {"task": task}, request=request)
        notice = render_to_string("tasks/_snooze_notice.html", {"message": error.message, "oob": True}, request=request)
        return HttpResponse(row + notice, status=error.status)
    message = f"“{task.title}” snoozed until {until:%a %-d %b}."
    if not is_htmx(request):
        messages.success(request, message)
        return redirect("home")
    # The row is removed (the empty answer replaces it); the notice, with its Undo, goes to #undo out of band.
    response = render(request, "tasks/_snooze_notice.html", {"message": message, "undo_task": task, "oob": True})
    response["HX-Trigger"] = "tasksChanged"  # the group counts change
    return response


@login_required
@require_POST
def unsnooze(request: HttpRequest, task_id: int) -> HttpResponse:
    """Back on the list now: the snooze notice's Undo, or the snoozed page's button."""
    try:
        task = task_unsnooze(task=task_get(user=request_user(request), task_id=task_id))
    except ApplicationError as error:
        if is_htmx(request):
            return HttpResponse(error.message, status=error.status)
        messages.error(request, error.message)
        return redirect("snoozed_tasks")
    message = f"“{task.title}” is back on your list."
    if not is_htmx(request):
        messages.success(request, message)
        return redirect("snoozed_tasks")
    response = render(request, "tasks/_snooze_notice.html", {"message": message})
    response["HX-Trigger"] = "tasksChanged"
    return response


@login_required
@require_GET
def snoozed_tasks(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    context = {"tasks": task_snoozed_list(user=user), "zone": person_zone(user).key}
    return render(request, "tasks/snoozed.html", context)


# Settings: the digest and calendar feeds --------------------------------------------------------


@login_required
@require_POST
def settings_digest(request: HttpRequest) -> HttpResponse:
    enabled = request.POST.get("digest_enabled") == "on"
    digest_set(user=request_user(request), enabled=enabled)
    messages.success(
        request,
        f"You will get the morning digest at {settings.DIGEST_HOUR}:00 your time on days with something due."
        if enabled
        else "The morning digest is off.",
    )
    return redirect("settings")


@login_required
@require_POST
def calendar_create(request: HttpRequest) -> HttpResponse:
    """Make a feed and show its URL this once (only a hash is kept): the settings page, with it."""
    from accounts.views import settings_page

    try:
        _, secret = calendar_feed_create(user=request_user(request))
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("settings")
    request.new_calendar_secret = secret  # type: ignore[attr-defined]  # read by {% reminders_settings %}
    request.method = "GET"  # the settings page, drawn as for a visit
    response = settings_page(request)
    response.status_code = 201
    response["Cache-Control"] = "no-store"  # the secret must not stay in a cache
    return response


@login_required
@require_POST
def calendar_revoke(request: HttpRequest, feed_id: int) -> HttpResponse:
    """Revoke one of the person's live links. Any other id (unknown, another person's, revoked already) gets
    the same words, so that nothing tells whether someone else's link has that id."""
    if calendar_feed_revoke(user=request_user(request), feed_id=feed_id):
        messages.success(request, "The calendar link is revoked: calendars subscribed to it get nothing more.")
    else:
        messages.error(
            request,
            "That calendar link is not there any more (revoked already, or not one of yours): nothing was changed.",
        )
    return redirect("settings")


@require_GET
def calendar_feed(request: HttpRequest, secret: str) -> HttpResponse:
    """The feed a calendar app fetches: no login, the secret is the credential; unknown or revoked is a 404,
    too many wrong secrets from the address a 429. `no-cache` with an ETag: a cache asks every time (so a
    revoked feed is a 404 at the next fetch), and an unchanged feed is a 304 without its body."""
    try:
        feed = calendar_feed_find(secret=secret, address=client_address(request))
    except CalendarGuessing as refusal:
        minutes = -(-refusal.retry_after // 60)
        message = f"Too many wrong calendar links from your address: try again in {minutes} min."
        return HttpResponse(message, status=429, content_type=_TEXT, headers={"Retry-After": str(refusal.retry_after)})
    except CountingUnavailable:
        message = "Tasklift cannot answer this calendar right now: try again in a moment."
        return HttpResponse(message, status=503, content_type=_TEXT, headers={"Retry-After": str(RETRY_AFTER_S)})
    if feed is None:
        raise Http404("No such calendar.")
    # The ETag from what the feed depends on, before it is built: an unchanged feed costs one small statement.
    etag = f'"{calendar_feed_version(user=feed.user)}"'
    unchanged = get_conditional_response(request, etag=etag)
    if unchanged is not None:
        response = unchanged
    else:
        response = HttpResponse(calendar_feed_ics(user=feed.user), content_type="text/calendar; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="tasklift.ics"'
    response["Cache-Control"] = "private, no-cache"
    response["ETag"] = etag
    return response


# The digest's unsubscribe link ------------------------------------------------------------------


@csrf_exempt  # the signed token is the credential; a mail client's one-click POST (RFC 8058) has no session
@require_http_methods(["GET", "POST"])
def digest_unsubscribe(request: HttpRequest) -> HttpResponse:
    """GET asks (a link scanner that follows it changes nothing); POST, from the page's button or a mail
    client's "Unsubscribe" (`List-Unsubscribe=One-Click`), turns the digest off. No login either way. A link
    from before the digest was last turned on again is a 410 saying so, with the way to Settings."""
    token = request.GET.get("token", "")[:500]
    context: dict[str, object] = {"token": token, "max_age_days": settings.DIGEST_UNSUBSCRIBE_DAYS}
    try:
        subscription = unsubscribe_link_subscription(token=token)
    except UnsubscribeLinkExpired:
        return render(request, "reminders/unsubscribe.html", {**context, "state": "expired"}, status=400)
    except UnsubscribeLinkReplaced:
        return render(request, "reminders/unsubscribe.html", {**context, "state": "replaced"}, status=410)
    except UnsubscribeLinkInvalid:
        return render(request, "reminders/unsubscribe.html", {**context, "state": "invalid"}, status=400)
    context["email"] = subscription.user.email
    if request.method == "POST":
        digest_set(user=subscription.user, enabled=False)
        return render(request, "reminders/unsubscribe.html", {**context, "state": "done"})
    return render(request, "reminders/unsubscribe.html", {**context, "state": "confirm"})


# Web Push: the browsers a person turned notifications on in --------------------------------------------

_SERVICE_WORKER = settings.BASE_DIR / "static" / "js" / "sw.js"


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """The service worker (static/js/sw.js), served from the site's root so that its scope is the whole site."""
    response = HttpResponse(_SERVICE_WORKER.read_bytes(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "no-cache"  # a new version is taken at the next visit
    return response


def _json_body(request: HttpRequest) -> dict[str, Any] | None:
    """The request's JSON object, or None for anything else."""
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _json_error(error: ApplicationError) -> JsonResponse:
    return JsonResponse({"code": error.code, "message": error.message}, status=error.status)


@login_required
@require_POST
def push_subscribe_view(request: HttpRequest) -> HttpResponse:
    """The page's script sends the browser's subscription (PushSubscription.toJSON(), and a label)."""
    body = _json_body(request)
    if body is None or not isinstance(body.get("keys"), dict):
        return _json_error(ApplicationError("Send the subscription as JSON.", code="invalid_subscription"))
    keys = body["keys"]
    try:
        subscription = push_subscribe(
            user=request_user(request),
            endpoint=str(body.get("endpoint", "")),
            p256dh=str(keys.get("p256dh", "")),
            auth=str(keys.get("auth", "")),
            label=str(body.get("label", "")),
        )
    except ApplicationError as error:
        return _json_error(error)
    return JsonResponse({"id": subscription.pk}, status=201)


@login_required
@require_POST
def push_unsubscribe_view(request: HttpRequest) -> HttpResponse:
    body = _json_body(request) or {}
    endpoint = str(body.get("endpoint", ""))
    return JsonResponse({"removed": push_unsubscribe(user=request_user(request), endpoint=endpoint)})


@login_required
@require_POST
def push_remove(request: HttpRequest, subscription_id: int) -> HttpResponse:
    """Turn off one browser from the list on Settings (without JavaScript too)."""
    removed = PushSubscription.objects.filter(user=request_user(request), pk=subscription_id).delete()[0]
    if removed:
        messages.success(request, "Notifications turned off for that browser.")
    else:
        messages.error(request, "That browser had no notifications on any more.")
    return redirect("settings")
