from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import wraps

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.selectors import consent_in_force
from accounts.verification import email_verified_required
from config.crypto import SecretUnreadable
from config.errors import ApplicationError, RateLimitedError
from config.http import request_user
from extraction.models import ExtractionRun
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import (
    MailboxStatus,
    mailbox_status_list,
    quarantined_list,
    run_latest,
    skipped_get,
    skipped_list,
)
from extraction.services import always_read_sender, extraction_run_request, ledger_read_anyway, ledger_replay
from integrations.imapconnect import (
    PRESETS,
    ConnectRefused,
    ImapConnectForm,
    imap_connect_count,
    imap_connection_test,
)
from integrations.models import Integration
from integrations.oauth.google import GoogleOAuthFlow
from integrations.oauth.microsoft import MicrosoftOAuthFlow
from integrations.providers.base import ProviderError
from integrations.push import push_enabled
from integrations.selectors import integration_get
from integrations.services import (
    gmail_connect,
    imap_connect,
    integration_credentials,
    integration_disconnect,
    outlook_connect,
)


@dataclass(frozen=True)
class SyncStatus:
    """A mailbox's sync as its owner reads it: healthy or not, the last problem and its fix, in plain words."""

    mailbox: MailboxStatus
    healthy: bool
    health: str  # "Healthy", "Needs reconnecting", "Having trouble"
    problem: str  # one sentence, "" when there is none
    fix: str  # one sentence, "" when the Reconnect button is the fix or nothing is to do
    reconnect: bool  # the fix is to connect the mailbox again
    next_read: datetime | None  # the next scheduled read, when one is due
    next_read_note: str  # why there is none, when there is none
    left_out: bool  # the latest run could not read all of it
    push: str  # "on", "off" (not set up here), "setting_up", "failed" or "lapsed"
    push_note: str  # how new mail of it is read, in one sentence
    first_read: str  # before its first successful read: "waiting", "in_progress" or "failed"; "" once read


# How long after a connect a mailbox without a push channel reads as being set up, not as a failure. The
# connect queues the channel's opening at once (it takes seconds), and beat's maintenance opens a missing one
# every PUSH_MAINTAIN_SECONDS (5 minutes): two more tries fit in it. A first opening the provider refused
# leaves no channel to hold its error, so past this a channel still missing is the failure. Counted from the
# mailbox's first connect (`created_at`): a reconnect keeps no time of its own, so a mailbox reconnected long
# after its first connect shows the failure for the seconds until its channel opens.
PUSH_SETUP_GRACE = timedelta(minutes=10)


def _push(integration: Integration, *, now: datetime) -> tuple[str, str]:
    """Whether new mail of the mailbox rings the doorbell (read within seconds) or waits for the sweep."""
    every = settings.EXTRACTION_SCHEDULE_MINUTES
    sweep = f"every {every} minute{'s' if every != 1 else ''}"
    channel = getattr(integration, "push_channel", None)
    if channel is None and not push_enabled(integration.provider):
        return "off", f"Push is not set up on this Tasklift: new mail is read {sweep}."
    if (
        channel is None
        and integration.status == Integration.Status.ACTIVE
        and now - integration.created_at < PUSH_SETUP_GRACE
    ):
        return "setting_up", f"Setting up instant updates… Until they are on, new mail is read {sweep}."
    if channel is None or channel.last_error:
        # The provider's own words stay in the admin; polling covers the mailbox meanwhile.
        return "failed", f"Push could not be turned on for this mailbox: new mail is read {sweep} until it can."
    if channel.expires_at <= now:
        return "lapsed", f"Push lapsed and is renewed by the daily check: new mail is read {sweep} until then."
    rang = ""
    if integration.notified_at:
        rang = f" (last new mail {naturaltime(integration.notified_at)})"
    return "on", f"Push is on: new mail is read within seconds of arriving{rang}, and {sweep} at the latest."


