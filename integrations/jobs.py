"""Celery jobs of the integrations app: opening, renewing and repairing push channels."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from config.crypto import SecretUnreadable
from integrations.models import Integration, PushChannel
from integrations.providers.base import ProviderError
from integrations.push import push_channel_failed, push_channel_open, push_channel_renew, push_enabled

logger = logging.getLogger(__name__)

MAINTAIN_CHUNK = 500  # channels renewed or opened per maintenance tick; the rest wait for the next one


@shared_task
def push_channel_open_job(integration_id: int) -> bool:
    """Open (or open again) a mailbox's push channel. Polling covers the mailbox when this fails."""
    integration = Integration.objects.filter(pk=integration_id, status=Integration.Status.ACTIVE).first()
    if integration is None:
        return False
    try:
        return push_channel_open(integration=integration) is not None
    except (ProviderError, SecretUnreadable) as error:
        push_channel_failed(integration=integration, error=error)
        return False


@shared_task
def push_channel_renew_job(integration_id: int) -> bool:
    """Renew a channel now (Graph's `reauthorizationRequired`)."""
    channel = PushChannel.objects.select_related("integration").filter(integration_id=integration_id).first()
    if channel is None or channel.integration.status != Integration.Status.ACTIVE:
        return False
    try:
        return push_channel_renew(channel=channel) is not None
    except (ProviderError, SecretUnreadable) as error:
        push_channel_failed(integration=channel.integration, error=error)
        return False


@shared_task
def push_channels_maintain_job() -> dict[str, int]:
    """Beat's care of push channels: renew those renewed more than PUSH_RENEW_HOURS ago or past half their
    life, open the missing ones of active mailboxes, forget those of mailboxes no longer active."""
    now = timezone.now()
    forgotten, _ = PushChannel.objects.exclude(integration__status=Integration.Status.ACTIVE).delete()
    renewed = opened = failed = 0
    due = Q(updated_at__lte=now - timedelta(hours=settings.PUSH_RENEW_HOURS)) | Q(expires_at__lte=now + _half_life())
    for channel in (
        PushChannel.objects.select_related("integration").filter(due).order_by("expires_at")[:MAINTAIN_CHUNK]
    ):
        if not push_enabled(channel.integration.provider):
            continue
        try:
            push_channel_renew(channel=channel)
            renewed += 1
        except (ProviderError, SecretUnreadable) as error:
            push_channel_failed(integration=channel.integration, error=error)
            failed += 1
    missing = Integration.objects.filter(status=Integration.Status.ACTIVE, push_channel__isnull=True)
    for integration in missing.order_by("pk")[:MAINTAIN_CHUNK]:
        if not push_enabled(integration.provider):
            continue
        try:
            push_channel_open(integration=integration)
            opened += 1
        except (ProviderError, SecretUnreadable) as error:
            logger.warning("push channel of integration=%s not opened: %s", integration.pk, error)
            failed += 1
    result = {"renewed": renewed, "opened": opened, "failed": failed, "forgotten": forgotten}
    logger.info("push channels maintained %s", result)
    return result


def _half_life() -> timedelta:
    """Renew a channel with less than half its life left, whatever PUSH_RENEW_HOURS says (short test lives)."""
    return timedelta(minutes=settings.GRAPH_SUBSCRIPTION_MINUTES / 2)
