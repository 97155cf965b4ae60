from datetime import UTC, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from accounts.services import consent_grant
from extraction.models import ExtractionRun
from tests.conftest import GmailBox, connect_gmail, run_extraction
from tests.extraction.test_scheduling import scan_and_check
from tests.factories import UserFactory
from tests.mail import ask

pytestmark = pytest.mark.django_db


def test_extract_now_queues_a_run_after_commit_and_shows_its_progress(
    client: Client, consenting_user: User, broker_queue, django_capture_on_commit_callbacks
) -> None:
    client.force_login(consenting_user)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/extract", HTTP_HX_REQUEST="true")
    assert broker_queue() == 0  # nothing is sent before the run row is committed
    for callback in callbacks:
        callback()
    assert broker_queue() == 1
    run = ExtractionRun.objects.get()
    assert (run.trigger, run.status) == ("manual", "queued")
    body = response.content.decode()
    assert response.status_code == 202
    assert f'hx-get="/runs/{run.pk}"' in body  # polls until the run ends


def test_extract_now_without_javascript_redirects_home(client: Client, consenting_user: User) -> None:
    client.force_login(consenting_user)
    response = client.post("/extract")
    assert response.status_code == 302


def test_extract_now_needs_post_and_login(client: Client) -> None:
    assert client.get("/extract").status_code in (302, 405)
    assert client.post("/extract").status_code == 302  # to the login page
    assert not ExtractionRun.objects.exists()


