from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import User
from config.errors import NotFoundError
from integrations.models import Integration


def integration_list(*, user: User) -> QuerySet[Integration]:
    # The forward-to address is not a mailbox the person connected: it lives on Settings.
    return (
        Integration.objects.filter(user=user)
        .exclude(status=Integration.Status.DISCONNECTED)
        .exclude(provider=Integration.Provider.FORWARD)
    )


def integration_get(*, user: User, integration_id: int) -> Integration:
    integration = Integration.objects.filter(user=user, pk=integration_id).first()
    if integration is None:
        raise NotFoundError("There is no such mailbox.", code="integration_not_found")
    return integration
