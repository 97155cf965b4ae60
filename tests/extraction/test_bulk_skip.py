"""Bulk mail is skipped before Gemini (issue 13): recorded in the ledger with its reason (handled, so the
cursor passes it), counted on the run, and each can be read anyway; a person can read them all, or always
read a sender. A bill or a form to sign that the provider files as the person's is still read."""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import AlwaysReadSender, ExtractionRun, ProcessedEmail
from integrations.models import Integration
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def message(subject: str, body: str, *, sender: str = "News <news@shop.example>", **headers: str) -> str:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = "Person <person@example.com>"
    mail["Subject"] = subject
    mail["Message-ID"] = f"<{abs(hash(subject))}@shop.example>"
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body)
    return mail.as_string()


NEWSLETTER = message(
    "Our spring sale",
    "Hi,\n\nCould you look at our new spring collection? Everything is 20% off this week.\n",
    List_Unsubscribe="<https://shop.example/unsubscribe>",
    Precedence="bulk",
)
BILL = message(
    "Your invoice 55",
    "Hello,\n\nPlease send the payment for invoice 55 by Friday.\n",
    sender="Billing <billing@power.example>",
    List_Unsubscribe="<https://power.example/unsubscribe>",
)


def prompts(sandbox: SandboxClient) -> str:
    return "\n".join(r["body"] for r in sandbox.requests("gemini") if "generateContent" in r["path"])


def test_a_newsletter_is_skipped_with_its_reason_and_a_bill_filed_as_the_persons_is_read(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    newsletter = sandbox.deliver(gmail.address, NEWSLETTER, labels=["INBOX", "CATEGORY_PROMOTIONS"])["id"]
    bill = sandbox.deliver(gmail.address, BILL, labels=["INBOX", "CATEGORY_UPDATES"])["id"]
    before = gmail.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert (run.emails_skipped, run.emails_sent_to_llm, run.tasks_created) == (1, 1, 1)
    skipped = ProcessedEmail.objects.get(message_id=newsletter)
    assert (skipped.outcome, skipped.last_error) == ("skipped", "bulk:category_promotions")
    assert (skipped.sender, skipped.subject) == ("News <news@shop.example>", "Our spring sale")
    assert ProcessedEmail.objects.get(message_id=bill).outcome == "tasks"
    assert "spring collection" not in prompts(sandbox) and "invoice 55" in prompts(sandbox)
    assert gmail.cursor != before  # skipped mail is handled: the cursor passes it


def test_read_this_one_sends_a_skipped_email_in_the_next_run(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    sandbox.deliver(gmail.address, NEWSLETTER, labels=["INBOX", "CATEGORY_PROMOTIONS"])
    run_extraction(consenting_user)
    entry = ProcessedEmail.objects.get(outcome="skipped")
    client.force_login(consenting_user)
    page = client.get("/mailboxes/").content.decode()
    assert "Our spring sale" in page and "filed under Promotions" in page

    response = client.post(f"/mailboxes/skipped/{entry.pk}/read")

    assert response.status_code == 302
    run = run_extraction(consenting_user)
    assert (run.emails_skipped, run.emails_sent_to_llm) == (0, 1)
    assert "spring collection" in prompts(sandbox)
    assert ProcessedEmail.objects.get(message_id=entry.message_id).outcome == "tasks"
    assert Integration.objects.get(pk=gmail.integration.pk).read_anyway == []


def test_always_read_a_sender_and_reading_all_bulk_mail(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    sandbox.deliver(gmail.address, NEWSLETTER, labels=["INBOX", "CATEGORY_PROMOTIONS"])
    run_extraction(consenting_user)
    entry = ProcessedEmail.objects.get(outcome="skipped")
    client.force_login(consenting_user)

    client.post(f"/mailboxes/skipped/{entry.pk}/always")

    assert AlwaysReadSender.objects.filter(user=consenting_user, address="news@shop.example").exists()
    later = message("Summer sale", "Could you look at the summer collection?", List_Unsubscribe="<x>")
    sandbox.deliver(gmail.address, later, labels=["INBOX", "CATEGORY_PROMOTIONS"])
    run = run_extraction(consenting_user)
    assert (run.emails_skipped, run.emails_sent_to_llm) == (0, 2)  # the skipped one and the new one

    other = message(
        "Forum digest", "Could you answer the thread?", sender="Forum <digest@forum.example>", List_Id="<f.example>"
    )
    sandbox.deliver(gmail.address, other)
    assert client.post("/settings/bulk-mail", {"read_bulk_mail": "on"}).status_code == 302
    run = run_extraction(consenting_user)
    assert (run.emails_skipped, run.emails_sent_to_llm) == (0, 1)  # the person reads bulk mail now


def test_outlook_mail_filed_under_other_with_an_unsubscribe_link_is_skipped(
    sandbox: SandboxClient, outlook: OutlookBox, consenting_user: User
) -> None:
    sandbox.deliver_outlook(outlook.address, NEWSLETTER, inference="other")
    sandbox.deliver_outlook(outlook.address, BILL, inference="focused")

    run = run_extraction(consenting_user)

    assert (run.emails_skipped, run.emails_sent_to_llm, run.tasks_created) == (1, 1, 1)
    assert ProcessedEmail.objects.filter(outcome="skipped").get().last_error.startswith("bulk:")


def test_someone_elses_skipped_email_cannot_be_read_or_followed(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    sandbox.deliver(gmail.address, NEWSLETTER, labels=["INBOX", "CATEGORY_PROMOTIONS"])
    run_extraction(consenting_user)
    entry = ProcessedEmail.objects.get(outcome="skipped")
    client.force_login(UserFactory())

    for action in ("read", "always"):
        response = client.post(f"/mailboxes/skipped/{entry.pk}/{action}", follow=True)
        assert "not there any more" in response.content.decode()
    assert ProcessedEmail.objects.get(pk=entry.pk).outcome == "skipped"
    assert not AlwaysReadSender.objects.exists()


def test_secrets_are_counted_on_the_run_and_never_sent(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User, client: Client
) -> None:
    gmail.deliver(
        message(
            "Sign in",
            "Hi,\n\nYour verification code is 482913.\nCould you send the report by Friday?\n",
            sender="Alex <alex@example.com>",
        )
    )

    run = run_extraction(consenting_user)

    assert run.secrets_redacted >= 1
    assert "482913" not in prompts(sandbox)
    client.force_login(consenting_user)
    counts: dict[str, Any] = client.get(f"/api/extraction/runs/{run.pk}").json()["counts"]
    assert counts["secrets_redacted"] == run.secrets_redacted and counts["skipped_bulk"] == 0
    assert Task.objects.filter(user=consenting_user).count() == 1