def _problem(integration: Integration) -> tuple[str, str, bool]:
    """The last problem of a mailbox and its fix, by error code (the provider's own text stays in the
    record and the logs)."""
    provider = integration.get_provider_display()
    code = integration.last_error_code
    if integration.provider == Integration.Provider.IMAP and (
        integration.status == Integration.Status.NEEDS_REAUTH or code == "provider_auth"
    ):
        return "The mail server no longer accepts the app password Tasklift has for this mailbox.", "", True
    if integration.status == Integration.Status.NEEDS_REAUTH or code == "provider_auth":
        return (
            f"{provider} no longer lets Tasklift read this mailbox (its access was revoked or has expired).",
            "",
            True,
        )
    if not code:
        return "", "", False
    if code == "provider_rate_limited":
        return f"{provider} asked Tasklift to slow down.", "Nothing to do: Tasklift waits and reads it again.", False
    if code in ("provider_unavailable", "cursor_expired"):
        return f"{provider} could not be reached.", "Nothing to do: the next read tries again.", False
    return (
        f"Reading this mailbox from {provider} failed.",
        "The next read tries again; if this stays, reconnect the mailbox.",
        True,
    )


def _first_read(integration: Integration, *, run: ExtractionRun | None, missed: bool) -> str:
    """Where a mailbox never read successfully stands: its first read failed (a fetch refused, or the latest
    run that opened it failed), is under way (a run queued or running), or is still to come."""
    if integration.last_success_at is not None:
        return ""
    failed_run = (
        run is not None
        and run.status == ExtractionRun.Status.FAILED
        and any(key.partition(":")[0] == str(integration.pk) for key in run.mailboxes)  # "<id>:sent" too
    )
    if integration.last_error_code or integration.status != Integration.Status.ACTIVE or missed or failed_run:
        return "failed"
    if run is not None and run.status in (ExtractionRun.Status.QUEUED, ExtractionRun.Status.RUNNING):
        return "in_progress"
    return "waiting"


def _sync_status(
    status: MailboxStatus, *, consent: bool, now: datetime, left_out: set[str], run: ExtractionRun | None
) -> SyncStatus:
    integration = status.integration
    problem, fix, reconnect = _problem(integration)
    active = integration.status == Integration.Status.ACTIVE
    next_read, note = None, ""
    if not active:
        note = "Tasklift does not read it until you reconnect it."
    elif not consent:
        note = "Scheduled reads wait for your AI consent."
    else:
        next_read = max(integration.next_check_at, now)  # what the scan goes by (push healthy or not)
    missed = str(integration.pk) in left_out
    healthy = active and not problem and not status.unread and not missed
    health = "Healthy" if healthy else ("Needs reconnecting" if not active else "Having trouble")
    push, push_note = _push(integration, now=now)
    first_read = _first_read(integration, run=run, missed=missed)
    return SyncStatus(
        status, healthy, health, problem, fix, reconnect, next_read, note, missed, push, push_note, first_read
    )


