import pytest
from django.test import Client

from accounts.models import User
from accounts.services import consent_grant
from extraction.jobs import extraction_schedule_job
from extraction.models import ExtractionRun
from tests.conftest import GmailBox, connect_gmail, run_extraction
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
    assert record["counts"] == {"fetched": 1, "already_done": 0, "sent_to_llm": 1, "tasks_created": 1, "quarantined": 0}
    assert record["llm"]["calls"] == 1


def test_the_schedule_queues_runs_only_for_consenting_people_with_a_mailbox(
    sandbox, broker_queue, django_capture_on_commit_callbacks
) -> None:
    with_all = UserFactory()
    consent_grant(user=with_all)
    connect_gmail(sandbox, with_all, "a@example.com")
    no_consent = UserFactory()
    connect_gmail(sandbox, no_consent, "b@example.com")
    no_mailbox = UserFactory()
    consent_grant(user=no_mailbox)

    with django_capture_on_commit_callbacks(execute=True):
        queued = extraction_schedule_job()

    assert queued == 1
    assert list(ExtractionRun.objects.values_list("user", "trigger")) == [(with_all.pk, "schedule")]
    assert broker_queue() == 1


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

    assert "1 email(s) will be read again" in response.content.decode()
    assert not ProcessedEmail.objects.exists()
    gmail.integration.refresh_from_db()
    assert len(gmail.integration.backfill_pending) == 1


def test_the_seventh_press_without_javascript_shows_a_429_page(client: Client, consenting_user: User) -> None:
    from tests.extraction.test_rate_limit import start_of_a_fresh_window

    client.force_login(consenting_user)
    start_of_a_fresh_window(consenting_user)
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
    assert "1 older email(s) of that time were more than it reads at once and were not read" in page
    record = client.get(f"/runs/{run.pk}").content.decode()
    assert "Tasklift read again all mail since" in record and "1 older email(s)" in record
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
