"""The Mailboxes page right after a connect (issue 31 point 7): it says what is happening ("Setting up instant
updates…", "Waiting for the first read", "First read in progress…") and shows the failure words ("Push could
not be turned on…", "Not read successfully yet.") only once a failure is real: push refused with its error
recorded, push still not on PUSH_SETUP_GRACE after the connect, or a run that read the mailbox failed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.jobs import push_channel_open_job, push_channel_renew_job
from integrations.models import Integration, PushChannel
from integrations.push import push_channel_open
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, connect_outlook, run_extraction
from tests.integrations.test_connect import connect_through_pages
from tests.mail import ask

pytestmark = pytest.mark.django_db

SETTING_UP = "Setting up instant updates…"
PUSH_FAILED = "Push could not be turned on"
WAITING = "Waiting for the first read"
IN_PROGRESS = "First read in progress"
NOT_READ = "Not read successfully yet."
PUSH_SETUP_GRACE = timedelta(minutes=10)  # integrations/views.py names it too


@pytest.fixture
def push_on(settings: Settings) -> None:
    """Push as it is in production (the test settings turn it off): each connect opens a channel in a job."""
    settings.PUSH_ENABLED = True


def mailbox_item(client: Client, integration: Integration) -> str:
    """What the page says of one mailbox, in the words a person reads."""
    page = client.get("/mailboxes/").content.decode()
    return _item_of(page, integration)


def _item_of(page: str, integration: Integration) -> str:
    start = page.index(f'id="mailbox-{integration.pk}"')
    item = page[start : page.index("</li>\n", page.index('data-action="disconnect"', start))]
    return re.sub(r"\s+", " ", item)


def connected_long_ago(integration: Integration) -> None:
    Integration.objects.filter(pk=integration.pk).update(
        created_at=timezone.now() - PUSH_SETUP_GRACE - timedelta(minutes=1)
    )


# Right after a connect: what is happening ---------------------------------------------------------


def test_just_connected_gmail_says_instant_updates_are_being_set_up_and_waits_for_its_first_read(
    client: Client, sandbox: SandboxClient, consenting_user: User, push_on: None
) -> None:
    sandbox.create_mailbox("new@example.com")
    client.force_login(consenting_user)

    page = connect_through_pages(client, "new@example.com")  # lands on Mailboxes, its push job not run yet

    integration = Integration.objects.get(user=consenting_user)
    assert not PushChannel.objects.exists()
    item = _item_of(page.content.decode(), integration)
    assert SETTING_UP in item and 'data-push="setting_up"' in item
    assert WAITING in item
    assert PUSH_FAILED not in item and NOT_READ not in item
    assert "Last problem" not in item


def test_just_connected_outlook_says_instant_updates_are_being_set_up(
    client: Client, sandbox: SandboxClient, consenting_user: User, push_on: None
) -> None:
    box = connect_outlook(sandbox, consenting_user, "new@outlook.example.com")
    client.force_login(consenting_user)

    item = mailbox_item(client, box.integration)

    assert SETTING_UP in item and WAITING in item
    assert PUSH_FAILED not in item and NOT_READ not in item


def test_a_first_read_asked_for_says_it_is_in_progress(
    client: Client, gmail: GmailBox, consenting_user: User, push_on: None
) -> None:
    client.force_login(consenting_user)
    client.post("/extract")  # queued: no worker in this test takes it

    assert ExtractionRun.objects.get().status == ExtractionRun.Status.QUEUED
    item = mailbox_item(client, gmail.integration)
    assert IN_PROGRESS in item
    assert NOT_READ not in item and WAITING not in item


def test_a_refused_first_push_open_is_setting_up_within_the_grace_period_and_a_failure_after_it(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, push_on: None
) -> None:
    """A first open the provider refused leaves no channel to hold its error; beat's maintenance tries again
    every PUSH_MAINTAIN_SECONDS, so only a channel still missing past the grace period is a failure."""
    sandbox.fault("gmail", 500, route="/watch", times=None)
    assert push_channel_open_job(gmail.integration.pk) is False
    client.force_login(consenting_user)

    assert SETTING_UP in mailbox_item(client, gmail.integration)

    connected_long_ago(gmail.integration)
    item = mailbox_item(client, gmail.integration)
    assert PUSH_FAILED in item and 'data-push="failed"' in item
    assert SETTING_UP not in item


def test_push_still_off_past_the_grace_period_says_it_could_not_be_turned_on(
    client: Client, gmail: GmailBox, consenting_user: User, push_on: None
) -> None:
    connected_long_ago(gmail.integration)  # its push job never ran (a broker down at the connect, say)
    client.force_login(consenting_user)

    item = mailbox_item(client, gmail.integration)

    assert PUSH_FAILED in item and SETTING_UP not in item


# Failures that are real -----------------------------------------------------------------------------


def test_a_push_error_recorded_says_push_could_not_be_turned_on_even_right_after_connecting(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, push_on: None
) -> None:
    assert push_channel_open(integration=gmail.integration) is not None
    sandbox.fault("gmail", 500, route="/watch", times=None)
    assert push_channel_renew_job(gmail.integration.pk) is False  # Gmail refused: the error is on the channel
    assert PushChannel.objects.get().last_error
    client.force_login(consenting_user)

    item = mailbox_item(client, gmail.integration)

    assert PUSH_FAILED in item and 'data-push="failed"' in item
    assert SETTING_UP not in item


def test_a_first_read_that_failed_at_the_provider_says_not_read_successfully_yet(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, push_on: None
) -> None:
    sandbox.fault("gmail", 500, route="/history", times=None)
    run = run_extraction(consenting_user)
    assert run.mailboxes[str(gmail.integration.pk)]["status"] == "failed"  # left out of the run, its cursor kept
    client.force_login(consenting_user)

    item = mailbox_item(client, gmail.integration)

    assert NOT_READ in item
    assert "Last problem: Gmail could not be reached." in item
    assert WAITING not in item and IN_PROGRESS not in item
    assert SETTING_UP in item  # push is a separate matter: its job has not run yet, which is no failure


def test_a_first_read_that_failed_at_gemini_says_not_read_successfully_yet(
    client: Client, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    sandbox.fault("gemini", 503, times=None)
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.FAILED
    gmail.integration.refresh_from_db()
    assert gmail.integration.last_error_code == ""  # Gmail answered: only the run's record holds the failure
    client.force_login(consenting_user)

    item = mailbox_item(client, gmail.integration)

    assert NOT_READ in item
    assert WAITING not in item and IN_PROGRESS not in item


def test_a_mailbox_read_once_says_when_and_no_first_read_words(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    client.force_login(consenting_user)

    item = mailbox_item(client, gmail.integration)

    assert "Last read successfully" in item
    assert NOT_READ not in item and WAITING not in item and IN_PROGRESS not in item
