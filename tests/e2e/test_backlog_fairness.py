"""Fairness between people on one worker (issue 12): one person's large backlog is read in slices, each
continuation queued behind other people's runs, so another person's new mail waits at most one slice."""

from __future__ import annotations

import time
from typing import Any

import pytest

from accounts.services import consent_grant
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request
from sandbox.client import SandboxClient
from tests.conftest import connect_gmail
from tests.factories import UserFactory
from tests.mail import ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_backlog_does_not_hold_the_worker_while_another_persons_new_mail_waits(
    sandbox: SandboxClient, celery_worker: Any, settings: Any
) -> None:
    settings.EXTRACTION_RUN_MAX_EMAILS = 20
    backlog, fresh = UserFactory(), UserFactory()
    for user in (backlog, fresh):
        consent_grant(user=user)
    big = connect_gmail(sandbox, backlog, "backlog@example.com")
    small = connect_gmail(sandbox, fresh, "fresh@example.com")
    for n in range(100):
        big.deliver(ask(n))
    for n in range(10):
        small.deliver(ask(1000 + n))
    sandbox.set_gemini_latency(100)

    extraction_run_request(user=backlog, trigger=ExtractionRun.Trigger.MANUAL)
    deadline = time.monotonic() + 60
    while not ExtractionRun.objects.filter(user=backlog, status=ExtractionRun.Status.RUNNING).exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    extraction_run_request(user=fresh, trigger=ExtractionRun.Trigger.MANUAL)  # while the first slice is read

    while ExtractionRun.objects.filter(user=backlog, status=ExtractionRun.Status.SUCCEEDED).count() < 1:
        assert time.monotonic() < deadline + 120, list(ExtractionRun.objects.values_list("user", "status"))
        time.sleep(0.1)

    slices = list(ExtractionRun.objects.filter(user=backlog).order_by("pk"))
    assert [r.status for r in slices] == ["continued"] * 4 + ["succeeded"]  # 100 emails, 20 a slice
    (mine,) = ExtractionRun.objects.filter(user=fresh)
    assert mine.status == "succeeded" and mine.tasks_created == 10
    # The new mail waited for the slice in progress only: done before the backlog's second slice began.
    assert mine.finished_at is not None and slices[1].started_at is not None
    assert mine.finished_at <= slices[1].started_at
