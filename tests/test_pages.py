import re

import pytest
from django.test import Client

from accounts.models import User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_signup_creates_an_account_that_logs_in_once_confirmed(client: Client, mailoutbox) -> None:
    response = client.post(
        "/signup/",
        {
            "email": "New@Example.com",
            "name": "New",
            "password1": "a-long-passphrase-9",
            "password2": "a-long-passphrase-9",
        },
    )
    assert response.status_code == 302
    user = User.objects.get()
    assert user.email == "new@example.com"
    assert client.get("/").status_code == 302  # to the login: the address is not confirmed yet
    link = re.search(r"/signup/confirm/\S+/", mailoutbox[0].body)
    assert link is not None
    client.get(link[0])
    assert client.get("/").status_code == 200


def test_signup_shows_field_errors(client: Client) -> None:
    UserFactory(email="taken@example.com")
    response = client.post("/signup/", {"email": "taken@example.com", "password1": "short", "password2": "different"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "already exists" not in body  # sign-up never tells whether an address has an account
    assert "password fields didn" in body
    assert User.objects.count() == 1


def test_signup_with_a_bad_email_shows_its_error(client: Client) -> None:
    response = client.post("/signup/", {"email": "not-an-email", "password1": "x", "password2": "x"})
    assert response.status_code == 400
    assert "Enter a valid email address" in response.content.decode()


def test_login_with_wrong_password_shows_an_error(client: Client) -> None:
    UserFactory(email="someone@example.com")
    response = client.post("/login/", {"username": "someone@example.com", "password": "wrong"})
    assert response.status_code == 400
    assert "Please enter a correct email address and password" in response.content.decode()


def test_login_and_logout(client: Client) -> None:
    UserFactory(email="someone@example.com")
    response = client.post("/login/", {"username": "someone@example.com", "password": "correct-horse-battery"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


def test_home_requires_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_home_shows_an_empty_task_list(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.get("/")
    assert "No open tasks" in response.content.decode()


def test_home_says_which_services_are_simulated(client: Client) -> None:
    client.force_login(UserFactory())
    body = client.get("/").content.decode()
    assert "Simulated: Google sign-in and Gmail, Microsoft sign-in and Outlook, Gemini" in body


def test_unknown_url_is_a_404_page(client: Client) -> None:
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert "Page not found" in response.content.decode()
    assert "Traceback" not in response.content.decode()


def test_unknown_api_url_is_a_404(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_api_docs_are_served(client: Client) -> None:
    client.force_login(UserFactory())
    assert client.get("/api/docs").status_code == 200


def test_admin_login_page_is_served(client: Client) -> None:
    assert client.get("/admin/login/").status_code == 200


def test_healthz_reports_database_cache_and_broker(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "cache": "ok", "broker": "ok"}}


def test_get_on_a_post_only_address_is_a_405_page(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.get("/tasks/add")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    body = response.content.decode()
    assert "This address is for a button, not a page" in body
    assert 'id="error-405"' in body


def test_a_500_is_a_page_of_ours(rf) -> None:
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body
    assert "css/app" in body


def test_an_htmx_request_from_an_expired_session_sends_the_whole_page_to_the_login(client: Client) -> None:
    response = client.get(
        "/tasks/changes?v=x", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/?status=done&q=rent"
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=/%3Fstatus%3Ddone%26q%3Drent"
    # and back after login
    UserFactory(email="back@example.com")
    login = client.post(
        "/login/", {"username": "back@example.com", "password": "correct-horse-battery", "next": "/?status=done&q=rent"}
    )
    assert login["Location"] == "/?status=done&q=rent"


def test_an_htmx_post_from_an_expired_session_is_redirected_too(client: Client) -> None:
    response = client.post("/extract", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/")
    assert response["HX-Redirect"] == "/login/?next=/"


def test_signup_takes_the_time_zone_from_the_browser(client: Client) -> None:
    page = client.get("/signup/").content.decode()
    assert 'type="hidden" name="timezone"' in page and "data-browser-tz" in page
    assert '<script src="/static/js/app.js"' in page
    client.post(
        "/signup/",
        {
            "email": "kiwi@example.com",
            "password1": "a-long-passphrase-9",
            "password2": "a-long-passphrase-9",
            "timezone": "Pacific/Auckland",
        },
    )
    assert User.objects.get(email="kiwi@example.com").timezone == "Pacific/Auckland"


def test_signup_with_an_unknown_time_zone_starts_on_utc(client: Client) -> None:
    client.post(
        "/signup/",
        {
            "email": "x@example.com",
            "password1": "a-long-passphrase-9",
            "password2": "a-long-passphrase-9",
            "timezone": "Mars/Base",
        },
    )
    assert User.objects.get(email="x@example.com").timezone == "UTC"


def test_the_time_zone_can_be_changed_in_settings(client: Client) -> None:
    user = UserFactory()
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert '<option value="UTC" selected>' in page
    response = client.post("/settings/timezone", {"timezone": "Europe/Paris"}, follow=True)
    assert "Dates and times are now shown in Europe/Paris time." in response.content.decode()
    user.refresh_from_db()
    assert user.timezone == "Europe/Paris"
    refused = client.post("/settings/timezone", {"timezone": "Mars/Base"})
    assert refused.status_code == 400
    user.refresh_from_db()
    assert user.timezone == "Europe/Paris"


def test_personal_access_tokens_are_shown_once_listed_and_revoked(client: Client) -> None:
    from accounts.models import PersonalAccessToken

    user = UserFactory()
    client.force_login(user)
    assert 'id="no-tokens"' in client.get("/settings/").content.decode()

    created = client.post("/settings/tokens", {"name": "Home Assistant"})

    assert created.status_code == 201
    secret_value = re.search(r'value="(tl_[^"]+)" id="new-token-value"', created.content.decode())
    assert secret_value
    token = PersonalAccessToken.objects.get(user=user)
    listing = client.get("/settings/").content.decode()
    assert "Home Assistant" in listing and "never used" in listing
    assert secret_value[1] not in listing  # shown once only
    api = Client().get("/api/tasks", HTTP_AUTHORIZATION=f"Bearer {secret_value[1]}")
    assert api.status_code == 200
    assert "last used" in client.get("/settings/").content.decode()

    client.post(f"/settings/tokens/{token.pk}/revoke")

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert f'data-token-id="{token.pk}"' not in client.get("/settings/").content.decode()
    assert Client().get("/api/tasks", HTTP_AUTHORIZATION=f"Bearer {secret_value[1]}").status_code == 401


def test_a_token_needs_a_name(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.post("/settings/tokens", {"name": "  "})
    assert response.status_code == 400
    assert "This field is required" in response.content.decode()


def test_someone_elses_token_cannot_be_revoked(client: Client) -> None:
    from accounts.services import access_token_create

    token, _ = access_token_create(user=UserFactory(), name="Theirs")
    client.force_login(UserFactory())
    client.post(f"/settings/tokens/{token.pk}/revoke")
    token.refresh_from_db()
    assert token.revoked_at is None


def test_pages_load_no_inline_script(client: Client) -> None:
    client.force_login(UserFactory())
    for path in ("/", "/mailboxes/", "/settings/", "/consent/"):
        body = client.get(path).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)", body), path
        assert "allowEval" in body, path
