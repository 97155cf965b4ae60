"""Schemathesis against the API's own OpenAPI document, as a program with a token: whatever it sends, no 5xx,
and every answer has a status the document declares for that operation and matches its schema; and every
request the document admits is accepted (it states each bound the API holds input to).

Runs in-process (WSGI) with a fixed seed and a few dozen generated requests per operation (examples, coverage
and fuzzing phases; positive and negative data), so it stays quick on two cores and fails the same way twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from zoneinfo import available_timezones

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from accounts.services import access_token_create, consent_grant
from extraction.models import ExtractionRun
from tasks.models import Task, TaskEvent
from tasks.services import task_create, task_insert_from_emails
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_closes, email_task, email_task_row

# Two operations' own settings. The coverage phase tries each value of an enum, which for PATCH /me is each of
# ~600 time zones (some 20 s): the fuzzing phase still sends zones and not-zones, and the edge test below holds
# the enum to the zones the API accepts. And a request the document admits may still be refused for the state
# of what it names, which a generated id sometimes hits: a 400 `not_undoable` (undone already),
# `suggestion_answered`, `no_sender` (a task added by hand); the document cannot say that, so there a 400 is
# an answer, not a rejected request. Elsewhere, and a 422 anywhere, a request the document admits must pass.
ACCEPTED_OR_REFUSED = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
CONFIG = SchemathesisConfig.from_dict(
    {
        "operations": [
            {"include-name": "PATCH /api/me", "phases": {"coverage": {"enabled": False}}},
            {
                "include-method": "POST",
                "include-path-regex": r"/history/\{event_id\}/|^/api/muted-senders$",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_REFUSED}},
            },
        ]
    }
)
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler(), config=CONFIG)

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
    # Every check, "schema-valid data is accepted" too: the document states each bound the API holds input to
    # (due dates, time zones, visible titles), so a request it admits is never a 422.
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})


def test_the_documented_due_dates_and_time_zones_are_accepted_to_their_edges(token: str) -> None:
    components = schema.raw_schema["components"]["schemas"]
    admits = re.compile(components["TaskIn"]["properties"]["due_date"]["anyOf"][0]["pattern"]).search
    this_year = timezone.now().year
    last_year = max(year for year in range(2000, this_year + 12) if admits(f"{year}-12-31"))
    # Whole years, from 2000 to the ninth from now (the tenth is within the bound only up to today's date).
    assert last_year >= this_year + 9 and not admits(f"{last_year + 1}-01-01") and not admits("1999-12-31")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for due in ("2000-01-01", f"{last_year}-12-31"):
        response = client.post("/api/tasks", {"title": "Renew", "due_date": due}, content_type="application/json")
        assert response.status_code == 201 and response.json()["due_date"] == due, response.content

    zones = components["MePatch"]["properties"]["timezone"]["enum"]
    assert set(zones) == available_timezones() and "Europe/Paris" in zones
    for zone in (zones[0], zones[-1]):
        response = client.patch("/api/me", {"timezone": zone}, content_type="application/json")
        assert response.status_code == 200 and response.json()["timezone"] == zone, response.content


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
