"""Retention (issue 24): run records removed after RUN_RETENTION_DAYS in short batches, each person's latest
kept; ledger rows compacted after LEDGER_COMPACT_DAYS, never forgotten while their mailbox is connected, so
that a delta replayed from before the window sends nothing to Gemini a second time.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
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


def _slow_deletes(seconds: float) -> None:
    """The database made slow: a trigger sleeping `seconds` for each run removed."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS
              $$ BEGIN PERFORM pg_sleep({float(seconds)}); RETURN OLD; END $$;
            CREATE TRIGGER slow_delete BEFORE DELETE ON extraction_extractionrun
              FOR EACH ROW EXECUTE FUNCTION slow_delete();
            """
        )


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


def test_a_batch_that_would_hold_its_locks_too_long_is_rolled_back_and_done_again_smaller(
    consenting_user: User, settings
) -> None:
    """The benchmark saw a 2.4 s batch at 1,000 rows. Here the database is made slow (a trigger sleeping 4 ms
    for each run removed): 64 runs are 256 ms against a 100 ms limit. The first batch is cancelled and nothing
    of it stays done; smaller batches then remove every old run, none holding its locks past the limit."""
    settings.RETENTION_BATCH = 64
    settings.RETENTION_TRANSACTION_MS = 100
    old = timezone.now() - timedelta(days=settings.RUN_RETENTION_DAYS + 1)
    runs = ExtractionRun.objects.bulk_create(
        ExtractionRun(
            user=consenting_user, trigger=ExtractionRun.Trigger.SCHEDULE, status=ExtractionRun.Status.SUCCEEDED
        )
        for _ in range(65)
    )
    ExtractionRun.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=old)
    _slow_deletes(0.004)

    result = retention_apply(budget_s=30)

    assert result.batches_cancelled >= 1
    assert result.smallest_batch < 64
    assert result.longest_batch_s < 0.1 + 0.05  # the limit, and the id window read before the transaction
    assert result.runs_removed == 64
    assert list(ExtractionRun.objects.values_list("pk", flat=True)) == [runs[-1].pk]  # the latest stays


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


def _old_runs(user: User, count: int, settings) -> list[ExtractionRun]:
    runs = ExtractionRun.objects.bulk_create(
        ExtractionRun(user=user, trigger=ExtractionRun.Trigger.SCHEDULE, status=ExtractionRun.Status.SUCCEEDED)
        for _ in range(count)
    )
    old = timezone.now() - timedelta(days=settings.RUN_RETENTION_DAYS + 1)
    ExtractionRun.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=old)
    return runs


def test_a_batchs_transaction_is_measured_from_its_first_statement_to_its_commit_apart_from_the_batch(
    consenting_user: User, settings
) -> None:
    """The benchmark saw a "transaction" of 1.07 s with every statement inside its 500 ms limit: what it
    measured was the whole batch, the id window read before the transaction (which holds no lock) and the
    cache's marks included. The time locks are held is now measured on its own: here the database is made slow
    inside the transaction (a trigger sleeping 30 ms a run removed), so the transaction takes most of its
    batch, and the batch more."""
    settings.RETENTION_BATCH = 4
    runs = _old_runs(consenting_user, 9, settings)
    _slow_deletes(0.03)

    result = retention_apply()

    assert result.runs_removed == 8
    assert 4 * 0.03 <= result.longest_transaction_s < result.longest_batch_s
    assert list(ExtractionRun.objects.values_list("pk", flat=True)) == [runs[-1].pk]
