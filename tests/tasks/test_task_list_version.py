"""The version an open task list polls every 4 s (`task_list_version`): it changes with every change to the
person's tasks, whoever makes it (the pipeline, the page, the API, the admin, a deleted mailbox), never with
another person's, and reading it costs the same for 2,000 tasks as for one: it reads none of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.db import connection, transaction
from django.test import Client

from accounts.models import User
from tasks.models import Task
from tasks.selectors import task_list_version
from tasks.services import (
    EmailCopy,
    task_bulk_set_status,
    task_create,
    task_insert_from_emails,
    task_link_copies,
    task_set_status,
    task_update,
)
from tests.factories import IntegrationFactory, UserFactory, email_task_row
from tests.plans import statements_run, whole_reads

T = TypeVar("T")


@pytest.fixture
def operator(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))
    return client


class Versions:
    """The person's version before and after each change."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.last = task_list_version(user=user)

    def moved(self) -> bool:
        now = task_list_version(user=self.user)
        moved, self.last = now != self.last, now
        return moved


@pytest.mark.django_db
def test_every_kind_of_change_to_a_persons_tasks_moves_the_version(operator: Client) -> None:
    person = UserFactory()
    gmail, outlook = IntegrationFactory(user=person), IntegrationFactory(user=person, provider="outlook")
    versions = Versions(person)

    task_insert_from_emails(
        rows=[email_task_row(person, gmail, "m1", "Send the report"), email_task_row(person, gmail, "m2", "Book")]
    )
    assert versions.moved(), "the pipeline's insert"
    task_insert_from_emails(rows=[email_task_row(person, gmail, "m1", "Send the report")])
    assert not versions.moved(), "an email read again inserts nothing, and the list has nothing to show"
    copy = EmailCopy(person.pk, outlook.pk, "AAMk1", "<m1@example.com>", "https://outlook.example/AAMk1")
    task_link_copies(copies=[copy])
    assert versions.moved(), "the copy in Outlook gives the task a second mailbox badge"

    task = task_create(user=person, title="Call the bank")
    assert versions.moved(), "added by hand"
    task_update(task=task, title="Call the bank about the card")
    assert versions.moved(), "edited"
    task_set_status(task=task, status=Task.Status.DONE)
    assert versions.moved(), "done"
    task_set_status(task=task, status=Task.Status.OPEN)
    assert versions.moved(), "undone"
    task_set_status(task=task, status=Task.Status.DISMISSED)
    assert versions.moved(), "dismissed"
    ids = list(Task.objects.filter(user=person).values_list("pk", flat=True))
    assert task_bulk_set_status(user=person, task_ids=ids, status=Task.Status.DONE) == 3
    assert versions.moved(), "bulk done"
    Task.objects.filter(pk=task.pk).update(priority=Task.Priority.HIGH)
    assert versions.moved(), "a write outside the services (the admin's change form, a shell)"

    assert operator.post(f"/admin/tasks/task/{task.pk}/delete/", {"post": "yes"}).status_code == 302
    assert versions.moved(), "deleted in the admin: the latest change of the others did not move"
    report, book = (Task.objects.get(user=person, source_id=m) for m in ("m1", "m2"))
    delete_selected = {"action": "delete_selected", "_selected_action": [book.pk], "post": "yes"}
    assert operator.post("/admin/tasks/task/", delete_selected).status_code == 302
    assert versions.moved(), "deleted with the admin's bulk action"

    assert operator.post(f"/admin/integrations/integration/{outlook.pk}/delete/", {"post": "yes"}).status_code == 302
    assert list(Task.objects.filter(user=person)) == [report]
    assert versions.moved(), "a mailbox deleted: its badge leaves the task"


@pytest.mark.django_db
def test_another_persons_changes_leave_the_version_alone() -> None:
    person, other = UserFactory(), UserFactory()
    task_create(user=person, title="Mine")
    versions = Versions(person)

    theirs = task_create(user=other, title="Theirs")
    task_update(task=theirs, title="Theirs, renamed")
    task_insert_from_emails(rows=[email_task_row(other, IntegrationFactory(user=other), "m1", "Theirs too")])
    Task.objects.filter(user=other).delete()

    assert not versions.moved()


@pytest.mark.django_db
def test_a_person_with_tasks_can_be_deleted(operator: Client) -> None:
    person = UserFactory()
    task_insert_from_emails(rows=[email_task_row(person, IntegrationFactory(user=person), "m1", "Send the report")])
    task_create(user=person, title="Call the bank")

    assert operator.post(f"/admin/accounts/user/{person.pk}/delete/", {"post": "yes"}).status_code == 302

    assert not User.objects.filter(pk=person.pk).exists()
    assert not Task.objects.filter(user_id=person.pk).exists()


# Concurrency ------------------------------------------------------------------------------------------


def in_thread(work: Callable[[], T]) -> T:
    """`work` on a connection of its own (so it sees only what is committed), closed after."""
    result: list[T] = []

    def run() -> None:
        try:
            result.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert result, "the work did not finish"
    return result[0]


def wait_until_it_waits_for_a_lock_or_ends(thread: threading.Thread) -> None:
    deadline = time.monotonic() + 10
    while thread.is_alive() and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # read pg_stat_activity afresh
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:  # type: ignore[index]
                return
        time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_an_edit_that_commits_after_a_later_one_still_moves_the_version() -> None:
    """An edit stamped earlier but committed later: the latest `updated_at` a poll saw between the two
    commits is still the latest after, so a version read from it would never show that edit."""
    person = UserFactory()
    first = task_create(user=person, title="First")
    second = task_create(user=person, title="Second")

    def edit_second() -> None:
        try:
            task_update(task=Task.objects.get(pk=second.pk), title="Second, edited later")
        finally:
            connection.close()

    with transaction.atomic():
        task_update(task=first, title="First, edited earlier")  # stamped now, committed below
        later = threading.Thread(target=edit_second)
        later.start()
        wait_until_it_waits_for_a_lock_or_ends(later)
        polled_between = in_thread(lambda: task_list_version(user=person))
    later.join(timeout=30)
    assert not later.is_alive()

    assert in_thread(lambda: task_list_version(user=person)) != polled_between
    assert Task.objects.filter(user=person, title__endswith="edited earlier").exists()


# Cost -------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_poll_reads_none_of_the_persons_tasks(client: Client) -> None:
    person = UserFactory()
    mailbox = IntegrationFactory(user=person)
    task_insert_from_emails(rows=[email_task_row(person, mailbox, f"m{n}", f"Task {n}") for n in range(2000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    client.force_login(person)
    version = client.get("/").content.decode().split('data-version="', 1)[1].split('"', 1)[0]

    with statements_run() as statements:
        assert client.get("/tasks/changes", {"v": version}, headers={"HX-Request": "true"}).status_code == 204

    assert statements
    assert not [sql for sql, _ in statements if '"tasks_task"' in sql], "the poll reads the person's tasks"
    assert whole_reads(statements) == []
