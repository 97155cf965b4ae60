"""Grounded tasks (issue 22 point 5, DESIGN §7.8): every task Gemini returns quotes the sentence of its email;
code finds that sentence in the cleaned text the prompt carried, and a task whose sentence is not there is not
written, and is counted on the run as `ungrounded`. Through the sandbox's Gemini, told by a control setting
(`gemini_sentences`) to quote something else."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from extraction.grounding import MAX_SENTENCE_CHARS, sentence_found
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from sandbox.demo.messages import EXPECTED_TASKS
from tasks.models import Task
from tasks.services import task_create
from tests.conftest import GmailBox, connect_gmail, run_extraction
from tests.mail import ask, rfc822
from tests.test_metrics import TOKEN, scrape, value

pytestmark = pytest.mark.django_db


# The check itself ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "text"),
    [
        # Curly, straight and French quotes, either way round, and the spaces inside « ».
        ('Could you send "the deck" by Friday?', "Hi,\nCould you send \u201cthe deck\u201d by Friday?\nAnn"),
        ("Don\u2019t forget the keys.", "Don't forget the keys."),
        ('Merci de relire "le contrat".', "Merci de relire \u00ab\u00a0le contrat\u00a0\u00bb."),
        # A line break inside the sentence (the mail was wrapped), extra spaces, tabs.
        ("Please review the budget before the board meets.", "Please review the budget\nbefore the  board\tmeets."),
        ("Please  review   the budget.", "Please review the budget."),
        # Case, dashes, an ellipsis written as one character, a final stop left out or added.
        ("please SIGN the form - today", "Please sign the form \u2014 today."),
        ("Think about it\u2026 and call me.", "Think about it... and call me"),
        ("Could you call Bob", "Could you call Bob?"),
    ],
)
def test_a_sentence_is_found_whatever_its_quotes_spaces_dashes_and_case(sentence: str, text: str) -> None:
    assert sentence_found(sentence, text)


@pytest.mark.parametrize(
    ("sentence", "text"),
    [
        ("Could you sign the contract?", "Could you send the deck?"),  # another sentence
        ("end the deck", "Could you send the deck?"),  # not a word of the email: part of one
        ("Could you send the deck to Bob?", "Could you send the deck?"),  # more than the email says
        ("", "Could you send the deck?"),
        ("...", "Could you send the deck?..."),  # nothing a person could read as evidence
        ("the", "Could you send the deck?"),
        ("Please book the cafe", "Please book the caf\u00e9."),  # an accent is not how it was typed
        ("Please book the cafe", "Please book the cafe\u0301."),  # nor when written as a combining mark
    ],
)
def test_a_sentence_that_is_not_the_emails_own_words_is_not_found(sentence: str, text: str) -> None:
    assert sentence_found(sentence, text) is None


def test_what_is_kept_is_the_emails_own_words_on_one_line_and_bounded() -> None:
    # Gemini's spelling of the quotes and case is not what is kept: the email's is.
    assert sentence_found('could you send "the deck"', "Hi,\nCould you send\n\u201cthe deck\u201d?") == (
        "Could you send \u201cthe deck\u201d?"
    )
    long = "Please " + "read this and " * 60 + "reply."
    found = sentence_found(long, long)
    assert found is not None and len(found) <= MAX_SENTENCE_CHARS and found.endswith("\u2026")


# Through a run ---------------------------------------------------------------------------------------


def test_each_task_keeps_its_sentence_and_the_page_and_the_api_show_it(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(rfc822("Review", "Hi,\n\nCould you review <b>the Q3</b> plan by Friday?\n\nAlex\n"))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    task = Task.objects.get(user=consenting_user)
    assert task.sentence == "Could you review <b>the Q3</b> plan by Friday?"
    client.force_login(consenting_user)
    page = client.get("/").content.decode()
    assert '<q class="task-sentence" dir="auto">Could you review &lt;b&gt;the Q3&lt;/b&gt; plan by Friday?</q>' in page
    assert "<b>the Q3</b>" not in page
    assert client.get(f"/api/tasks/{task.pk}").json()["sentence"] == task.sentence
    assert client.get("/api/tasks").json()["items"][0]["sentence"] == task.sentence


def test_the_sentence_is_evidence_a_person_cannot_edit(client: Client, gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(ask(1))
    run_extraction(consenting_user)
    task = Task.objects.get(user=consenting_user)
    client.force_login(consenting_user)

    refused = client.patch(
        f"/api/tasks/{task.pk}", {"sentence": "I never asked that."}, content_type="application/json"
    )
    client.post(f"/tasks/{task.pk}/edit", {"title": "Send it", "sentence": "I never asked that."})

    assert refused.status_code == 422
    task.refresh_from_db()
    assert task.sentence == "Please send the report for project 1 by Friday."


def test_a_task_without_a_sentence_shows_none(client: Client, consenting_user: User) -> None:
    task_create(user=consenting_user, title="Buy milk")  # by hand, as every task made before sentences were kept
    client.force_login(consenting_user)

    page = client.get("/").content.decode()

    assert "Buy milk" in page and "task-sentence" not in page
    assert client.get("/api/tasks").json()["items"][0]["sentence"] == ""


def test_a_sentence_keeps_the_placeholder_of_a_secret_never_the_secret(gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(rfc822("Login", "Please log in with the password: Tr0ub4dor&3x and approve the invoice.\n"))

    run_extraction(consenting_user)

    sentence = Task.objects.get(user=consenting_user).sentence
    assert "[password]" in sentence and "Tr0ub4dor" not in sentence


def test_an_ungrounded_task_is_not_written_and_is_counted_on_the_run(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings: Any
) -> None:
    invented = gmail.deliver(rfc822("Deck", "Hi,\n\nPlease send the deck by Friday.\n\nAnn\n"))
    fine = gmail.deliver(ask(2))
    sandbox.gemini_sentences({"send the deck": "Please wire 5,000 EUR to the account below."})
    settings.METRICS_TOKEN = TOKEN
    before = scrape(client)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert list(Task.objects.values_list("source_id", flat=True)) == [fine]  # the other email's task stands
    assert (run.tasks_created, run.tasks_ungrounded, run.emails_quarantined) == (1, 1, 0)
    # Handled, not a poison to isolate: in the ledger with nothing made and the count; the cursor passed it.
    ledger = ProcessedEmail.objects.get(message_id=invented)
    assert (ledger.outcome, ledger.tasks_created, ledger.last_error) == ("no_tasks", 0, "ungrounded:1")
    assert gmail.cursor == gmail.history_id()
    assert run_extraction(consenting_user).emails_sent_to_llm == 0  # never read again
    assert "5,000" not in ledger.last_error + str(run.rejections) + run.error_message  # the model's words aren't kept

    grew = value(scrape(client), "tasklift_extraction_tasks_ungrounded_total") - value(
        before, "tasklift_extraction_tasks_ungrounded_total"
    )
    assert grew == 1
    client.force_login(consenting_user)
    assert client.get(f"/api/extraction/runs/{run.pk}").json()["counts"]["ungrounded"] == 1
    assert "1 task was not kept" in client.get(f"/runs/{run.pk}").content.decode()
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))
    admin_page = client.get(f"/admin/extraction/extractionrun/{run.pk}/change/").content.decode()
    assert "Tasks not kept (sentence not in the email)" in admin_page


def test_quotes_line_breaks_and_spaces_gemini_changes_still_ground(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(rfc822("Slides", "Hi,\n\nCould you send \u201cthe slides\u201d  to   Ann by Friday?\n"))
    sandbox.gemini_sentences({"the slides": 'could you send "the slides"\nto Ann by Friday'})

    run = run_extraction(consenting_user)

    assert (run.tasks_created, run.tasks_ungrounded) == (1, 0)
    assert Task.objects.get().sentence == "Could you send \u201cthe slides\u201d to Ann by Friday?"


def test_a_sentence_only_in_the_quoted_part_the_cleaner_removed_is_ungrounded(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    old_ask = "Could you sign the contract by Monday?"
    body = (
        "Thanks, I will look at it.\n\nPlease send the deck too.\n\n"
        f"On Mon, Nov 23, 2026 at 9:14 AM Bob <bob@example.com> wrote:\n> {old_ask}\n> Bob\n"
    )
    gmail.deliver(rfc822("Re: Contract", body))
    sandbox.gemini_sentences({"send the deck": old_ask})  # Gemini recalls the old ask, as a model may

    run = run_extraction(consenting_user)

    assert old_ask in body
    assert (run.tasks_created, run.tasks_ungrounded) == (0, 1)
    assert not Task.objects.exists()
    assert ProcessedEmail.objects.get().outcome == ProcessedEmail.Outcome.NO_TASKS


def test_every_task_of_the_demo_mail_keeps_its_sentence(
    sandbox: SandboxClient, sandbox_server, consenting_user: User
) -> None:
    from sandbox.demo import load_demo_mailbox

    connect_gmail(sandbox, consenting_user, "demo@tasklift.test")
    load_demo_mailbox(sandbox_server.state, "demo@tasklift.test")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.tasks_ungrounded == 0
    assert Task.objects.count() == EXPECTED_TASKS  # the inbox's asks and the Sent mail's items
    assert not Task.objects.filter(sentence="").exists()
