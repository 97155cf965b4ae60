"""Password guessing is refused after a bounded number of failed attempts, whatever the password."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_after_the_allowed_failures_even_the_right_password_gets_a_429(path: str, client: Client, settings) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 10
    user: User = UserFactory(is_staff=True)
    for _ in range(10):
        assert client.post(path, {"username": user.email, "password": "wrong"}).status_code != 429

    refused = client.post(path, {"username": user.email, "password": PASSWORD})

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "Too many attempts" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_right_password_before_the_limit_logs_in_and_counts_nothing(client: Client, settings) -> None:
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    user: User = UserFactory()
    for _ in range(2):
        client.post("/login/", {"username": user.email, "password": "wrong"})

    response = client.post("/login/", {"username": user.email, "password": PASSWORD})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_one_client_address_guessing_many_accounts_is_refused(client: Client, settings) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 5
    for n in range(5):
        client.post("/login/", {"username": f"nobody{n}@example.com", "password": "wrong"})
    user: User = UserFactory()

    assert client.post("/login/", {"username": user.email, "password": PASSWORD}).status_code == 429
