"""Bulk Done, Dismiss and Undo with ids that are not the person's tasks (issue 31 point 8): unknown, another
person's, missing or garbled `task_ids` get a message a person can read, with htmx (into #undo) and
without (the notice on the list the post goes back to); never an empty answer, never a 500. The known ids of
the same post are still handled, and the message says how many were not."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tasks.models import Task
from tasks.services import task_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
GONE_ONE = "That task is no longer there: nothing was changed."
GONE_MANY = "Those tasks are no longer there: nothing was changed."
CHOOSE = "Select at least one task first."


@pytest.fixture
def person(client: Client, user: User) -> User:
    client.force_login(user)
    return user


def notice(response: object) -> str:
    """The text of the #undo notice in an htmx answer."""
    body = response.content.decode()  # type: ignore[attr-defined]
    assert 'id="undo"' in body, body
    return " ".join(body.split())


def test_bulk_done_of_unknown_ids_says_they_are_gone_and_changes_nothing(client: Client, person: User) -> None:
    mine = task_create(user=person, title="Mine")
    response = client.post("/tasks/bulk", {"task_ids": ["987654321", "987654322"], "status": "done"}, headers=HTMX)

    assert response.status_code == 200  # swapped into #undo (htmx swaps 2xx, 400 and 429 only)
    assert GONE_MANY in notice(response)
    assert 'id="undo-button"' not in notice(response)  # nothing to undo
    assert Task.objects.get(pk=mine.pk).status == Task.Status.OPEN


def test_bulk_done_of_another_persons_task_says_it_is_gone_and_leaves_it(client: Client, person: User) -> None:
    theirs = task_create(user=UserFactory(), title="Theirs")

    response = client.post("/tasks/bulk", {"task_ids": [theirs.pk], "status": "done"}, headers=HTMX)

    assert GONE_ONE in notice(response)
    assert "Theirs" not in response.content.decode()
    assert Task.objects.get(pk=theirs.pk).status == Task.Status.OPEN


def test_bulk_done_with_some_ids_gone_handles_the_others_and_says_how_many_were_not_found(
    client: Client, person: User
) -> None:
    a, b = task_create(user=person, title="A task"), task_create(user=person, title="B task")
    theirs = task_create(user=UserFactory(), title="Theirs")

    response = client.post(
        "/tasks/bulk",
        {"task_ids": [a.pk, b.pk, theirs.pk, "987654321", "x1"], "status": "done", "previous": "open"},
        headers=HTMX,
    )

    said = notice(response)
    assert "2 tasks marked done." in said
    assert "3 of the selected tasks are no longer there and were left out." in said
    assert 'id="undo-button"' in said
    assert set(Task.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {Task.Status.DONE}
    assert Task.objects.get(pk=theirs.pk).status == Task.Status.OPEN


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param([], id="missing"),
        pytest.param([""], id="blank"),
        pytest.param(["abc"], id="letters"),
        pytest.param(["-3"], id="negative"),
        pytest.param(["1.5"], id="decimal"),
        pytest.param(["²"], id="superscript digit"),
        pytest.param(["9" * 30], id="past bigint"),
        pytest.param(["0"], id="zero"),
    ],
)
def test_bulk_done_with_missing_or_garbled_ids_asks_to_choose_a_task(
    client: Client, person: User, ids: list[str]
) -> None:
    mine = task_create(user=person, title="Mine")

    response = client.post("/tasks/bulk", {"task_ids": ids, "status": "done"}, headers=HTMX)

    assert response.status_code == 400  # the caller's mistake; htmx still swaps it into #undo
    assert CHOOSE in notice(response)
    assert Task.objects.get(pk=mine.pk).status == Task.Status.OPEN


def test_undo_of_tasks_gone_meanwhile_says_so(client: Client, person: User) -> None:
    response = client.post("/tasks/bulk", {"task_ids": ["987654321"], "status": "open", "undo": "1"}, headers=HTMX)

    said = notice(response)
    assert GONE_ONE in said
    assert "Undone." not in said


def test_without_javascript_unknown_ids_come_back_to_the_list_with_the_message(client: Client, person: User) -> None:
    task_create(user=person, title="Mine")

    response = client.post(
        "/tasks/bulk", {"task_ids": ["987654321"], "status": "done", "back": "?status=open"}, follow=True
    )

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/?status=open"
    assert GONE_ONE in " ".join(response.content.decode().split())


def test_without_javascript_garbled_ids_come_back_to_the_list_with_the_message(client: Client, person: User) -> None:
    response = client.post("/tasks/bulk", {"task_ids": ["9" * 30, "nope"], "status": "dismissed"}, follow=True)

    assert response.status_code == 200
    assert CHOOSE in response.content.decode()


def test_without_javascript_some_ids_gone_handles_the_others_and_says_how_many(client: Client, person: User) -> None:
    mine = task_create(user=person, title="Mine")

    response = client.post("/tasks/bulk", {"task_ids": [mine.pk, "987654321"], "status": "dismissed"}, follow=True)

    said = " ".join(response.content.decode().split())
    assert "1 task dismissed." in said
    assert "1 of the selected tasks is no longer there and was left out." in said
    assert Task.objects.get(pk=mine.pk).status == Task.Status.DISMISSED
