"""Replaying quarantined emails ("Try them again", the admin action): a constant number of statements however
many emails, each id queued once on its own mailbox, and nothing but quarantined emails touched."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from extraction.models import FetchFailure, ProcessedEmail
from extraction.services import ledger_replay
from integrations.models import Integration
from tests.factories import IntegrationFactory

pytestmark = pytest.mark.django_db


def quarantine(integration: Integration, count: int, *, prefix: str = "m") -> list[ProcessedEmail]:
    """`count` quarantined ledger rows of `integration`, each with a failed read on record."""
    ids = [f"{prefix}{n}" for n in range(count)]
    FetchFailure.objects.bulk_create(
        [FetchFailure(integration=integration, message_id=i, attempts=3, last_error_code="fetch_failed") for i in ids]
    )
    return ProcessedEmail.objects.bulk_create(
        [ProcessedEmail(integration=integration, message_id=i, outcome="quarantined", last_error="x") for i in ids]
    )


def statements_to_replay(entries: list[ProcessedEmail]) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert ledger_replay(entries=entries) == len(entries)
    return len(queries)


def test_replaying_a_thousand_emails_takes_as_many_statements_as_ten() -> None:
    few, many = IntegrationFactory(), IntegrationFactory()
    ten = quarantine(few, 10)
    thousand = quarantine(many, 1000)

    statements = statements_to_replay(ten)
    assert statements_to_replay(thousand) == statements
    assert statements <= 6  # lock, forget failed reads, queue, delete (and the savepoint around them)
    many.refresh_from_db()
    assert many.backfill_pending == [f"m{n}" for n in range(1000)]
    assert not ProcessedEmail.objects.exists()
    assert not FetchFailure.objects.exists()


def test_replay_of_two_mailboxes_is_still_constant_and_each_id_goes_to_its_own_mailbox() -> None:
    gmail, outlook = IntegrationFactory(), IntegrationFactory(provider="outlook")
    entries = quarantine(gmail, 300, prefix="g") + quarantine(outlook, 200, prefix="o")
    one_mailbox = quarantine(IntegrationFactory(), 5)

    assert statements_to_replay(entries) == statements_to_replay(one_mailbox)
    gmail.refresh_from_db()
    outlook.refresh_from_db()
    assert gmail.backfill_pending == [f"g{n}" for n in range(300)]
    assert outlook.backfill_pending == [f"o{n}" for n in range(200)]


def test_an_id_already_queued_is_queued_once_and_the_queue_keeps_its_order() -> None:
    mailbox = IntegrationFactory(backfill_pending=["connect-1", "m2"])  # m2 replayed before, not read yet
    entries = quarantine(mailbox, 4)

    ledger_replay(entries=entries + entries[:2])  # the same rows twice (two ticks of the same list)

    mailbox.refresh_from_db()
    assert mailbox.backfill_pending == ["connect-1", "m2", "m0", "m1", "m3"]


def test_only_quarantined_emails_are_replayed_and_other_failed_reads_stay() -> None:
    mailbox = IntegrationFactory()
    entries = quarantine(mailbox, 2)
    done = ProcessedEmail.objects.create(integration=mailbox, message_id="done-1", outcome="tasks", tasks_created=1)
    unread = FetchFailure.objects.create(integration=mailbox, message_id="still-failing", attempts=1)

    assert ledger_replay(entries=[*entries, done]) == 2

    mailbox.refresh_from_db()
    assert mailbox.backfill_pending == ["m0", "m1"]
    assert list(ProcessedEmail.objects.values_list("message_id", flat=True)) == ["done-1"]
    assert list(FetchFailure.objects.values_list("pk", flat=True)) == [unread.pk]


def test_a_stale_list_replays_only_what_is_still_quarantined() -> None:
    mailbox = IntegrationFactory()
    entries = quarantine(mailbox, 3)
    assert ledger_replay(entries=entries) == 3

    assert ledger_replay(entries=entries) == 0  # a second press with the page's old list

    mailbox.refresh_from_db()
    assert mailbox.backfill_pending == ["m0", "m1", "m2"]


def test_nothing_quarantined_runs_no_statement() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert ledger_replay(entries=[]) == 0
    assert len(queries) == 0
