""" "Extract now" without AI consent (issue 31 point 8): it answers at once that nothing was started and where
to give consent, and queues no run, on the page and in the API; it does not flash "Extraction started." first."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from accounts.models import User
from accounts.services import consent_grant
from extraction.models import ExtractionRun

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def test_extract_now_without_consent_says_so_at_once_beside_the_run_line_and_queues_no_run(
    client: Client, user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    client.force_login(user)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/extract", headers=HTMX)

    assert response.status_code == 400  # swapped by htmx (base.html), like the rate limit's 429
    assert response["HX-Retarget"] == "#rate-limit"  # beside the run line, which keeps the last run
    body = response.content.decode()
    assert 'data-status="no-consent"' in body and 'role="alert"' in body
    assert "No read was started" in body and 'href="/consent/"' in body
    assert "Extraction started" not in body
    assert not ExtractionRun.objects.exists() and broker_queue() == 0


def test_extract_now_without_consent_and_without_javascript_goes_to_the_consent_page(
    client: Client, user: User
) -> None:
    client.force_login(user)

    response = client.post("/extract", follow=True)

    assert response.redirect_chain == [("/consent/", 302)]
    page = response.content.decode()
    assert "No read was started" in page and "Extraction started" not in page
    assert not ExtractionRun.objects.exists()


def test_the_api_refuses_a_run_without_consent_with_a_code(client: Client, user: User) -> None:
    client.force_login(user)

    response = client.post("/api/extraction/runs")

    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == "no_consent" and body["extra"] == {"consent_url": "/consent/"}
    assert "consent" in body["message"]
    assert not ExtractionRun.objects.exists()


def test_presses_refused_for_consent_do_not_use_up_the_rate_limit(client: Client, user: User) -> None:
    client.force_login(user)
    for _ in range(8):
        assert client.post("/extract", headers=HTMX).status_code == 400

    consent_grant(user=user)

    assert client.post("/extract", headers=HTMX).status_code == 202
    assert ExtractionRun.objects.filter(user=user, status=ExtractionRun.Status.QUEUED).count() == 1
