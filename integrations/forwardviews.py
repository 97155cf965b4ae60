"""Settings of the forward-to address: a new address, the person's own addresses it takes mail from, and the
confirmation link of an address they add (integrations/inbound/addresses.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.emails import account_email_send, mail_server_ready
from config.http import request_user
from integrations.inbound.addresses import (
    CONFIRM_MAX_AGE_S,
    forward_address_rotate,
    forward_sender_add,
    forward_sender_confirm,
    sender_addresses,
)
from integrations.models import ForwardSender

SETTINGS_SECTION = "/settings/#forward-address"
MAX_ADDED = 10


@login_required
@require_POST
def forward_rotate(request: HttpRequest) -> HttpResponse:
    integration = forward_address_rotate(user=request_user(request))
    messages.success(request, f"Your new address is {integration.account_address}. Mail to the old one is refused.")
    return redirect(SETTINGS_SECTION)


@login_required
@require_POST
def forward_sender_add_view(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    address = request.POST.get("address", "").strip().lower()
    try:
        validate_email(address)
    except ValidationError:
        messages.error(request, "Enter an email address, such as you@example.com.")
        return redirect(SETTINGS_SECTION)
    if address in sender_addresses(user=user):
        messages.info(request, f"{address} is already one of your addresses.")
        return redirect(SETTINGS_SECTION)
    if ForwardSender.objects.filter(user=user).count() >= MAX_ADDED:
        messages.error(request, f"You can add at most {MAX_ADDED} addresses. Remove one first.")
        return redirect(SETTINGS_SECTION)
    if not mail_server_ready():
        messages.error(request, "We could not send the confirmation link just now. Try again in a few minutes.")
        return redirect(SETTINGS_SECTION)
    sender, token = forward_sender_add(user=user, address=address)
    account_email_send(
        to=sender.address,
        subject_template="integrations/email/forward_sender_subject.txt",
        body_template="integrations/email/forward_sender.txt",
        context={
            "link": settings.SITE_URL + reverse("forward_sender_confirm", args=[token]),
            "max_age_days": CONFIRM_MAX_AGE_S // 86400,
        },
    )
    messages.success(request, f"We sent a link to {sender.address}. Open it to have mail from there taken.")
    return redirect(SETTINGS_SECTION)


@login_required
@require_POST
def forward_sender_remove(request: HttpRequest, sender_id: int) -> HttpResponse:
    ForwardSender.objects.filter(user=request_user(request), pk=sender_id).delete()
    messages.success(request, "Removed: mail from that address is refused from now on.")
    return redirect(SETTINGS_SECTION)


@require_GET
def forward_sender_confirm_view(request: HttpRequest, token: str) -> HttpResponse:
    """The link sent to an added address. It confirms only the address and account it was made for."""
    sender = forward_sender_confirm(token=token)
    if sender is None:
        messages.error(request, "This link is not valid any more. Add the address again on Settings for a new one.")
    else:
        messages.success(request, f"Confirmed: mail you forward from {sender.address} becomes your tasks.")
    return redirect(SETTINGS_SECTION if request.user.is_authenticated else "login")
