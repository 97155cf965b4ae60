"""Push end to end: the sandbox's Pub/Sub and Graph ring the live site, a real Celery worker runs, and the
task appears within seconds; with every notification dropped, the polling safety net still brings it.

No browser: the live server, the worker thread and the sandbox are the whole of it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import User
from extraction.jobs import extraction_schedule_job
from extraction.models import ExtractionRun
from integrations.models import Integration
from integrations.push import push_channel_open
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import connect_gmail, connect_outlook
from tests.factories import UserFactory
from tests.mail import ask
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pushing(live_site: str, settings: Any, sandbox: SandboxClient) -> str:
    """Push on, reaching the live site; the sandbox's Pub/Sub pushes Gmail's topic there with a real token."""
    settings.PUSH_ENABLED = True
    settings.PUSH_BASE_URL = live_site
    settings.GMAIL_PUSH_AUDIENCE = f"{live_site}/webhooks/gmail"
    sandbox.pubsub_subscribe(
        settings.GMAIL_PUSH_TOPIC,
        f"{live_site}/webhooks/gmail",
        settings.GMAIL_PUSH_SERVICE_ACCOUNT,
        audience=settings.GMAIL_PUSH_AUDIENCE,
    )
    return live_site


@pytest.fixture
def person(transactional_db: None) -> User:
    from accounts.services import consent_grant

    user = UserFactory()
    consent_grant(user=user)
    return user


def test_a_push_from_each_provider_becomes_a_task_within_seconds(
    pushing: str, sandbox: SandboxClient, person: User, celery_worker: Any
) -> None:
    gmail = connect_gmail(sandbox, person, "push@example.com")
    outlook = connect_outlook(sandbox, person, "push@outlook.example.com")
    for integration in (gmail.integration, outlook.integration):
        assert push_channel_open(integration=integration) is not None
    wait_for(
        lambda: not ExtractionRun.objects.exclude(status__in=ExtractionRun.FINISHED).exists(),
        timeout=20,
        what="the first runs end",
    )

    for n, box in ((41, gmail), (42, outlook)):
        delivered = time.monotonic()
        box.deliver(ask(n))
        title = f"project {n}"
        wait_for(lambda: Task.objects.filter(user=person, title__contains=title).exists(), timeout=15, what=title)  # noqa: B023 (called within the loop)
        assert time.monotonic() - delivered < 10

    assert ExtractionRun.objects.filter(user=person, trigger="webhook").exists()
    assert not ExtractionRun.objects.filter(user=person, trigger="schedule").exists()  # push did it, not polling


def test_with_every_notification_dropped_the_mail_still_becomes_tasks_within_a_poll_interval(
    pushing: str, sandbox: SandboxClient, person: User, celery_worker: Any, settings: Any
) -> None:
    gmail = connect_gmail(sandbox, person, "dropped@example.com")
    outlook = connect_outlook(sandbox, person, "dropped@outlook.example.com")
    for integration in (gmail.integration, outlook.integration):
        assert push_channel_open(integration=integration) is not None
    sandbox.push_behaviour("pubsub", drop=True)
    sandbox.push_behaviour("graph", drop=True)
    # The poll interval here is a minute (the setting, scaled down); both mailboxes were last read 45 s ago.
    settings.EXTRACTION_SCHEDULE_MINUTES = 1
    Integration.objects.filter(user=person).update(
        last_success_at=timezone.now() - timedelta(seconds=45), polled_at=None
    )
    delivered = time.monotonic()
    gmail.deliver(ask(51))
    outlook.deliver(ask(52))

    def beat() -> bool:  # beat's scan, every couple of seconds (EXTRACTION_SCAN_SECONDS, scaled down)
        extraction_schedule_job()
        return Task.objects.filter(user=person, title__contains="project 5").count() == 2

    wait_for(beat, timeout=90, interval=2, what="both emails are tasks")
    assert time.monotonic() - delivered < 60 + 15  # one poll interval, plus a run
    assert not ExtractionRun.objects.filter(user=person, trigger="webhook").exists()  # no ring got through
