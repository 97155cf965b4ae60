"""Which accounts count as confirmed: the demo and admin accounts of `make run`, admins made on the command
line, accounts that existed before confirmation did; and the admin shows it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from accounts.models import User
from config.run import ADMIN_PASSWORD, DEMO_PASSWORD
from tests.factories import UserFactory


@pytest.mark.django_db
def test_the_demo_account_of_make_run_is_confirmed_and_logs_in(client: Client) -> None:
    call_command("seed_demo", password=DEMO_PASSWORD, admin_password=ADMIN_PASSWORD, stdout=io.StringIO())

    assert client.post("/login/", {"username": "demo@tasklift.test", "password": DEMO_PASSWORD}).status_code == 302
    assert User.objects.filter(email_verified_at__isnull=True).count() == 0


@pytest.mark.django_db
def test_an_admin_made_on_the_command_line_is_confirmed() -> None:
    assert User.objects.create_superuser("root@example.com", "pw-for-the-admin").email_verified


@pytest.mark.django_db
def test_the_admin_shows_and_sets_the_confirmed_state(client: Client) -> None:
    waiting: User = UserFactory(email="waiting@example.com", email_verified_at=None)
    UserFactory(email="done@example.com")
    client.force_login(User.objects.create_superuser("root@example.com", "pw-for-the-admin"))

    unconfirmed = client.get("/admin/accounts/user/?email_verified_at__isempty=1").content.decode()
    assert "waiting@example.com" in unconfirmed and "done@example.com" not in unconfirmed
    assert "Email confirmed" in unconfirmed
    assert "Email address confirmed at" in client.get(f"/admin/accounts/user/{waiting.pk}/change/").content.decode()

    client.post("/admin/accounts/user/", {"action": "confirm_email", "_selected_action": [waiting.pk]}, follow=True)
    waiting.refresh_from_db()
    assert waiting.email_verified


@pytest.mark.django_db(transaction=True)
def test_accounts_made_before_confirmation_existed_stay_usable() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0004_readable_names")])
    old_user = executor.loader.project_state([("accounts", "0004_readable_names")]).apps.get_model("accounts", "User")
    old_user.objects.create(email="early@example.com", password="!")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert User.objects.get(email="early@example.com").email_verified
