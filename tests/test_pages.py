import pytest
from django.test import Client

from accounts.models import User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_signup_creates_an_account_and_logs_in(client: Client) -> None:
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
    assert client.get("/").status_code == 200


def test_signup_shows_field_errors(client: Client) -> None:
    UserFactory(email="taken@example.com")
    response = client.post("/signup/", {"email": "taken@example.com", "password1": "short", "password2": "different"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "An account with this email address already exists" in body
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