def test_a_finished_run_stops_polling_and_refreshes_the_task_list(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    run = run_extraction(consenting_user)
    client.force_login(consenting_user)
    response = client.get(f"/runs/{run.pk}", HTTP_HX_REQUEST="true")
    assert response["HX-Trigger"] == "tasksChanged"
    body = response.content.decode()
    assert "hx-get" not in body
    assert "1 task created" in body
    assert "Send the report for project 1" in client.get("/tasks/list").content.decode()


def test_someone_elses_run_is_not_found(client: Client, gmail: GmailBox, consenting_user: User) -> None:
    run = run_extraction(consenting_user)
    client.force_login(UserFactory())
    assert client.get(f"/runs/{run.pk}").status_code == 404
    assert client.get(f"/api/extraction/runs/{run.pk}").status_code == 404


def test_api_reads_the_run_record(client: Client, gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(ask(1))
    run = run_extraction(consenting_user)
    client.force_login(consenting_user)
    record = client.get(f"/api/extraction/runs/{run.pk}").json()
    assert record["status"] == "succeeded"
    assert record["counts"] == {
        "fetched": 1,
        "already_done": 0,
        "sent_to_llm": 1,
        "tasks_created": 1,
        "ungrounded": 0,
        "quarantined": 0,
        "cut_to_fit": 0,
        "skipped_bulk": 0,
        "secrets_redacted": 0,
        "items_closed": 0,
        "items_updated": 0,
        "items_suggested": 0,
        "commitments_created": 0,
        "waiting_created": 0,
        "item_answers_refused": 0,
        "old_asks_skipped": 0,
    }
    assert record["llm"]["calls"] == 1


def test_the_schedule_queues_runs_only_for_consenting_people_with_a_mailbox(
    sandbox,
) -> None:
    with_all = UserFactory()
    consent_grant(user=with_all)
    connect_gmail(sandbox, with_all, "a@example.com").deliver(ask(1))
    no_consent = UserFactory()
    connect_gmail(sandbox, no_consent, "b@example.com").deliver(ask(2))
    no_mailbox = UserFactory()
    consent_grant(user=no_mailbox)

    queued = scan_and_check()

    assert queued == 1
    assert list(ExtractionRun.objects.values_list("user", "trigger")) == [(with_all.pk, "schedule")]


def test_home_asks_for_consent_and_a_mailbox_first(client: Client, user: User) -> None:
    client.force_login(user)
    body = client.get("/").content.decode()
    assert 'id="consent-needed"' in body
    assert 'id="mailbox-needed"' in body


def test_mailboxes_page_shows_set_aside_emails_and_replays_them(
    client: Client, gmail: GmailBox, consenting_user: User, settings
) -> None:
    from extraction.models import ProcessedEmail
    from tests.mail import rfc822

    settings.EXTRACTION_MAX_BODY_CHARS = 20_000
    gmail.deliver(rfc822("Odd one", "Please look.\nSANDBOX-ECHO-TEXT: not json\n"))
    run_extraction(consenting_user)
    client.force_login(consenting_user)
    page = client.get("/mailboxes/").content.decode()
    assert "1 email was set aside" in page
    assert "The AI&#x27;s answers for this email could not be trusted." in page
    entry = ProcessedEmail.objects.get()
    assert f"#all/{entry.message_id}" in page  # a link to open it in Gmail

    response = client.post(f"/mailboxes/{gmail.integration.pk}/replay", follow=True)

    assert "1 email is being read again now" in response.content.decode()  # a run started at once
    assert not ProcessedEmail.objects.exists()
    gmail.integration.refresh_from_db()
    assert len(gmail.integration.backfill_pending) == 1


def test_the_seventh_press_without_javascript_shows_a_429_page(client: Client, consenting_user: User) -> None:

    client.force_login(consenting_user)
    for _ in range(6):
        client.post("/extract")
    response = client.post("/extract")
    assert response.status_code == 429
    assert response["Retry-After"]
    assert "at most 6 extractions a minute" in response.content.decode()


def test_mailboxes_page_and_run_record_show_a_resync_and_what_was_not_read(
    client: Client, gmail: GmailBox, sandbox, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_RESYNC_MAX_MESSAGES = 2
    for n in range(3):
        gmail.deliver(ask(n))
    sandbox.expire_history(gmail.address)
    run = run_extraction(consenting_user)
    client.force_login(consenting_user)

    page = client.get("/mailboxes/").content.decode()
    assert "the provider had forgotten where Tasklift stopped reading" in page
    assert "1 older email in your inbox was more than it looks through at once and not read" in page
    record = client.get(f"/runs/{run.pk}").content.decode()
    assert "Tasklift read again all mail that came into your inbox since" in record and "1 older email in" in record
    api = client.get(f"/api/extraction/runs/{run.pk}").json()
    assert api["mailboxes"][0]["resync"] == "expired" and api["mailboxes"][0]["not_read"] == 1


def test_mailboxes_page_says_when_an_email_could_not_be_read_yet(
    client: Client, gmail: GmailBox, sandbox, consenting_user: User
) -> None:
    message_id = gmail.deliver(ask(1))
    sandbox.fault("gmail", 500, route=f"messages/{message_id}", times=None)
    run_extraction(consenting_user)
    client.force_login(consenting_user)

    page = client.get("/mailboxes/").content.decode()

    assert "1 email could not be read yet" in page


def test_the_rate_limit_refusal_shows_beside_the_queued_run_with_a_countdown(
    client: Client, consenting_user: User
) -> None:

    client.force_login(consenting_user)
    for _ in range(6):
        started = client.post("/extract", HTTP_HX_REQUEST="true")
    assert 'id="rate-limit" hx-swap-oob="true"' in started.content.decode()  # a run clears an old refusal

    refused = client.post("/extract", HTTP_HX_REQUEST="true")

    assert refused.status_code == 429
    assert refused["HX-Retarget"] == "#rate-limit"  # not #run-status: the queued run stays in view
    body = refused.content.decode()
    seconds = refused["Retry-After"]
    assert f'data-countdown="{seconds}"' in body
    assert 'id="rate-limit"' in body and 'data-status="limited"' in body
    home = client.get("/").content.decode()
    assert 'id="run-status"' in home and 'data-status="queued"' in home and 'id="rate-limit"' in home


def _mailbox_item(page: str, integration_id: int) -> str:
    start = page.index(f'id="mailbox-{integration_id}"')
    return page[start : page.index("</li>\n", page.index('data-action="disconnect"', start))]


def test_mailboxes_page_says_in_plain_words_how_each_mailbox_syncs(
    client: Client, gmail: GmailBox, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_SCHEDULE_MINUTES = 10
    run_extraction(consenting_user)
    client.force_login(consenting_user)

    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)

    assert 'data-healthy="true"' in item and ">Healthy<" in item
    assert "Last read successfully" in item
    assert "Next scheduled read: " in item  # when the scan looks next: see the test below
    assert "Last problem" not in item and 'data-action="reconnect"' not in item


def test_mailboxes_page_gives_the_next_check_the_scan_goes_by(
    client: Client, gmail: GmailBox, consenting_user: User, settings
) -> None:
    """With push healthy a mailbox is checked every EXTRACTION_SWEEP_MINUTES, not every
    EXTRACTION_SCHEDULE_MINUTES after its last read: the page says when the scan will look."""
    from integrations.models import Integration

    settings.EXTRACTION_SCHEDULE_MINUTES = 10
    run_extraction(consenting_user)
    due = timezone.now() + timedelta(minutes=47)
    Integration.objects.filter(pk=gmail.integration.pk).update(next_check_at=due)
    client.force_login(consenting_user)

    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)

    assert f"Next scheduled read: around {timezone.localtime(due, UTC).strftime('%H:%M')}." in item


def test_a_mailbox_that_needs_reconnecting_says_why_and_offers_reconnect(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    from integrations.models import Integration

    Integration.objects.filter(pk=gmail.integration.pk).update(
        status=Integration.Status.NEEDS_REAUTH,
        last_error_code="provider_auth",
        last_error="invalid_grant: Token has been expired or revoked.",
    )
    client.force_login(consenting_user)

    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)

    assert 'data-healthy="false"' in item
    assert "Last problem: Gmail no longer lets Tasklift read this mailbox" in item
    assert "invalid_grant" not in item  # the technical text stays in the record and logs
    assert f'id="reconnect-{gmail.integration.pk}"' in item
    assert f'name="login_hint" value="{gmail.address}"' in item
    assert "Tasklift does not read it until you reconnect it." in item


def test_a_run_skipped_for_a_mailbox_to_reconnect_says_so_on_the_task_list(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    from integrations.models import Integration

    Integration.objects.filter(pk=gmail.integration.pk).update(status=Integration.Status.NEEDS_REAUTH)
    run = run_extraction(consenting_user)
    client.force_login(consenting_user)

    home = client.get("/").content.decode()

    assert run.error_message == (
        f"Skipped: Gmail {gmail.address} no longer lets Tasklift read it. Reconnect it on the Mailboxes page."
    )
    assert f"Nothing was read, because Gmail {gmail.address} must be reconnected" in home
    assert 'href="/mailboxes/" class="fix-link">reconnect on the Mailboxes page</a>' in home
    assert "no mailbox is connected" not in home


def test_a_passing_provider_outage_needs_nothing_from_the_person(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    from integrations.models import Integration

    Integration.objects.filter(pk=gmail.integration.pk).update(
        last_error_code="provider_unavailable", last_error="HTTP 503 from gmail.googleapis.com"
    )
    client.force_login(consenting_user)
    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)
    assert "Last problem: Gmail could not be reached." in item
    assert "Nothing to do: the next read tries again." in item
    assert 'data-action="reconnect"' not in item
    assert "HTTP 503" not in item


def test_a_mailbox_left_out_of_the_last_run_is_a_warning(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    from django.utils import timezone

    ExtractionRun.objects.create(
        user=consenting_user,
        trigger=ExtractionRun.Trigger.SCHEDULE,
        status=ExtractionRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        error_code="partial",
        error_message="Gmail person@example.com: 1 email could not be read (HTTP 500).",
        mailboxes={str(gmail.integration.pk): {"provider": "gmail", "address": gmail.address, "status": "partial"}},
    )
    client.force_login(consenting_user)

    item = _mailbox_item(client.get("/mailboxes/").content.decode(), gmail.integration.pk)
    home = client.get("/").content.decode()

    assert 'data-healthy="false"' in item
    assert "The last read could not read all of this mailbox" in item
    assert f"Tasklift read your mail, but not all of Gmail {gmail.address}" in home
    assert "HTTP 500" not in home


def test_without_consent_scheduled_reads_wait(client: Client, gmail: GmailBox, consenting_user: User) -> None:
    from accounts.services import consent_revoke

    consent_revoke(user=consenting_user)
    client.force_login(consenting_user)
    assert "Scheduled reads wait for your AI consent." in client.get("/mailboxes/").content.decode()
