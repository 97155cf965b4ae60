"""A batch's writes cost what the batch holds, not what the tables hold (issue 12): every statement of a run
finds its rows through an index, by what the batch's mail names, among many tasks and ledger rows of other
people and of the person."""

from __future__ import annotations

import pytest
from django.db import connection

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import Integration
from sandbox.client import SandboxClient
from tasks.models import Task, TaskLink
from tests.conftest import GmailBox, connect_gmail, run_extraction
from tests.factories import IntegrationFactory, UserFactory
from tests.mail import ask
from tests.plans import statements_run, whole_reads

pytestmark = pytest.mark.django_db

# One value of these columns still holds many rows: a read that finds rows by nothing else reads them all.
MANY = {
    "tasks_task": {"user_id", "integration_id", "source", "status", "run_id"},
    "tasks_tasklink": {"integration_id"},
    "extraction_processedemail": {"integration_id", "outcome", "run_id"},
}


def mail_read_before(mailbox: Integration, count: int) -> None:
    """`count` emails read through `mailbox` before: a task from each, and its ledger row."""
    ids = [f"seed-{mailbox.pk}-{n}" for n in range(count)]
    Task.objects.bulk_create(
        Task(
            user_id=mailbox.user_id, source=Task.Source.EMAIL_AI, source_id=message_id, integration=mailbox,
            email_key=f"<{message_id}@example.org>", title=f"Old ask {message_id}", title_key=f"old ask {message_id}",
        )
        for message_id in ids
    )  # fmt: skip
    ProcessedEmail.objects.bulk_create(
        ProcessedEmail(
            integration=mailbox, message_id=message_id, email_key=f"<{message_id}@example.org>",
            outcome=ProcessedEmail.Outcome.TASKS, tasks_created=1,
        )
        for message_id in ids
    )  # fmt: skip


def test_a_batch_reads_no_table_or_index_whole_nor_all_of_the_persons_tasks(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    home = connect_gmail(sandbox, consenting_user, "person.at.home@example.com")
    read_before = ask(1)
    gmail.deliver(read_before)
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    home.deliver(read_before)  # a copy of mail read already: linked to its task, not read again
    in_both = ask(2)
    gmail.deliver(in_both)  # the same message reaches both mailboxes in one batch: one task, two links
    home.deliver(in_both)
    for n in range(3, 7):
        home.deliver(ask(n))
    others: list[Integration] = [IntegrationFactory(user=UserFactory()) for _ in range(3)]
    for mailbox in (gmail.integration, home.integration, *others):
        mail_read_before(mailbox, 1000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    with statements_run() as statements:
        run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert (run.emails_sent_to_llm, run.emails_already_done, run.tasks_created) == (5, 2, 5)  # in_both read once
    for project in (1, 2):
        task = Task.objects.get(user=consenting_user, title__contains=f"project {project} ")
        links = set(TaskLink.objects.filter(task=task).values_list("integration_id", flat=True))
        assert links == {gmail.integration.pk, home.integration.pk}
    assert whole_reads(statements, many=MANY) == []
