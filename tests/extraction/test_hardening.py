"""What an outside sender can put in a mailbox, and what a model can answer, never reaches a page, a record
or the database as it came (issue: hardening, "anyone who can email a person")."""

from __future__ import annotations

import json

import pytest

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.mail import ask, rfc822

pytestmark = pytest.mark.django_db


def echo(answer: object) -> str:
    return f"SANDBOX-ECHO-JSON: {json.dumps(answer)}"


def test_format_characters_are_stripped_from_what_is_stored(gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(rfc822("Pay\u200b the\u202e invoice", "Please pay the invoice.", sender="Bo\u202ess <b@x.com>"))

    run_extraction(consenting_user)

    task = Task.objects.get()
    assert "\u202e" not in task.email_sender + task.email_subject and "\u200b" not in task.email_subject
    assert task.email_subject == "Pay the invoice"


def test_a_title_of_zero_width_spaces_is_no_task(gmail: GmailBox, consenting_user: User, settings) -> None:
    settings.EXTRACTION_MAX_BODY_CHARS = 20_000
    invisible = {
        "emails": [
            {"email_id": "email_1", "tasks": [{"title": "\u200b\u200b\u2060", "due_date": None, "priority": "low"}]}
        ]
    }
    gmail.deliver(rfc822("Odd", f"Hi.\n{echo(invisible)}\n"))

    run = run_extraction(consenting_user)

    assert not Task.objects.exists()
    assert [r["code"] for r in run.rejections] == ["empty_title", "empty_title"]


def test_what_the_model_answered_is_never_kept_in_records(gmail: GmailBox, consenting_user: User, settings) -> None:
    settings.EXTRACTION_MAX_BODY_CHARS = 20_000
    leaking = {"emails": [{"email_id": "Your salary is 123456 EUR. Please confirm", "tasks": []}]}
    gmail.deliver(rfc822("Odd", f"Hi.\n{echo(leaking)}\n"))

    run = run_extraction(consenting_user)

    record = json.dumps(run.rejections) + run.error_message + ProcessedEmail.objects.get().last_error
    assert "123456" not in record and "salary" not in record
    assert run.rejections == [{"emails": 1, "code": "unknown_id"}, {"emails": 1, "code": "unknown_id"}]


@pytest.mark.parametrize("prompt_tokens", [-5, 10**12])
def test_untrusted_usage_figures_never_stall_a_mailbox(
    prompt_tokens: int, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    answer = {
        "candidates": [
            {
                "content": {"parts": [{"text": json.dumps({"emails": [{"email_id": "email_1", "tasks": []}]})}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": -1, "totalTokenCount": 0},
    }
    sandbox.fault("gemini", 200, body=answer, times=None)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert 0 <= run.prompt_tokens <= 2_000_000 and run.output_tokens == 0


@pytest.mark.parametrize(
    "web_link",
    ["javascript:alert(document.cookie)", "https://evil.example/owa/?ItemID=x", "http://outlook.office365.com/x"],
)
def test_a_web_link_that_is_not_outlook_on_the_web_is_never_used(
    web_link: str, outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    message_id = outlook.deliver(ask(1))
    forged = {  # Graph answers this message with a webLink of its choosing
        "id": message_id,
        "subject": "Project 1",
        "from": {"emailAddress": {"name": "Alex", "address": "alex@example.com"}},
        "receivedDateTime": "2026-11-30T10:00:00Z",
        "body": {"contentType": "text", "content": "Please send the report for project 1 by Friday."},
        "webLink": web_link,
        "conversationId": "c1",
    }
    sandbox.fault("graph", 200, route=f"messages/{message_id}", body=forged, times=None)

    run_extraction(consenting_user)

    task = Task.objects.get()
    assert task.email_link.startswith("https://outlook.office365.com/owa/?ItemID=")
