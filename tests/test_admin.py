import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun
from integrations.services import integration_credentials
from sandbox.client import SandboxClient
from tests.conftest import GmailBox, run_extraction
from tests.mail import ask

pytestmark = pytest.mark.django_db

PAGES = [
    "accounts/user",
    "accounts/aiconsent",
    "integrations/integration",
    "integrations/synccursor",
    "extraction/extractionrun",
    "extraction/processedemail",
    "extraction/extractionlease",
    "tasks/task",
]


@pytest.fixture
def admin_client_with_data(client: Client, gmail: GmailBox, consenting_user: User) -> Client:
    gmail.deliver(ask(1))
    run_extraction(consenting_user)
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))
    return client


@pytest.mark.parametrize("page", PAGES)
def test_admin_lists_and_searches_every_model(admin_client_with_data: Client, page: str) -> None:
    listing = admin_client_with_data.get(f"/admin/{page}/")
    assert listing.status_code == 200
    assert admin_client_with_data.get(f"/admin/{page}/", {"q": "example"}).status_code == 200


def test_admin_never_shows_mailbox_credentials(admin_client_with_data: Client, gmail: GmailBox) -> None:
    credentials = integration_credentials(integration=gmail.integration)
    page = admin_client_with_data.get(f"/admin/integrations/integration/{gmail.integration.pk}/change/")
    body = page.content.decode()
    assert page.status_code == 200
    assert gmail.address in body
    assert credentials["token"] not in body
    assert gmail.integration.credentials_encrypted not in body


def test_admin_shows_a_run_record(admin_client_with_data: Client) -> None:
    run = ExtractionRun.objects.get()
    page = admin_client_with_data.get(f"/admin/extraction/extractionrun/{run.pk}/change/")
    assert page.status_code == 200
    assert "succeeded" in page.content.decode().lower()


def test_run_never_logs_tokens(gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, caplog) -> None:
    caplog.set_level("DEBUG")
    gmail.deliver(ask(1))
    sandbox.expire_token(address=gmail.address)  # forces a refresh: new tokens travel during the run
    run_extraction(consenting_user)
    credentials = integration_credentials(integration=gmail.integration.__class__.objects.get())
    assert credentials["token"] not in caplog.text
    assert credentials["refresh_token"] not in caplog.text
