"""Retention (issue 24): run records removed after RUN_RETENTION_DAYS in short batches, each person's latest
kept; ledger rows compacted after LEDGER_COMPACT_DAYS, never forgotten while their mailbox is connected, so
that a delta replayed from before the window sends nothing to Gemini a second time.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.retention import retention_apply
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask, no_ask

pytestmark = pytest.mark.django_db


def _gemini_calls(sandbox: SandboxClient) -> int:
    return len([r for r in sandbox.requests("gemini") if r["method"] == "POST"])


def test_old_runs_are_removed_in_short_batches_and_each_persons_latest_stays(
    gmail: GmailBox, consenting_user: User, settings
) -> None:
    settings.RETENTION_BATCH = 2
    gmail.deliver(ask(1))
    runs = [run_extraction(consenting_user) for _ in range(4)]
    young = run_extraction(consenting_user)
    old = timezone.now() - timedelta(days=settings.RUN_RETENTION_DAYS + 1)
    ExtractionRun.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=old)
    assert ProcessedEmail.objects.get().run_id == runs[0].pk
    assert Task.objects.get().run_id == runs[0].pk

    result = retention_apply()

    assert result.runs_removed == 4
    assert result.batches >= 3  # two runs a transaction
    assert list(ExtractionRun.objects.values_list("pk", flat=True)) == [young.pk]
    assert ProcessedEmail.objects.get().run_id is None  # the ledger row stays: the email is still handled
    assert Task.objects.get().run_id is None

    ExtractionRun.objects.filter(pk=young.pk).update(created_at=old)
    assert retention_apply().runs_removed == 0  # the person's latest run stays, however old


def test_a_delta_replayed_from_before_the_kept_window_sends_nothing_to_gemini_twice(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, settings
) -> None:
    first_cursor = gmail.cursor
    gmail.deliver(ask(1))
    gmail.deliver(no_ask(2))
    first = run_extraction(consenting_user)
    assert first.status == ExtractionRun.Status.SUCCEEDED and first.tasks_created == 1
    sent = _gemini_calls(sandbox)
    assert sent >= 1
    ProcessedEmail.objects.update(created_at=timezone.now() - timedelta(days=settings.LEDGER_COMPACT_DAYS + 30))

    result = retention_apply()

    assert result.ledger_compacted == 2
    assert set(ProcessedEmail.objects.values_list("email_key", flat=True)) == {""}
    # The delta from the cursor before that mail, as a run that failed long ago would read it again.
    SyncCursor.objects.filter(integration=gmail.integration).update(value=first_cursor)
    replayed = run_extraction(consenting_user)

    assert replayed.status == ExtractionRun.Status.SUCCEEDED
    assert (replayed.emails_fetched, replayed.emails_already_done, replayed.emails_sent_to_llm) == (2, 2, 0)
    assert _gemini_calls(sandbox) == sent
    assert Task.objects.count() == 1


def test_a_quarantined_email_keeps_what_its_person_sees_and_young_rows_are_untouched(
    gmail: GmailBox, consenting_user: User, settings
) -> None:
    gmail.deliver(ask(1))
    gmail.deliver(ask(2))
    run_extraction(consenting_user)
    kept, young = ProcessedEmail.objects.order_by("pk")
    ProcessedEmail.objects.filter(pk=kept.pk).update(
        outcome=ProcessedEmail.Outcome.QUARANTINED,
        last_error="Gemini could not read it",
        created_at=timezone.now() - timedelta(days=settings.LEDGER_COMPACT_DAYS + 1),
    )

    assert retention_apply().ledger_compacted == 0

    kept.refresh_from_db()
    young_before = young.email_key
    young.refresh_from_db()
    assert kept.last_error == "Gemini could not read it" and kept.email_key
    assert young.email_key == young_before != ""
