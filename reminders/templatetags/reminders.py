"""The Settings page's section of reminders (`{% reminders_settings %}` in templates/accounts/settings.html):
the digest's choice, the browsers reminders are pushed to and the calendar links, read here so that the
settings view stays as it is."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings

from reminders.calendar import calendar_feed_list, calendar_feed_url
from reminders.digest import digest_enabled
from reminders.models import PushSubscription
from reminders.push import vapid_public_key

register = template.Library()


@register.inclusion_tag("accounts/_reminders_settings.html", takes_context=True)
def reminders_settings(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    user = request.user
    secret = getattr(request, "new_calendar_secret", "")
    return {
        "csrf_token": context.get("csrf_token"),
        "digest_enabled": digest_enabled(user=user),
        "digest_hour": settings.DIGEST_HOUR,
        "feeds": calendar_feed_list(user=user),
        "new_calendar_url": calendar_feed_url(secret=secret) if secret else "",
        "push_subscriptions": list(PushSubscription.objects.filter(user=user)),
        "vapid_public_key": vapid_public_key(),
    }
