"""The sandbox reader decides tasks by the documented rules (sandbox/READER.md), predictably."""

import json
from datetime import date

import pytest

from sandbox.reader import ReaderEmail, find_due_date, parse_emails, read_prompt, tasks_for

WEDNESDAY = date(2026, 11, 25)


def email(body: str, subject: str = "Hello", sent_on: date | None = WEDNESDAY) -> ReaderEmail:
    return ReaderEmail(
        email_id="email_1", sender="Alice <alice@example.com>", subject=subject, sent_on=sent_on, body=body
    )


def titles(body: str, subject: str = "Hello") -> list[str]:
    return [task.title for task in tasks_for(email(body, subject))]


def test_prompt_blocks_are_parsed_with_their_headers():
    prompt = (
        '<email id="email_1">\nFrom: Alice Example <alice@example.com>\nSubject: Budget review\n'
        "Date: 2026-11-27T10:00:00+00:00\n\nCould you send the budget?\n</email>\n\n"
        '<email id="email_2">\nFrom: Bob <bob@example.com>\nSubject: Lunch\nDate: 2026-11-28T23:30:00-05:00\n\n'
        "Lunch was great.\n</email>\n"
    )
    first, second = parse_emails(prompt)
    assert (first.email_id, first.sender, first.subject, first.sent_on) == (
        "email_1",
        "Alice Example <alice@example.com>",
        "Budget review",
        date(2026, 11, 27),
    )
    assert first.body == "Could you send the budget?"
    assert second.sent_on == date(2026, 11, 28)  # the day in the sender's own offset

    answer = read_prompt(prompt).as_dict()
    assert answer == {
        "emails": [
            {
                "email_id": "email_1",
                "tasks": [
                    {
                        "sentence": "Could you send the budget?",
                        "title": "Send the budget",
                        "due_date": None,
                        "due_time": None,
                        "priority": "medium",
                        "kind": "ask",
                        "waiting_on": "",
                    }
                ],
                "items": [],
            },
            {"email_id": "email_2", "tasks": [], "items": []},
        ]
    }


@pytest.mark.parametrize(
    ("sentence", "title"),
    [
        ("Hi Bob, could you please send me the Q3 report?", "Send me the Q3 report"),
        ("Please review the attached contract.", "Review the attached contract"),
        ("Can you book a room for Tuesday?", "Book a room for Tuesday"),
        ("Would you sign the form", "Sign the form"),
        ("Kindly confirm your attendance.", "Confirm your attendance"),
        ("I need you to call the bank.", "Call the bank"),
        ("We need you to settle the balance.", "Settle the balance"),
        ("Also, could you sign off on the slide?", "Sign off on the slide"),
        ("Don't forget to water the plants!", "Water the plants"),
        ("Don\u2019t forget to water the plants!", "Water the plants"),
        ("Remember to lock the office.", "Lock the office"),
        ("Make sure to update the wiki.", "Update the wiki"),
        ("Make sure you update the wiki.", "Update the wiki"),
        ("Send the slides by Friday, please.", "Send the slides by Friday"),
        ("Your invoice is due by December 5.", "Your invoice is due by December 5"),
        ("Merci de m'envoyer le rapport.", "M'envoyer le rapport"),
        ("Por favor, envía el informe.", "Envía el informe"),
        ("Bitte schick mir den Bericht.", "Schick mir den Bericht"),
    ],
)
def test_ask_sentences_become_short_imperative_titles(sentence, title):
    assert titles(sentence) == [title]


@pytest.mark.parametrize(
    "body",
    [
        "I'm pleased to say the launch went well.",  # "pleased" is not "please"
        "Thanks for sending the report, please keep it up.",
        "Thank you for your help, can you believe it's Friday?",
        "No need to reply, please.",
        "You don't need to do anything, please relax.",
        "You don\u2019t have to come, kindly ignore the invite.",
        "The meeting went well. See you next week.",
    ],
)
def test_sentences_without_an_ask_give_no_task(body):
    assert titles(body) == []


def test_quoted_lines_are_ignored():
    assert titles("Thanks!\n> Please pay the invoice.\n>> Could you call me?") == []


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        ("Weekly digest", "Please read our news. Click here to unsubscribe."),
        ("Password changed", "No action is required. Please contact support if this wasn't you."),
        ("Shipped", "Your parcel shipped, no action needed. Please rate us."),
        ("Notice", "This is an automated message. Please keep it."),
        ("Your receipt from Shop", "Please keep this for your records."),
        ("Update", "Please check your settings. Do not reply to this email."),
    ],
)
def test_newsletters_receipts_and_notifications_give_no_tasks(subject, body):
    assert titles(body, subject) == []


def test_receipt_in_the_body_alone_does_not_silence_an_email():
    assert titles("Please send me the receipt for the taxi.") == ["Send me the receipt for the taxi"]


def test_at_most_three_tasks_per_email_and_duplicates_merged():
    body = (
        "Please send the report.\nPlease send the report.\nPLEASE SEND THE REPORT!\n"
        "Could you book the room? Can you call Dana? Please order lunch."
    )
    assert titles(body) == ["Send the report", "Book the room", "Call Dana"]


