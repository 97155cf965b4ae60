"""A consent to an earlier text stays in force for what that text said (accounts/consent.py): a person who
agreed to version 1 keeps their runs, read without recipients or their own addresses, is told what changed,
and once they agree to the new text the next run sends what it says."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.models import AIConsent, User
from extraction.models import ExtractionRun
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.extraction.test_conversations import READER, mail, prompts

pytestmark = pytest.mark.django_db


@pytest.fixture
def agreed_to_version_1(consenting_user: User) -> User:
    """The person's consent is to text version 1, given before version 2 existed."""
    AIConsent.objects.filter(user=consenting_user).delete()
    AIConsent.objects.create(user=consenting_user, text_version="1", granted_at=timezone.now())
    return consenting_user


def test_a_consent_to_version_1_keeps_runs_going_without_recipients_until_the_new_text_is_agreed_to(
    gmail: GmailBox, sandbox: SandboxClient, agreed_to_version_1: User, client: Client
) -> None:
    assert CONSENT_VERSION == "3"
    gmail.deliver(mail(to=f"Person <{READER}>", cc="Sam Lee <sam@example.org>", body="Please send the agenda."))

    run = run_extraction(agreed_to_version_1)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert Task.objects.filter(user=agreed_to_version_1).count() == 1
    [prompt] = prompts(sandbox)
    assert "Reader:" not in prompt and "\nTo:" not in prompt and "\nCc:" not in prompt
    assert READER not in prompt and "sam@example.org" not in prompt

    # The person is told, on the task list and the consent page, and agrees to the new text there.
    client.force_login(agreed_to_version_1)
    home = client.get("/").content.decode()
    assert 'id="consent-changed"' in home and 'id="consent-needed"' not in home
    page = client.get("/consent/").content.decode()
    assert 'id="consent-changes"' in page and "To and Cc" in page and "the mail you send" in page
    assert "I agree to version 3" in page
    assert json.loads(client.get("/api/consent").content)["given_version"] == "1"
    assert client.post("/consent/", {"action": "grant"}).status_code == 302
    assert 'id="consent-changed"' not in client.get("/").content.decode()
    assert 'id="consent-changes"' not in client.get("/consent/").content.decode()

    sandbox.clear_requests()
    gmail.deliver(mail(to=f"Person <{READER}>", body="Please book the train.", message_id="second@example.org"))
    assert run_extraction(agreed_to_version_1).status == ExtractionRun.Status.SUCCEEDED
    [prompt] = prompts(sandbox)
    assert f"Reader: {READER}" in prompt and f"\nTo: Person <{READER}>\n" in prompt


def test_a_revoked_consent_to_version_1_reads_nothing(
    gmail: GmailBox, sandbox: SandboxClient, agreed_to_version_1: User
) -> None:
    AIConsent.objects.filter(user=agreed_to_version_1).update(revoked_at=timezone.now())
    gmail.deliver(mail(to=f"Person <{READER}>", body="Please send the agenda."))

    run = run_extraction(agreed_to_version_1)

    assert run.status == ExtractionRun.Status.SKIPPED
    assert sandbox.requests("gemini") == []
