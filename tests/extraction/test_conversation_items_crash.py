"""A run killed while it closes an item (issue 22 point 4): the close and its history row are one transaction,
so a kill before its commit leaves neither, and the next run closes the item once, with one row; a kill after
it leaves both, and the next run changes nothing again."""

from __future__ import annotations

import signal

import pytest

from accounts.models import User
from tasks.models import Task, TaskEvent
from tests.conftest import GmailBox, run_extraction
from tests.extraction.test_conversation_items import ASK, raw
from tests.processes import run_extract

# slow: runs killed in processes of their own (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("point", ["batch_tx", "after_batch"])
def test_a_run_killed_while_it_closes_an_item_closes_it_once_with_one_history_row(
    gmail: GmailBox, consenting_user: User, point: str
) -> None:
    gmail.deliver(raw(1, ASK))
    run_extraction(consenting_user)
    gmail.deliver(raw(2, "Never mind, we found the deck."))

    killed = run_extract(consenting_user.email, crash_point=point)
    assert killed.returncode == -signal.SIGKILL
    rows_at_kill = TaskEvent.objects.count()
    assert rows_at_kill == (0 if point == "batch_tx" else 1)
    assert Task.objects.get().status == (Task.Status.OPEN if point == "batch_tx" else Task.Status.DONE)

    run_extraction(consenting_user)
    run_extraction(consenting_user)

    task = Task.objects.get()
    assert task.status == Task.Status.DONE
    [event] = TaskEvent.objects.all()
    assert (event.task_id, event.action, event.sentence) == (task.pk, "closed", "Never mind, we found the deck.")
