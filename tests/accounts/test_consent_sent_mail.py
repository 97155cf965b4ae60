"""Reading Sent mail is consent text version 3 (issue 22 point 7): a person whose consent is to version 1 or 2
keeps inbox-only runs (no Sent cursor is made or read) and is told what changes; once they agree to version 3
a Sent cursor is made for each of their mailboxes, and the next run reads the last 14 days of their Sent mail."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tests.conftest import connect_gmail, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db

SENT = SyncCursor.Purpose.SENT_MAIL


@pytest.fixture
def agreed_to_version_2(user: User) -> User:
    """The person's consent is to text version 2, given before reading Sent mail was asked for."""
    AIConsent.objects.create(user=user, text_version="2", granted_at=timezone.now())
    return user


def sent_reads(sandbox: SandboxClient) -> list[dict[str, object]]:
    return [r for r in sandbox.requests("gmail") if "SENT" in str(r["query"])]


def test_a_consent_to_version_2_reads_no_sent_mail_until_version_3_is_agreed_to(
    sandbox: SandboxClient, agreed_to_version_2: User, client: Client
) -> None:
    assert CONSENT_VERSION == "3"
    person = agreed_to_version_2
    gmail = connect_gmail(sandbox, person, "person@example.com")
    assert gmail.sent_cursor is None  # no Sent cursor is made at connect under version 2
    promise = str(sandbox.send_gmail(gmail.address, to=["sam@example.org"], body="I'll send the deck by Friday.")["id"])
    gmail.deliver(ask(11))
    sandbox.clear_requests()

    run = run_extraction(person)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert sent_reads(sandbox) == []  # Sent mail not even listed
    assert not ProcessedEmail.objects.filter(purpose=SENT).exists()
    assert all("deck" not in str(r["body"]) for r in sandbox.requests("gemini"))
    # A Sent cursor left from elsewhere is not read under version 2 either.
    SyncCursor.objects.create(integration=gmail.integration, purpose=SENT, value="", filter_hash="x")
    assert run_extraction(person).status == ExtractionRun.Status.SUCCEEDED
    assert sent_reads(sandbox) == [] and gmail.sent_cursor == ""
    SyncCursor.objects.filter(purpose=SENT).delete()

    # The person is told what changes, on the task list and the consent page, and agrees there.
    client.force_login(person)
    home = client.get("/").content.decode()
    assert 'id="consent-changed"' in home
    page = client.get("/consent/").content.decode()
    assert 'id="consent-changes"' in page and "the mail you send" in page and "I agree to version 3" in page
    assert "To and Cc" not in page.split('id="consent-changes"')[1].split("</div>")[0]  # version 2's change: agreed
    assert "Sent folder" in page  # what is read, on the page itself
    assert json.loads(client.get("/api/consent").content)["given_version"] == "2"
    assert client.post("/consent/", {"action": "grant"}).status_code == 302
    assert json.loads(client.get("/api/consent").content)["given_version"] == "3"
    assert 'id="consent-changes"' not in client.get("/consent/").content.decode()
    assert gmail.sent_cursor == ""  # made at consent, read by the next run

    after = run_extraction(person)

    assert after.status == ExtractionRun.Status.SUCCEEDED, after.error_message
    assert set(ProcessedEmail.objects.filter(purpose=SENT).values_list("message_id", flat=True)) == {promise}
    assert sum("deck" in str(r["body"]) for r in sandbox.requests("gemini")) == 1
    assert gmail.sent_cursor == f"sent:{gmail.history_id()}"


def test_a_consent_to_version_3_makes_a_sent_cursor_at_connect(sandbox: SandboxClient, user: User) -> None:
    client = Client()
    client.force_login(user)
    assert client.post("/api/consent", {"text_version": "3"}, content_type="application/json").status_code == 200
    gmail = connect_gmail(sandbox, user, "person@example.com")
    assert gmail.sent_cursor == ""
    assert client.post("/api/consent", {"text_version": "2"}, content_type="application/json").status_code == 422