@login_required
@require_GET
def mailboxes(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    consent = consent_in_force(user=user) is not None
    now = timezone.now()
    run = run_latest(user=user)
    left_out = {
        key.partition(":")[0]  # "<id>:sent" is the mailbox's Sent mail
        for key, report in (run.mailboxes.items() if run and run.error_code == "partial" else [])
        if isinstance(report, dict) and report.get("status") in ("failed", "partial")
    }
    statuses = [
        _sync_status(s, consent=consent, now=now, left_out=left_out, run=run) for s in mailbox_status_list(user=user)
    ]
    skipped, skipped_count = skipped_list(user=user)
    context = {
        "statuses": statuses,
        "now": now,
        "schedule_minutes": settings.EXTRACTION_SCHEDULE_MINUTES,
        "skipped": skipped,
        "skipped_count": skipped_count,
        "reads_bulk": user.read_bulk_mail,
    }
    return render(request, "integrations/mailboxes.html", context)


@login_required
@email_verified_required
@require_POST
def google_connect(request: HttpRequest) -> HttpResponse:
    url = GoogleOAuthFlow(request.session).get_authorization_url(login_hint=request.POST.get("login_hint", ""))
    return redirect(url)


def _signed_in_or_connect_again(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """An OAuth callback reached signed out (the session ended while the person was at Google or Microsoft)
    cannot finish: the flow's state and PKCE verifier were in that session. Send them to log in and then to
    the Mailboxes page, and never pass the provider's answer on: login_required would put the whole callback
    URL, its code and state, in `next`, in the login page's links and in every log of it."""

    @wraps(view)
    def wrapped(request: HttpRequest) -> HttpResponseBase:
        if not request.user.is_authenticated:
            again = "Your session ended while you were connecting a mailbox. Log in, then connect the mailbox again."
            messages.info(request, again)
            return redirect_to_login(reverse("mailboxes"))
        return view(request)

    return wrapped


@_signed_in_or_connect_again
@email_verified_required
@require_GET
def google_callback(request: HttpRequest) -> HttpResponse:
    try:
        credentials = GoogleOAuthFlow(request.session).get_credentials(params=request.GET.dict())
        integration = gmail_connect(user=request_user(request), credentials=credentials)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    except ProviderError as error:
        messages.error(request, f"Gmail was authorised but could not be read: {error.message}")
        return redirect("mailboxes")
    messages.success(request, f"Gmail {integration.account_address} is connected.")
    return redirect("mailboxes")


@login_required
@require_POST
def disconnect(request: HttpRequest, integration_id: int) -> HttpResponse:
    try:
        integration = integration_get(user=request_user(request), integration_id=integration_id)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    integration_disconnect(integration=integration)
    if integration.provider == Integration.Provider.OUTLOOK:
        # Microsoft offers apps no way to revoke one delegated grant; the person can, in their account.
        messages.success(
            request,
            f"{integration} is disconnected and Tasklift deleted its sign-in. To remove Tasklift from your Microsoft "
            "account as well, open account.microsoft.com, Privacy, Apps and services.",
        )
    else:
        messages.success(request, f"{integration} is disconnected and Tasklift's access to it was revoked.")
    return redirect("mailboxes")


@login_required
@require_POST
def replay_quarantined(request: HttpRequest, integration_id: int) -> HttpResponse:
    """Read the emails set aside (quarantined) for this mailbox again in the next run."""
    try:
        integration = integration_get(user=request_user(request), integration_id=integration_id)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    count = ledger_replay(entries=list(quarantined_list(integration=integration)))
    if not count:
        messages.info(request, "Nothing of this mailbox is set aside any more.")
        return redirect("mailboxes")
    emails = "1 email" if count == 1 else f"{count} emails"
    user = request_user(request)
    # At once, as "Extract now" would, and held by the same limit and the same consent.
    if consent_in_force(user=user) is None:
        messages.warning(request, f"{emails} will be read again once you give AI consent (on the AI consent page).")
        return redirect("mailboxes")
    try:
        extraction_rate_check(request=request)
    except RateLimitedError as error:
        messages.warning(request, f"{emails} will be read again in the next run. {error.message}")
        return redirect("mailboxes")
    extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)
    messages.success(
        request, f"{emails} {'is' if count == 1 else 'are'} being read again now; any task found appears in your list."
    )
    return redirect("mailboxes")


@login_required
@require_POST
def read_skipped(request: HttpRequest, entry_id: int) -> HttpResponse:
    """Read one skipped bulk email after all, in the next run."""
    try:
        entry = skipped_get(user=request_user(request), entry_id=entry_id)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    ledger_read_anyway(entry=entry)
    messages.success(request, "That email will be read in the next run.")
    return redirect("mailboxes")


@login_required
@require_POST
def always_read(request: HttpRequest, entry_id: int) -> HttpResponse:
    """Always read mail from the sender of a skipped email (and read this one)."""
    try:
        entry = skipped_get(user=request_user(request), entry_id=entry_id)
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    address = always_read_sender(user=request_user(request), entry=entry)
    messages.success(request, f"Mail from {address or 'this sender'} will always be read, starting with this one.")
    return redirect("mailboxes")


@login_required
@email_verified_required
@require_POST
def microsoft_connect(request: HttpRequest) -> HttpResponse:
    try:
        url = MicrosoftOAuthFlow(request.session).get_authorization_url(login_hint=request.POST.get("login_hint", ""))
    except (ValueError, requests.RequestException):
        messages.error(request, "Microsoft sign-in cannot be reached right now. Try again in a moment.")
        return redirect("mailboxes")
    return redirect(url)


@_signed_in_or_connect_again
@email_verified_required
@require_GET
def microsoft_callback(request: HttpRequest) -> HttpResponse:
    try:
        msal_cache, home_account_id, access_token = MicrosoftOAuthFlow(request.session).get_token_cache(
            params=request.GET.dict()
        )
        integration = outlook_connect(
            user=request_user(request),
            msal_cache=msal_cache,
            home_account_id=home_account_id,
            access_token=access_token,
        )
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("mailboxes")
    except ProviderError as error:
        messages.error(request, f"Outlook was authorised but could not be read: {error.message}")
        return redirect("mailboxes")
    messages.success(request, f"Outlook {integration.account_address} is connected.")
    return redirect("mailboxes")


@login_required
@email_verified_required
def imap_connect_page(request: HttpRequest) -> HttpResponse:
    """Connect a mailbox by IMAP: "Test the connection" signs in and says what it found; "Connect" tests again
    and saves. Nothing is stored before a test succeeds. GET ?mailbox=ID fills the form from a connected
    IMAP mailbox (its reconnect: everything but the password)."""
    user = request_user(request)
    tested, status = "", 200
    if request.method == "POST":
        form = ImapConnectForm(request.POST)
        if form.is_valid():
            try:
                imap_connect_count(user_id=user.pk)
                result = imap_connection_test(account := form.account())
            except RateLimitedError as error:
                form.add_error(None, error.message)
                status = 429
            except ConnectRefused as refused:
                form.add_error("password" if refused.code == "auth" else None, refused.message)
                status = 400
            else:
                address = form.cleaned_data["address"]
                if request.POST.get("action") != "connect":
                    tested = result.sentence(address)
                else:
                    integration = imap_connect(user=user, account=account, address=address)
                    messages.success(request, f"{result.sentence(address)} Its mail is read from now on.")
                    return redirect(f"{reverse('mailboxes')}#mailbox-{integration.pk}")
        else:
            status = 400
    else:
        form = ImapConnectForm(initial=_imap_initial(request))
    context = {"form": form, "tested": tested, "presets": PRESETS}
    return render(request, "integrations/imap_connect.html", context, status=status)


def _imap_initial(request: HttpRequest) -> dict[str, object]:
    """The form's values for reconnecting one of the person's IMAP mailboxes (its password is not shown)."""
    mailbox = request.GET.get("mailbox", "")
    integration = (
        Integration.objects.filter(
            pk=int(mailbox), user=request_user(request), provider=Integration.Provider.IMAP
        ).first()
        if mailbox.isdigit()
        else None
    )
    if integration is None:
        return {}
    try:
        saved = integration_credentials(integration=integration)
    except SecretUnreadable:  # its key was removed: the form starts from the address alone
        saved = {}
    preset = next(
        (k for k, p in PRESETS.items() if (p.host, p.port) == (saved.get("host"), saved.get("port"))), "other"
    )
    username = saved.get("username", "")
    return {
        "preset": preset,
        "address": integration.account_address,
        "username": "" if username == integration.account_address else username,
        "host": saved.get("host", ""),
        "port": saved.get("port"),
        "security": saved.get("security", "tls"),
    }
