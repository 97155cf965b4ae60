"""The polling scan sends a chunk's jobs in one pipeline (extraction/scheduling.py): they are ordinary Celery jobs,
and a real worker runs each of them.

No browser: the worker thread, the sandbox and the test database are the whole of it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.services import consent_grant
from extraction.jobs import extraction_schedule_job
from extraction.models import ExtractionRun
from integrations.models import Integration
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import connect_gmail
from tests.factories import UserFactory
from tests.mail import ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_runs_every_job_of_a_scan(sandbox: SandboxClient, celery_worker: Any) -> None:
    people = [UserFactory() for _ in range(3)]
    for n, person in enumerate(people):
        consent_grant(user=person)
        connect_gmail(sandbox, person, f"polled{n}@example.com").deliver(ask(70 + n))
    Integration.objects.update(last_success_at=timezone.now() - timedelta(days=1))

    assert extraction_schedule_job() == 3  # due: one idle-check job for the three, whose checks find mail

    deadline = time.monotonic() + 60
    while ExtractionRun.objects.filter(status__in=ExtractionRun.FINISHED).count() < 3:
        assert time.monotonic() < deadline, list(ExtractionRun.objects.values_list("user", "status"))
        time.sleep(0.1)
    assert sorted(ExtractionRun.objects.values_list("trigger", "status")) == [("schedule", "succeeded")] * 3
    for n, person in enumerate(people):
        assert Task.objects.filter(user=person, title__contains=f"project {70 + n}").count() == 1
