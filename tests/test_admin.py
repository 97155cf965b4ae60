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
    "extraction/fetchfailure",
    "accounts/personalaccesstoken",
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


@pytest.mark.parametrize(
    "page",
    ["extraction/extractionrun", "extraction/processedemail", "integrations/synccursor", "extraction/extractionlease"],
)
def test_admin_records_are_read_only(admin_client_with_data: Client, page: str) -> None:
    assert admin_client_with_data.get(f"/admin/{page}/add/").status_code == 403
    assert f'href="/admin/{page}/add/"' not in admin_client_with_data.get(f"/admin/{page}/").content.decode()


def test_admin_cannot_edit_a_cursor_value(admin_client_with_data: Client, gmail: GmailBox) -> None:
    from integrations.models import SyncCursor

    cursor = SyncCursor.objects.get(integration=gmail.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION)
    before = cursor.value
    page = admin_client_with_data.get(f"/admin/integrations/synccursor/{cursor.pk}/change/")
    assert page.status_code == 200
    assert 'name="value"' not in page.content.decode()
    admin_client_with_data.post(
        f"/admin/integrations/synccursor/{cursor.pk}/change/",
        {"value": "1", "purpose": cursor.purpose, "filter_hash": "x", "generation": 9},
    )
    cursor.refresh_from_db()
    assert cursor.value == before
    inline = admin_client_with_data.get(f"/admin/integrations/integration/{gmail.integration.pk}/change/").content
    assert b'name="cursors-0-value"' not in inline


def test_admin_cannot_edit_a_run(admin_client_with_data: Client) -> None:
    run = ExtractionRun.objects.get()
    admin_client_with_data.post(f"/admin/extraction/extractionrun/{run.pk}/change/", {"status": "failed"})
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_admin_runs_extraction_now_for_a_person(
    admin_client_with_data: Client, consenting_user: User, broker_queue, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_with_data.post(
            "/admin/accounts/user/",
            {"action": "extract_now", "_selected_action": [consenting_user.pk]},
            follow=True,
        )
    assert "1 extraction run queued." in response.content.decode()
    assert ExtractionRun.objects.filter(user=consenting_user, trigger="admin", status="queued").count() == 1
    assert broker_queue() == 1


def test_admin_revokes_a_token_and_never_shows_its_hash(admin_client_with_data: Client, consenting_user: User) -> None:
    from accounts.services import access_token_create

    token, _ = access_token_create(user=consenting_user, name="Script")
    page = admin_client_with_data.get(f"/admin/accounts/personalaccesstoken/{token.pk}/change/").content.decode()
    assert token.token_hash not in page
    admin_client_with_data.post(
        "/admin/accounts/personalaccesstoken/", {"action": "revoke", "_selected_action": [token.pk]}
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
