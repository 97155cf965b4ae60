"""Schemathesis against the API's own OpenAPI document, as a program with a token: whatever it sends, no 5xx,
and every answer has a status the document declares for that operation and matches its schema.

Runs in-process (WSGI) with a fixed seed and a few dozen generated requests per operation (examples, coverage
and fuzzing phases; positive and negative data), so it stays quick on two cores and fails the same way twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from accounts.services import access_token_create, consent_grant
from extraction.models import ExtractionRun
from tasks.models import Task, TaskEvent
from tasks.services import task_create, task_insert_from_emails
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_closes, email_task, email_task_row

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler())

EXAMPLES_PER_OPERATION = 20


@pytest.fixture
def keep_test_connection() -> Iterator[None]:
    """A WSGI request closes the database connection when it starts and ends, which would end the test's
    transaction; Django's test client stops that the same way."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def token(db: None, keep_test_connection: None) -> str:
    """A person with something of everything, so that generated ids sometimes hit a real object."""
    user = UserFactory()
    consent_grant(user=user)
    mailbox = IntegrationFactory(user=user)
    for n in range(3):
        task_create(user=user, title=f"Task {n}")
    # A task from an email, with the sentence it came from: every answer listing it is held to the document.
    task_insert_from_emails(
        rows=[email_task_row(user, mailbox, "18c3fa9e0b000001", "Sign the lease", sentence="Please sign the lease.")]
    )
    # A waiting item an email closed, and a task with a suggestion: their history is held to the document too.
    waiting = email_task(user, mailbox, "18c3fa9e0b000002", "Send the Q3 numbers", kind=Task.Kind.WAITING)
    email_closes(waiting, email_folder="inbox", email_sender="Sam <sam@example.org>")
    changed = email_task(user, mailbox, "18c3fa9e0b000003", "Book the room", hand_changed=True)
    TaskEventFactory(task=changed, action=TaskEvent.Action.SUGGESTED, sentence="Booked for Tuesday.")
    ExtractionRun.objects.create(user=user, trigger="api")
    _, secret = access_token_create(user=user, name="schemathesis")
    return secret


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,  # the same requests every run: a failure here is a change in the code, not luck
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_keeps_to_its_document(case: schemathesis.Case, token: str) -> None:
    # Every check but "schema-valid data is accepted": a due date must fall between 2000 and ten years from
    # today, and a title must hold a visible character, which JSON Schema cannot say; such a request is a
    # documented 422 naming the field.
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, excluded_checks=[positive_data_acceptance])


def test_the_document_declares_each_tasks_sentence_and_no_input_takes_it() -> None:
    components = schema.raw_schema["components"]["schemas"]
    sentence = components["TaskOut"]["properties"]["sentence"]
    assert sentence["type"] == "string" and "sentence" in components["TaskOut"]["required"]
    assert "verbatim" in sentence["description"]
    assert all("sentence" not in components[name]["properties"] for name in ("TaskIn", "TaskPatch"))


def test_the_document_declares_each_items_kind_conversation_and_history() -> None:
    components = schema.raw_schema["components"]["schemas"]
    task = components["TaskOut"]
    for name in ("kind", "waiting_on", "conversation", "hand_changed", "history", "suggestion"):
        assert name in task["required"] and task["properties"][name].get("description"), name
    event = components["TaskEventOut"]
    assert {"action", "by", "at", "email", "sentence", "status_before", "undone_at", "can_undo"} <= set(
        event["required"]
    )
    assert all(
        name not in components[schema_name]["properties"]
        for name in ("kind", "history")
        for schema_name in ("TaskIn", "TaskPatch")
    )
    parameters = schema.raw_schema["paths"]["/api/tasks"]["get"]["parameters"]
    assert "kind" in {parameter["name"] for parameter in parameters}
    assert "/api/tasks/{task_id}/history/{event_id}/undo" in schema.raw_schema["paths"]
