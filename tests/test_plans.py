"""The plan checker of tests/plans.py reports what a read walks whole (that it does not follow what autovacuum
analyzed before it is shown by tests/tasks/test_conversation_pages.py, which analyzes everything first)."""

from __future__ import annotations

import pytest

from extraction.models import ProcessedEmail
from tests.factories import IntegrationFactory
from tests.plans import statements_run, whole_reads

pytestmark = pytest.mark.django_db


@pytest.fixture
def ledger() -> None:
    box = IntegrationFactory()
    for n in range(3):
        ProcessedEmail.objects.create(integration=box, message_id=f"m{n}", outcome="no_tasks")


def reads(query: object) -> list[tuple[str, object]]:
    with statements_run() as statements:
        list(query)  # type: ignore[call-overload]
    return statements


def test_a_seek_is_not_reported_and_a_walk_by_a_later_column_is(ledger: None) -> None:
    # ledger_message_id seeks; ledger_once_per_purpose (integration, purpose, message_id) would walk
    assert whole_reads(reads(ProcessedEmail.objects.filter(message_id="m1"))) == []
    walked = whole_reads(reads(ProcessedEmail.objects.filter(purpose="x").only("id")))
    assert walked and ("the table extraction_processedemail" in walked[0] or "ledger_once_per_purpose" in walked[0])


def test_the_rows_of_one_many_column_are_reported(ledger: None) -> None:
    box = ProcessedEmail.objects.first().integration_id  # type: ignore[union-attr]
    one_mailbox = reads(ProcessedEmail.objects.filter(integration_id=box))
    assert whole_reads(one_mailbox) == []
    (found,) = whole_reads(one_mailbox, many={"extraction_processedemail": ["integration_id"]})
    assert found.startswith("all rows of one integration_id through the index ")  # one leading with it
