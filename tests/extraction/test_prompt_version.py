"""Every run records the prompt version it sent, so figures are compared across versions."""

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun
from extraction.prompt import PROMPT_VERSION
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db


def test_a_run_records_the_prompt_version_and_the_api_shows_it(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert ExtractionRun.objects.get(pk=run.pk).prompt_version == PROMPT_VERSION
    client.force_login(consenting_user)
    assert client.get(f"/api/extraction/runs/{run.pk}").json()["llm"]["prompt_version"] == PROMPT_VERSION
    assert client.get("/api/extraction/runs").json()["items"][0]["llm"]["prompt_version"] == PROMPT_VERSION


def test_a_run_not_started_yet_has_no_prompt_version(client: Client, consenting_user: User) -> None:
    run = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.API)
    client.force_login(consenting_user)
    assert client.get(f"/api/extraction/runs/{run.pk}").json()["llm"]["prompt_version"] == ""
