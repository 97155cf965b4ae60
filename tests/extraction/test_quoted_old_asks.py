"""A reply's quoted old ask does not come back as a new task, through a whole run (sandbox Gmail and Gemini).

The sandbox's reader makes a task of every ask sentence in the prompt, as a model reading the quote as new
text would: an old ask that the cleaner left in would be a task again.
"""

from __future__ import annotations

import pytest

from accounts.models import User
from extraction.models import ExtractionRun
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import rfc822

pytestmark = pytest.mark.django_db

NEW_ASK = "Could you book the meeting room for Tuesday?"
OLD_ASK = "Could you send me the signed contract by Friday?"

HEADERS = {
    "yandex": '24.11.2026, 10.00, "Person" <person@example.com>:',
    "zoho": "---- On Mon, 24 Nov 2026 10:00:00 +0100 person@example.com wrote ----",
    "wrote_without_a_colon": "On Mon, 24 Nov 2026 10:00:00 +0100 Person <person@example.com> wrote",
    "lowercase_original_message": "-----original message-----",
    "russian_outlook": (
        "От: Person <person@example.com>\nОтправлено: 24 ноября 2026 г. 10:00\nКому: Alex\nТема: Договор"  # noqa: RUF001
    ),
}


@pytest.mark.parametrize("header", HEADERS.values(), ids=HEADERS)
def test_the_replys_own_ask_is_a_task_and_the_quoted_old_ask_is_not(
    gmail: GmailBox, consenting_user: User, header: str
) -> None:
    gmail.deliver(
        rfc822("Re: Contract", f"Hi,\n\nThe contract is signed.\n{NEW_ASK}\n\n{header}\n\nHi Alex,\n{OLD_ASK}\n")
    )

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    titles = list(Task.objects.filter(user=consenting_user).values_list("title", flat=True))
    assert titles == ["Book the meeting room for Tuesday"]


def test_an_email_holding_a_long_list_is_read_and_the_run_succeeds(gmail: GmailBox, consenting_user: User) -> None:
    # Looking for a wrapped quote header went one call deeper per line without a full stop: a pasted list of
    # a thousand items raised RecursionError while the prompt was built, and every run stopped at this email.
    rows = "\n".join(f"#{1000 + item} 10 pcs" for item in range(1500))
    gmail.deliver(rfc822("Open orders", f"Hi,\n\nCould you ship these orders by Friday?\n{rows}\n"))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    titles = list(Task.objects.filter(user=consenting_user).values_list("title", flat=True))
    assert titles == ["Ship these orders by Friday"]
