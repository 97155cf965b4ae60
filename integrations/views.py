from __future__ import annotations

import requests
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from config.errors import ApplicationError
from config.http import request_user
from extraction.selectors import mailbox_status_list, quarantined_list
from extraction.services import ledger_replay
from integrations.models import Integration
from integrations.oauth.google import GoogleOAuthFlow
from integrations.oauth.microsoft import MicrosoftOAuthFlow
from integrations.providers.base import ProviderError
from integrations.selectors import integration_get
from integrations.services import gmail_connect, integration_disconnect, outlook_connect


@login_required
@require_GET
def mailboxes(request: HttpRequest) -> HttpResponse:
    statuses = mailbox_status_list(user=request_user(request))
    return render(request, "integrations/mailboxes.html", {"statuses": statuses})


@login_required
@require_POST
def google_connect(request: HttpRequest) -> HttpResponse:
    url = GoogleOAuthFlow(request.session).get_authorization_url(login_hint=request.POST.get("login_hint", ""))
    return redirect(url)


@login_required
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
    messages.success(request, f"{count} email(s) will be read again in the next run.")
    return redirect("mailboxes")


@login_required
@require_POST
def microsoft_connect(request: HttpRequest) -> HttpResponse:
    try:
        url = MicrosoftOAuthFlow(request.session).get_authorization_url(login_hint=request.POST.get("login_hint", ""))
    except (ValueError, requests.RequestException):
        messages.error(request, "Microsoft sign-in cannot be reached right now. Try again in a moment.")
        return redirect("mailboxes")
    return redirect(url)


@login_required
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
