"""The Mailboxes page as its owner uses it (issue 23 point 3): "Try it again" reads a set-aside email again at
once (within the rate limit and the consent), a set-aside email names its sender and subject, "Disconnect"
asks first and says what becomes of the mailbox's tasks, and the page says how mail is read (push or sweep)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from accounts.models import User
from accounts.services import consent_revoke
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.pipeline import extraction_run_execute
from integrations.models import Integration, PushChannel
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask, rfc822

pytestmark = pytest.mark.django_db

POISON = rfc822(
    "Poison project",
    "Hi,\n\nPlease send the report for poison project by Friday.\n\nAlex\n",
    sender="Pat Poison <pat@example.com>",
)


def set_aside_one(gmail: GmailBox, sandbox: SandboxClient, user: User) -> str:
    """One email Gemini always fails on, set aside by a run; the fault then goes."""
    poison = gmail.deliver(POISON)
    sandbox.fault("gemini", 200, body={"promptFeedback": {"blockReason": "SAFETY"}}, times=None, match="poison project")
    run_extraction(user)
    assert ProcessedEmail.objects.get(outcome="quarantined").message_id == poison
    sandbox.clear_faults()
    return poison


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


def test_try_it_again_starts_a_run_at_once_that_brings_the_task(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    set_aside_one(gmail, sandbox, consenting_user)
    client.force_login(consenting_user)

    response = client.post(f"/mailboxes/{gmail.integration.pk}/replay", follow=True)

    run = ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).get()
    assert run.trigger == ExtractionRun.Trigger.MANUAL
    assert any("being read again now" in m for m in messages_of(response)), messages_of(response)
    extraction_run_execute(run=run)
    assert Task.objects.filter(title__icontains="poison project").count() == 1


def test_try_it_again_within_the_rate_limit_queues_the_email_for_the_next_run_and_says_when(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings: Settings
) -> None:
    set_aside_one(gmail, sandbox, consenting_user)
    settings.EXTRACTION_RUNS_PER_MINUTE = 1
    client.force_login(consenting_user)
    client.post("/extract")  # the minute's one run
    run = ExtractionRun.objects.get(status=ExtractionRun.Status.QUEUED)
    extraction_run_execute(run=run)  # finished: a new request would make a new run

    response = client.post(f"/mailboxes/{gmail.integration.pk}/replay", follow=True)

    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).exists()
    said = " ".join(messages_of(response))
    assert re.search(r"read again in the next run.*at most 1 extraction", said), said
    assert not ProcessedEmail.objects.filter(outcome="quarantined").exists()  # queued on its mailbox


def test_try_it_again_without_consent_starts_no_run_and_says_why(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    set_aside_one(gmail, sandbox, consenting_user)
    consent_revoke(user=consenting_user)
    client.force_login(consenting_user)

    response = client.post(f"/mailboxes/{gmail.integration.pk}/replay", follow=True)

    assert not ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED).exists()
    said = " ".join(messages_of(response))
    assert "AI consent" in said, said


def test_a_set_aside_email_shows_its_sender_and_subject(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    set_aside_one(gmail, sandbox, consenting_user)
    client.force_login(consenting_user)
    body = client.get("/mailboxes/").content.decode()
    aside = body[body.index('class="set-aside"') :]
    assert "Pat Poison &lt;pat@example.com&gt;" in aside
    assert "Poison project" in aside


def test_disconnect_asks_first_and_says_what_happens_to_the_mailboxs_tasks(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    gmail.deliver(ask(2))
    run_extraction(consenting_user)
    client.force_login(consenting_user)
    body = client.get("/mailboxes/").content.decode()

    # Disconnecting is behind a first step that explains it, and the button that does it looks dangerous.
    block = re.search(r'<details class="disconnect"[^>]*>(.*?)</details>', body, re.S)
    assert block is not None, body
    assert "<summary" in block[1] and "Disconnect…" in block[1]
    explained = re.sub(r"\s+", " ", block[1])
    assert "2 open tasks from this mailbox stay in your list" in explained, explained
    assert re.search(r'<button type="submit" class="danger"[^>]*data-action="disconnect"', block[1])
    # "Try it again" and the rest are not inside it.
    assert body.count('data-action="disconnect"') == 1


def test_the_page_says_how_each_mailbox_is_read_push_or_sweep(
    client: Client, gmail: GmailBox, consenting_user: User, settings: Settings
) -> None:
    settings.EXTRACTION_SCHEDULE_MINUTES = 10
    client.force_login(consenting_user)
    body = client.get("/mailboxes/").content.decode()
    assert "every 10 minutes" in body
    assert 'data-push="off"' in body  # the test settings turn push off

    PushChannel.objects.create(
        integration=gmail.integration, external_id="projects/x/topics/y", expires_at=timezone.now() + timedelta(days=6)
    )
    Integration.objects.filter(pk=gmail.integration.pk).update(notified_at=timezone.now() - timedelta(minutes=3))
    body = re.sub(r"\s+", " ", client.get("/mailboxes/").content.decode())
    assert 'data-push="on"' in body
    assert "within seconds" in body
    assert "reads each healthy mailbox every" not in body  # the old sentence, which push made untrue

    PushChannel.objects.filter(integration=gmail.integration).update(last_error="Pub/Sub topic not found")
    body = re.sub(r"\s+", " ", client.get("/mailboxes/").content.decode())
    assert 'data-push="failed"' in body
    assert "Pub/Sub topic not found" not in body  # the provider's words stay in the admin
