"""A newsletter that reaches both of a person's mailboxes is bulk in one (Gmail: List-Unsubscribe) and read in
the other (Outlook's Focused inbox): its Outlook copy is sent to Gemini, so it takes a place in its batch. A
batch never sends Gemini more than EXTRACTION_BATCH_SIZE emails, wherever the batch boundary falls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import User
from extraction.models import ExtractionRun
from sandbox.client import SandboxClient
from tests.conftest import OutlookBox, connect_gmail, run_extraction
from tests.mail import ask, rfc822

pytestmark = pytest.mark.django_db


def test_a_copy_of_mail_that_is_bulk_in_the_other_mailbox_takes_a_place_in_its_batch(
    sandbox: SandboxClient, consenting_user: User, outlook: OutlookBox
) -> None:
    gmail = connect_gmail(sandbox, consenting_user, "person@gmail.example.com")
    newsletter = rfc822("The weekly digest", "Five links this week.\n\nUnsubscribe: https://news.example.org/u")
    newsletter = newsletter.replace("Subject:", "List-Unsubscribe: <https://news.example.org/u>\nSubject:", 1)
    # The tenth email of the first batch is the newsletter: its Gmail copy (bulk) ends that batch, its
    # Outlook copy (read) opens the next one, followed by ten more asks.
    mail = [ask(n) for n in range(9)] + [newsletter] + [ask(n) for n in range(9, 19)]
    start = datetime.now(UTC) - timedelta(hours=1)
    for minute, raw in enumerate(mail):
        at = start + timedelta(minutes=minute)
        sandbox.deliver(gmail.address, raw, internal_date=at)
        sandbox.deliver_outlook(outlook.address, raw, received_at=at + timedelta(seconds=30))  # after Gmail's

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.tasks_created == 19
