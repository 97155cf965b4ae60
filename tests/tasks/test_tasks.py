from datetime import timedelta

import pytest
from django.db import IntegrityError
from django.test import Client
from django.utils import timezone

from accounts.models import User
from tasks.models import Task
from tasks.services import EmailTaskRow, task_insert_from_emails, task_title_key
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def row(user: User, message_id: str, title: str) -> EmailTaskRow:
    return EmailTaskRow(
        user_id=user.pk,
        integration_id=None,  # type: ignore[arg-type]
        message_id=message_id,
        email_key="",
        title=title,
        due_date=None,
        priority="medium",
        email_link="https://mail.google.com/mail/u/0/#all/x",
        email_sender="A <a@example.com>",
        email_subject="Hello",
        email_received_at=timezone.now(),
        run_id=None,
    )


def test_title_key_ignores_case_spacing_and_end_punctuation() -> None:
    assert task_title_key("  Send the  REPORT. ") == task_title_key("send the report")
    assert task_title_key("Send the report") != task_title_key("Send the reports")


def test_inserting_the_same_email_tasks_twice_creates_them_once(user: User) -> None:
    rows = [row(user, "m1", "Send the report"), row(user, "m1", "Book a room")]
    assert task_insert_from_emails(rows=rows) == 2
    assert task_insert_from_emails(rows=rows) == 0
    assert task_insert_from_emails(rows=[row(user, "m1", "send the report.")]) == 0
    assert Task.objects.filter(user=user).count() == 2


def test_the_same_title_from_another_email_is_another_task(user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Send the report"), row(user, "m2", "Send the report")])
    assert Task.objects.filter(user=user).count() == 2


def test_the_database_refuses_a_duplicate_even_without_on_conflict(user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Send the report")])
    with pytest.raises(IntegrityError):
        Task.objects.create(
            user=user, source=Task.Source.EMAIL_AI, source_id="m1", title="SEND the report", title_key="send the report"
        )


def test_a_dismissed_task_does_not_come_back(user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Send the report")])
    Task.objects.filter(user=user).update(status=Task.Status.DISMISSED)
    assert task_insert_from_emails(rows=[row(user, "m1", "Send the report")]) == 0
    assert Task.objects.get(user=user).status == Task.Status.DISMISSED


def test_task_list_shows_open_tasks_newest_first_with_their_email(client: Client, user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Older task")])
    Task.objects.update(created_at=timezone.now() - timedelta(hours=1))
    task_insert_from_emails(rows=[row(user, "m2", "Newer task")])
    client.force_login(user)
    body = client.get("/").content.decode()
    assert body.index("Newer task") < body.index("Older task")
    assert "A &lt;a@example.com&gt;" in body
    assert 'href="https://mail.google.com/mail/u/0/#all/x"' in body


def test_mark_done_and_dismiss(client: Client, user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "One"), row(user, "m1", "Two")])
    one, two = Task.objects.get(title="One"), Task.objects.get(title="Two")
    client.force_login(user)
    client.post(f"/tasks/{one.pk}/status", {"status": "done"})
    client.post(f"/tasks/{two.pk}/status", {"status": "dismissed"}, HTTP_HX_REQUEST="true")
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.status == Task.Status.DONE and one.completed_at is not None
    assert two.status == Task.Status.DISMISSED
    assert "One" not in client.get("/tasks/list").content.decode()


def test_another_persons_task_is_not_found(client: Client, user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Mine")])
    client.force_login(UserFactory())
    response = client.post(f"/tasks/{Task.objects.get().pk}/status", {"status": "done"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 404
    assert Task.objects.get().status == Task.Status.OPEN


def test_an_unknown_status_is_refused(client: Client, user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Mine")])
    client.force_login(user)
    response = client.post(f"/tasks/{Task.objects.get().pk}/status", {"status": "eaten"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert Task.objects.get().status == Task.Status.OPEN


def test_add_a_task_by_hand(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/tasks/add", {"title": "Call the plumber", "due_date": "2026-12-01", "priority": "high"})
    assert response.status_code == 302
    task = Task.objects.get(user=user)
    assert (task.source, task.priority, str(task.due_date)) == ("manual", "high", "2026-12-01")


def test_adding_a_task_with_bad_input_shows_field_errors(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/tasks/add", {"title": "", "due_date": "someday"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "This field is required" in body
    assert "Enter a valid date" in body
    assert not Task.objects.exists()


def test_api_lists_creates_and_updates_tasks(client: Client, user: User) -> None:
    client.force_login(user)
    created = client.post("/api/tasks", {"title": "From the API", "priority": "low"}, content_type="application/json")
    assert created.status_code == 201
    task_id = created.json()["id"]
    assert [t["title"] for t in client.get("/api/tasks").json()["items"]] == ["From the API"]
    patched = client.patch(f"/api/tasks/{task_id}", {"status": "done"}, content_type="application/json")
    assert patched.json()["status"] == "done"
    assert client.get("/api/tasks").json()["items"] == []


def test_api_bad_input_is_a_json_error_naming_the_field(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/api/tasks", {"title": "x", "colour": "red"}, content_type="application/json")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_input"
    assert any(f["field"] == "colour" for f in body["extra"]["fields"])


def test_api_needs_login(client: Client) -> None:
    response = client.get("/api/tasks")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_api_another_persons_task_is_a_404(client: Client, user: User) -> None:
    task_insert_from_emails(rows=[row(user, "m1", "Mine")])
    client.force_login(UserFactory())
    response = client.patch(f"/api/tasks/{Task.objects.get().pk}", {"status": "done"}, content_type="application/json")
    assert response.status_code == 404
    assert response.json()["code"] == "task_not_found"


def test_api_a_nul_character_in_a_title_is_not_a_500(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.post("/api/tasks", {"title": "a\u0000b"}, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["title"] == "ab"


def test_the_ledger_records_an_email_once_however_often_it_is_written(user: User) -> None:
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.services import LedgerEntry, ledger_record
    from integrations.models import Integration

    integration = Integration.objects.create(user=user, provider="gmail", account_address="a@example.com")
    run = ExtractionRun.objects.create(user=user, trigger="admin")
    entry = LedgerEntry(integration.pk, "m1", ProcessedEmail.Outcome.NO_TASKS)
    ledger_record(entries=[entry, entry], run_id=run.pk)
    ledger_record(entries=[entry], run_id=run.pk)
    assert ProcessedEmail.objects.count() == 1
