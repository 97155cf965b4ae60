"""The reading pane (issue 23 point 4): a task's email as Tasklift read it, read from the mailbox when opened,
with its sentence marked; only its owner's; a provider failure is a message in the pane, never a 500."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

import pytest
import requests
from django.conf import settings
from django.test import Client

from accounts.models import User
from accounts.services import consent_revoke
from extraction.prompt import build_prompt
from integrations.models import Integration
from integrations.services import integration_credentials
from tasks.models import Task
from tasks.reading import task_email_read
from tasks.services import task_create
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
ASK = "Could you please send the signed lease by Friday?"
BODY = (
    "Hi,\n\n"
    f"{ASK}\n"
    "The landlord wants it before the weekend.\n\n"
    "Thanks,\nSam\n--\nSam Lee | Acme Lettings | +44 20 7946 0000\n\n"
    "On Mon, 30 Nov 2026 at 09:00, Person <person@example.com> wrote:\n"
    "> An old quoted line: please water the plants.\n"
)


def lease_mail() -> str:
    message = EmailMessage()
    message["From"] = "Sam Lee <sam@example.com>"
    message["To"] = "Person <person@example.com>, Kim <kim@example.com>"
    message["Cc"] = "Lou <lou@example.com>"
    message["Subject"] = "The lease"
    message["Date"] = format_datetime(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    message["Message-ID"] = make_msgid(domain="example.com")
    message.set_content(BODY)
    return message.as_string()


def pane(client: Client, task: Task) -> str:
    response = client.get(f"/tasks/{task.pk}/email", headers=HTMX)
    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]  # the email's text is kept by no cache
    return response.content.decode()


def text_of(body: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:dd|div|h3)>', body, re.S)
    assert found is not None, f"no #{element_id} in {body}"
    return html.unescape(re.sub(r"<[^>]+>", "", found[1]))


@pytest.fixture
def lease_task(gmail: GmailBox, consenting_user: User) -> Task:
    gmail.deliver(lease_mail())
    run_extraction(consenting_user)
    return Task.objects.get(user=consenting_user)


def test_reading_pane_shows_the_email_as_tasklift_read_it_with_its_sentence_marked(
    client: Client, consenting_user: User, lease_task: Task, gmail: GmailBox
) -> None:
    client.force_login(consenting_user)
    body = pane(client, lease_task)

    assert text_of(body, "pane-from") == "Sam Lee <sam@example.com>"
    assert text_of(body, "pane-to") == "Person <person@example.com>, Kim <kim@example.com>"
    assert text_of(body, "pane-cc") == "Lou <lou@example.com>"
    assert text_of(body, "pane-subject") == "The lease"
    shown = text_of(body, "pane-text")
    assert "The landlord wants it before the weekend." in shown
    assert "water the plants" not in shown and "Acme Lettings" not in shown  # cleaned as the prompt was
    assert re.findall(r"<mark>(.*?)</mark>", body) == [html.escape(ASK, quote=False)]
    # Beside it, the link: in the sandbox, the sandbox's own copy of the message, which shows it.
    [link] = [html.unescape(h) for h in re.findall(r'href="([^"]+)"[^>]*class="pane-open-link"', body)]
    message_id = lease_task.source_id
    assert link == f"{settings.SANDBOX_URL}/_sandbox/mail/gmail/{gmail.address}/{message_id}"
    copy = requests.get(link, timeout=10)
    assert copy.status_code == 200 and ASK in html.unescape(copy.text) and "The lease" in copy.text


def test_reading_pane_text_is_the_text_the_prompt_carried(lease_task: Task) -> None:
    reading = task_email_read(task=lease_task)
    subject = "".join(part.text for part in reading.subject)
    text = "".join(part.text for part in reading.body)
    from integrations.services import integration_provider

    integration = lease_task.integration
    assert integration is not None
    [email] = integration_provider(integration=integration).fetch_emails([lease_task.source_id]).emails
    assert build_prompt([email], max_body_chars=settings.EXTRACTION_MAX_BODY_CHARS).texts["email_1"] == (
        f"{subject}\n{text}"
    )


def test_reading_pane_of_another_persons_task_is_not_found(client: Client, lease_task: Task, sandbox: object) -> None:
    client.force_login(UserFactory())
    assert client.get(f"/tasks/{lease_task.pk}/email", headers=HTMX).status_code == 404
    page = client.get(f"/tasks/{lease_task.pk}/email")
    assert page.status_code == 404
    assert "Sam Lee" not in page.content.decode()
    assert client.get("/tasks/999999/email").status_code == 404


def test_reading_pane_needs_a_login(client: Client, lease_task: Task) -> None:
    response = client.get(f"/tasks/{lease_task.pk}/email")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_reading_pane_says_when_the_provider_fails_and_never_answers_500(
    client: Client, consenting_user: User, lease_task: Task, gmail: GmailBox
) -> None:
    client.force_login(consenting_user)
    gmail.sandbox.fault("gmail", 503, route="/messages/", times=None)
    body = pane(client, lease_task)
    assert 'data-code="provider_unavailable"' in body
    assert "Gmail could not be reached to read this email" in body
    assert "pane-open-link" in body  # the link still opens it
    assert lease_task.sentence in html.unescape(body)  # and the sentence is still shown
    gmail.sandbox.clear_faults()

    gmail.sandbox.fault("gmail", 429, route="/messages/", times=None, headers={"Retry-After": "30"})
    assert 'data-code="provider_rate_limited"' in pane(client, lease_task)
    gmail.sandbox.clear_faults()

    gmail.sandbox.delete_gmail(gmail.address, [lease_task.source_id])
    assert "no longer has this email" in pane(client, lease_task)


def test_reading_pane_refreshes_an_expired_token_as_a_run_does_and_keeps_it(
    client: Client, consenting_user: User, lease_task: Task, gmail: GmailBox
) -> None:
    client.force_login(consenting_user)
    before = integration_credentials(integration=gmail.integration)["token"]
    gmail.sandbox.expire_token(address=gmail.address)
    assert "<mark>" in pane(client, lease_task)
    gmail.integration.refresh_from_db()
    assert integration_credentials(integration=gmail.integration)["token"] != before


def test_reading_pane_asks_to_reconnect_when_the_sign_in_is_refused(
    client: Client, consenting_user: User, lease_task: Task, gmail: GmailBox
) -> None:
    client.force_login(consenting_user)
    gmail.sandbox.expire_token(address=gmail.address)
    gmail.sandbox.revoke(address=gmail.address)
    body = pane(client, lease_task)
    assert 'data-code="provider_auth"' in body and "Reconnect it on the Mailboxes page" in body
    gmail.integration.refresh_from_db()
    assert gmail.integration.status == Integration.Status.NEEDS_REAUTH  # the Mailboxes page says so too
    assert 'data-code="mailbox_not_connected"' in pane(client, lease_task)


def test_reading_pane_reads_nothing_without_ai_consent(
    client: Client, consenting_user: User, lease_task: Task, gmail: GmailBox
) -> None:
    client.force_login(consenting_user)
    consent_revoke(user=consenting_user)
    gmail.sandbox.clear_requests()
    body = pane(client, lease_task)
    assert 'data-code="consent_needed"' in body
    assert gmail.sandbox.requests("gmail") == []


def test_reading_pane_of_a_task_added_by_hand_says_there_is_no_email(client: Client, user: User) -> None:
    client.force_login(user)
    task = task_create(user=user, title="Buy milk")
    assert "added by hand" in pane(client, task)


def test_reading_pane_reads_outlook_mail_too(client: Client, consenting_user: User, outlook: OutlookBox) -> None:
    outlook.deliver(lease_mail())
    run_extraction(consenting_user)
    task = Task.objects.get(user=consenting_user)
    client.force_login(consenting_user)
    body = pane(client, task)
    assert text_of(body, "pane-from") == "Sam Lee <sam@example.com>"
    assert re.findall(r"<mark>(.*?)</mark>", body) == [html.escape(ASK, quote=False)]
    [link] = re.findall(r'href="([^"]+)"[^>]*class="pane-open-link"', body)
    copy = requests.get(html.unescape(link), timeout=10)
    assert copy.status_code == 200 and "The lease" in copy.text


def test_reading_pane_without_javascript_is_a_page_of_its_own(
    client: Client, consenting_user: User, lease_task: Task
) -> None:
    client.force_login(consenting_user)
    response = client.get(f"/tasks/{lease_task.pk}/email")
    assert response.status_code == 200
    assert "<mark>" in response.content.decode() and "Back to your tasks" in response.content.decode()


def test_sandbox_mail_page_says_when_it_holds_no_such_message(gmail: GmailBox) -> None:
    missing = requests.get(f"{settings.SANDBOX_URL}/_sandbox/mail/gmail/{gmail.address}/nosuchid", timeout=10)
    assert missing.status_code == 404
    assert "holds no such message" in missing.text
    other = requests.get(f"{settings.SANDBOX_URL}/_sandbox/mail/outlook/nobody@example.com/x", timeout=10)
    assert other.status_code == 404 and "holds no such message" in other.text