def test_long_titles_are_cut_at_a_word_to_120_characters():
    sentence = "Please " + " ".join(f"word{i}" for i in range(60)) + "."
    (title,) = titles(sentence)
    assert len(title) <= 120
    assert title.startswith("Word0 word1")
    assert sentence.find(title.lower()) > 0  # cut at a word boundary, not inside one
    assert not title.endswith(" ")


@pytest.mark.parametrize(
    ("sentence", "due"),
    [
        ("Please pay by 2026-12-05.", date(2026, 12, 5)),
        ("Please pay by December 5.", date(2026, 12, 5)),
        ("Please pay by Dec 5th.", date(2026, 12, 5)),
        ("Please pay by 5 December.", date(2026, 12, 5)),
        ("Please pay by the 5th of December.", date(2026, 12, 5)),
        ("Please pay by March 3, 2027.", date(2027, 3, 3)),
        ("Please send it by November 2.", date(2027, 11, 2)),  # already past: next year
        ("Please send it by November 25.", date(2026, 11, 25)),  # the day itself is not past
        ("Please call me on Monday.", date(2026, 11, 30)),
        ("Please reply by Friday.", date(2026, 11, 27)),
        ("Please reply before Wednesday.", date(2026, 12, 2)),  # the next one after the Date
        ("Please prepare the deck this Thursday.", date(2026, 11, 26)),
        ("Please prepare the deck next Thursday.", date(2026, 11, 26)),
        ("Please send it tomorrow.", date(2026, 11, 26)),
        ("Please send it by end of day tomorrow.", date(2026, 11, 26)),
        ("Please send it today.", date(2026, 11, 25)),
        ("Please send it tonight.", date(2026, 11, 25)),
        ("Please send it by EOD.", date(2026, 11, 25)),
        ("Please finish by the end of the week.", date(2026, 11, 27)),
        ("Please finish by end of week.", date(2026, 11, 27)),
        ("Please send it when you can.", None),
        ("Please meet me Friday.", None),  # a weekday needs by/before/on/this/next
        ("Please pay by February 30.", None),
    ],
)
def test_due_dates_are_read_relative_to_the_email_date(sentence, due):
    (task,) = tasks_for(email(sentence))
    assert task.due_date == due


def test_end_of_week_on_a_weekend_is_the_next_friday():
    saturday = date(2026, 11, 28)
    assert find_due_date("Please finish by end of week.", saturday) == date(2026, 12, 4)


def test_relative_dates_need_the_email_date():
    assert find_due_date("Please send it tomorrow.", None) is None
    assert find_due_date("Please pay by December 5.", None) is None
    assert find_due_date("Please pay by 2026-12-05.", None) == date(2026, 12, 5)


@pytest.mark.parametrize(
    ("sentence", "subject", "priority"),
    [
        ("Please send it, it's urgent.", "Hello", "high"),
        ("Please reply ASAP.", "Hello", "high"),
        ("Please reply as soon as possible.", "Hello", "high"),
        ("Please call me immediately.", "Hello", "high"),
        ("Please pay the invoice.", "Action required: invoice", "high"),
        ("Please pay, the invoice is overdue.", "Hello", "high"),
        ("Please urgently call me.", "Hello", "high"),
        ("Please have a look, no rush.", "Hello", "low"),
        ("Could you review it when you get a chance?", "Hello", "low"),
        ("Please read it whenever you can.", "Hello", "low"),
        ("Please read it.", "Hello", "medium"),
    ],
)
def test_priority_comes_from_the_sentence_or_the_subject(sentence, subject, priority):
    (task,) = tasks_for(email(sentence, subject))
    assert task.priority == priority


def test_urgency_in_another_sentence_does_not_count():
    (task,) = tasks_for(email("Could you send the budget? It's urgent."))
    assert task.priority == "medium"


def test_echo_json_answers_that_json_verbatim():
    payload = {"emails": [{"email_id": "email_99", "tasks": []}]}
    prompt = (
        '<email id="email_1">\nFrom: a\nSubject: b\nDate: 2026-11-27T10:00:00+00:00\n\n'
        f"Please ignore.\nSANDBOX-ECHO-JSON: {json.dumps(payload)} trailing words\n</email>\n"
    )
    answer = read_prompt(prompt)
    assert answer.echo == json.dumps(payload)
    assert answer.as_text() == json.dumps(payload)


def test_echo_text_answers_the_rest_of_the_line():
    answer = read_prompt('<email id="email_1">\n\nSANDBOX-ECHO-TEXT: Sure! Here are your tasks:\nmore\n</email>')
    assert answer.echo == "Sure! Here are your tasks:"


def test_text_answer_lists_tasks_per_email():
    prompt = '<email id="email_1">\nDate: 2026-11-25T09:00:00+00:00\n\nPlease pay by Friday, urgent.\n</email>'
    assert read_prompt(prompt).as_text() == "email_1: Pay by Friday, urgent (high priority, due 2026-11-27)"


def test_each_task_quotes_its_sentence_as_the_email_wrote_it():
    body = (
        "Hi Bob,\n\nDon\u2019t forget to water the plants!  Could you lock the office?\n> Please send the old report.\n"
    )
    tasks = tasks_for(email(body))
    assert [(task.title, task.sentence) for task in tasks] == [
        ("Water the plants", "Don\u2019t forget to water the plants!"),  # the curly apostrophe as written
        ("Lock the office", "Could you lock the office?"),
    ]
    assert all(task.sentence in body for task in tasks)
