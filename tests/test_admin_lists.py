"""The admin's lists of large tables: no count of the whole table, and a search that finds what an operator
types through an index (tasks by word, person or message id; the ledger by message id or mailbox; runs by
person or number)."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.db import connection
from django.db.models import Model
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from extraction.models import ExtractionRun, FetchFailure, ProcessedEmail
from tasks.models import Task
from tasks.selectors import task_admin_search
from tests.factories import IntegrationFactory, UserFactory
from tests.plans import statements_run, whole_reads

pytestmark = pytest.mark.django_db

LISTS = [
    "tasks/task",
    "extraction/processedemail",
    "extraction/extractionrun",
    "extraction/fetchfailure",
    "integrations/integration",
    "integrations/synccursor",
    "integrations/inboundmessage",
]


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))
    return client


@pytest.fixture
def data() -> dict[str, object]:
    ann = UserFactory(email="ann@example.com")
    bob = UserFactory(email="bob@example.com")
    gmail = IntegrationFactory(user=ann, account_address="ann.work@gmail.example")
    outlook = IntegrationFactory(user=bob, provider="outlook", account_address="bob@outlook.example")

    def task(user: User, source_id: str, title: str, subject: str, sender: str) -> Task:
        return Task.objects.create(
            user=user, source="email_ai", source_id=source_id, title=title, title_key=title.lower(),
            email_subject=subject, email_sender=sender,
        )  # fmt: skip

    task(ann, "18c2f0a1", "Send the quarterly report", "Q3 numbers", "Carla Finance <carla@corp.example>")
    task(ann, "18c2f0a2", "Book the venue", "Offsite", "Dan <dan@corp.example>")
    task(bob, "AAMkAGI2", "Renew the lease", "Lease renewal", "Landlord <keys@flats.example>")
    ProcessedEmail.objects.create(integration=gmail, message_id="18c2f0a1", outcome="tasks", email_key="<a1@corp>")
    ProcessedEmail.objects.create(integration=gmail, message_id="18c2f0a9", outcome="no_tasks")
    ProcessedEmail.objects.create(integration=outlook, message_id="AAMkAGI2", outcome="quarantined")
    FetchFailure.objects.create(integration=outlook, message_id="AAMkAGI7", attempts=2)
    runs = [ExtractionRun.objects.create(user=u, trigger="schedule") for u in (ann, bob, bob)]
    return {"ann": ann, "bob": bob, "runs": runs}


def listed(operator: Client, page: str, q: str) -> str:
    response = operator.get(f"/admin/{page}/", {"q": q})
    assert response.status_code == 200
    return response.content.decode()


def task_titles(operator: Client, q: str) -> set[str]:
    body = listed(operator, "tasks/task", q)
    return set(re.findall(r'<th class="field-title"><a href="[^"]+">([^<]+)</a>', body))


@pytest.mark.parametrize("page", LISTS)
def test_no_list_counts_its_whole_table(operator: Client, data: dict[str, object], page: str) -> None:
    with CaptureQueriesContext(connection) as queries:
        assert operator.get(f"/admin/{page}/").status_code == 200
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts, "the list says how many rows it has"
    assert all("LIMIT" in sql for sql in counts), counts  # each count stops at a bound


def test_tasks_are_found_by_word_beginning_person_and_message_id(operator: Client, data: dict[str, object]) -> None:
    assert task_titles(operator, "report") == {"Send the quarterly report"}
    assert task_titles(operator, "quarter") == {"Send the quarterly report"}  # a word's beginning
    assert task_titles(operator, "offsite") == {"Book the venue"}  # the subject, any case
    assert task_titles(operator, "carla@corp.example") == {"Send the quarterly report"}  # the sender
    assert task_titles(operator, "ann@example.com") == {"Send the quarterly report", "Book the venue"}
    assert task_titles(operator, "ANN@example.com venue") == {"Book the venue"}  # every term must match
    assert task_titles(operator, "AAMkAGI2") == {"Renew the lease"}  # a message id, exactly
    assert task_titles(operator, "uarterl") == set()  # not the middle of a word: that would need a scan


def test_a_search_with_tsquery_syntax_is_just_words(operator: Client, data: dict[str, object]) -> None:
    for odd in ("report:* | lease", "!report", "'", "\\", "(&)", "a'b\\c:*", "\x00"):
        listed(operator, "tasks/task", odd)  # 200, never a syntax error


def test_the_task_search_is_the_expression_of_its_index(data: dict[str, object]) -> None:
    found = task_admin_search(tasks=Task.objects.all(), text="report")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a table this small would be scanned anyway
        # and walked in another index's order with a filter: only bitmap scans left, which must use it
        cursor.execute("SET LOCAL enable_indexscan = off")
        plan = found.explain()
    assert "task_admin_search" in plan, plan


def test_the_ledger_and_failed_reads_are_found_by_message_id_or_mailbox(
    operator: Client, data: dict[str, object]
) -> None:
    ledger = "extraction/processedemail"
    assert "18c2f0a1" in listed(operator, ledger, "18c2f0a1") and "18c2f0a9" not in listed(operator, ledger, "18c2f0a1")
    assert "18c2f0a1" in listed(operator, ledger, "<a1@corp>")  # the email's Message-ID
    by_mailbox = listed(operator, ledger, "ann.work@gmail.example")
    assert "18c2f0a1" in by_mailbox and "18c2f0a9" in by_mailbox and "AAMkAGI2" not in by_mailbox
    assert "AAMkAGI2" in listed(operator, ledger, "bob@example.com")  # the owner's address
    assert "AAMkAGI7" in listed(operator, "extraction/fetchfailure", "bob@outlook.example")


@pytest.mark.parametrize("model", [ProcessedEmail, FetchFailure])
@pytest.mark.parametrize("term", ["18c2f0a1", "<a1@corp>", "ann.work@gmail.example", "bob@example.com"])
def test_a_ledger_search_reads_through_indexes_only(data: dict[str, object], model: type[Model], term: str) -> None:
    """The ledger has a row per email read (millions), and a failed read waits in its table until its
    mailbox is read again: a message id, a Message-ID, a mailbox's or an owner's address is found through
    an index, as is every mailbox or person the search looks up on the way."""
    model_admin = admin.site.get_model_admin(model)
    with statements_run() as statements:
        found, _ = model_admin.get_search_results(RequestFactory().get("/"), model._default_manager.all(), term)
    statements.append(found.query.sql_with_params())
    assert whole_reads(statements) == []


def test_runs_are_found_by_person_or_number(operator: Client, data: dict[str, object]) -> None:
    runs: list[ExtractionRun] = data["runs"]  # type: ignore[assignment]

    def run_ids(q: str) -> set[int]:
        body = listed(operator, "extraction/extractionrun", q)
        return {int(i) for i in re.findall(r'<th class="field-pk"><a href="/admin/extraction/\w+/(\d+)/', body)}

    assert run_ids("bob@example.com") == {runs[1].pk, runs[2].pk}
    assert run_ids(str(runs[0].pk)) == {runs[0].pk}
    assert run_ids("99999999999999999999") == set()  # past a bigint: nothing, not an error
