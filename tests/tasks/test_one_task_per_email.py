"""One task per email, whichever mailbox it came through (the same Message-ID in Gmail and Outlook)."""

from __future__ import annotations

import threading
from datetime import date

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import User
from sandbox.client import SandboxClient
from tasks.models import Task, TaskLink
from tasks.services import EmailTaskRow, task_create, task_insert_from_emails, task_update
from tests.conftest import connect_gmail, connect_outlook, run_extraction
from tests.factories import IntegrationFactory
from tests.mail import ask

pytestmark = pytest.mark.django_db(transaction=True)


def row(user: User, integration_id: int, message_id: str, email_key: str, title: str) -> EmailTaskRow:
    return EmailTaskRow(
        user_id=user.pk,
        integration_id=integration_id,
        message_id=message_id,
        email_key=email_key,
        title=title,
        due_date=None,
        priority="",
        email_link=f"https://mail.example/{message_id}",
        email_sender="A <a@example.com>",
        email_subject="Hello",
        email_received_at=timezone.now(),
        run_id=None,
    )


def test_the_same_message_in_both_mailboxes_gives_one_task_with_a_link_to_each(
    sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail = connect_gmail(sandbox, consenting_user, "person@gmail.example.com")
    outlook = connect_outlook(sandbox, consenting_user, "person@outlook.example.com")
    raw = ask(7)  # one message, with one Message-ID, delivered to both (forwarded, or CC'd twice)
    gmail.deliver(raw)
    outlook.deliver(raw)

    run = run_extraction(consenting_user)

    assert run.status == "succeeded", run.error_message
    task = Task.objects.get()
    assert task.title == "Send the report for project 7 by Friday"
    links = list(TaskLink.objects.filter(task=task).select_related("integration"))
    assert {link.integration.provider for link in links} == {"gmail", "outlook"}


def test_two_runs_racing_on_the_same_message_create_exactly_one_task(consenting_user: User) -> None:
    gmail = IntegrationFactory(user=consenting_user, provider="gmail")
    outlook = IntegrationFactory(user=consenting_user, provider="outlook")
    barrier = threading.Barrier(2)
    created: list[int] = []

    def insert(integration_id: int, message_id: str) -> None:
        try:
            barrier.wait(timeout=10)
            created.append(
                task_insert_from_emails(rows=[row(consenting_user, integration_id, message_id, "k@x", "Pay")])
            )
        finally:
            connection.close()

    threads = [
        threading.Thread(target=insert, args=(gmail.pk, "gmail-id")),
        threading.Thread(target=insert, args=(outlook.pk, "outlook-id")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(created) == [0, 1]
    assert Task.objects.count() == 1
    # Whichever won, a later read of the loser's mailbox links the task to it too.
    task_insert_from_emails(rows=[row(consenting_user, gmail.pk, "gmail-id", "k@x", "Pay")])
    task_insert_from_emails(rows=[row(consenting_user, outlook.pk, "outlook-id", "k@x", "Pay")])
    assert TaskLink.objects.filter(task=Task.objects.get()).count() == 2


def test_emails_without_a_message_id_are_never_merged(consenting_user: User) -> None:
    gmail = IntegrationFactory(user=consenting_user, provider="gmail")
    task_insert_from_emails(
        rows=[row(consenting_user, gmail.pk, "a", "", "Pay"), row(consenting_user, gmail.pk, "b", "", "Pay")]
    )
    assert Task.objects.count() == 2


def test_a_due_date_no_one_means_is_refused_by_hand(consenting_user: User) -> None:
    from config.errors import ApplicationError

    with pytest.raises(ApplicationError) as refused:
        task_create(user=consenting_user, title="Old", due_date=date(1900, 1, 1))
    assert refused.value.code == "invalid_due_date"
    task = task_create(user=consenting_user, title="Fine", due_date=date(2027, 1, 1))
    with pytest.raises(ApplicationError):
        task_update(task=task, due_date=date(2099, 1, 1))


def test_an_edit_changes_only_what_was_given_and_keeps_the_task_the_same_for_extraction(
    consenting_user: User,
) -> None:
    gmail = IntegrationFactory(user=consenting_user, provider="gmail")
    task_insert_from_emails(rows=[row(consenting_user, gmail.pk, "m1", "k@x", "Pay the invoice")])
    task = Task.objects.get()

    task_update(task=task, title="Pay the ACME invoice", notes="by card", priority="high")
    task_insert_from_emails(rows=[row(consenting_user, gmail.pk, "m1", "k@x", "Pay the invoice")])  # read again

    task.refresh_from_db()
    assert (task.title, task.notes, task.priority) == ("Pay the ACME invoice", "by card", "high")
    assert Task.objects.count() == 1


def test_a_copy_already_read_through_another_mailbox_is_not_sent_to_gemini_again(
    sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail = connect_gmail(sandbox, consenting_user, "person@gmail.example.com")
    outlook = connect_outlook(sandbox, consenting_user, "person@outlook.example.com")
    raw = ask(8)
    gmail.deliver(raw)
    first = run_extraction(consenting_user)
    assert (first.emails_sent_to_llm, first.tasks_created) == (1, 1)
    outlook.deliver(raw)  # the same message arrives in Outlook later (forwarded)

    second = run_extraction(consenting_user)

    assert second.status == "succeeded"
    assert (second.emails_sent_to_llm, second.llm_calls, second.emails_already_done) == (0, 0, 1)
    task = Task.objects.get()
    assert {link.integration.provider for link in TaskLink.objects.filter(task=task)} == {"gmail", "outlook"}
