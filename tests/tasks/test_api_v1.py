"""API v1 as a program and a browser use it: tokens and sessions, every route, pages, and one error shape."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.consent import CONSENT_VERSION
from accounts.models import PersonalAccessToken, User
from accounts.selectors import consent_is_current
from accounts.services import access_token_create, consent_grant
from extraction.models import ExtractionRun, FetchFailure, ProcessedEmail
from tasks.models import Task
from tasks.services import EmailTaskRow, task_create, task_insert_from_emails
from tests.factories import IntegrationFactory, TaskEventFactory, UserFactory, email_closes

pytestmark = pytest.mark.django_db


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape: exactly code, message and extra, as JSON, with the status."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "extra"}
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["extra"], dict)
    return body


class Api:
    """A program calling the API with a personal access token, like curl with -H 'Authorization: ...'."""

    def __init__(self, user: User) -> None:
        self.user = user
        _, self.secret = access_token_create(user=user, name="script")
        self.client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {self.secret}")

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params)

    def post(self, path: str, data: Any = None) -> Any:
        return self.client.post(path, json.dumps(data) if data is not None else "", content_type="application/json")

    def patch(self, path: str, data: Any) -> Any:
        return self.client.patch(path, json.dumps(data), content_type="application/json")

    def delete(self, path: str) -> Any:
        return self.client.delete(path)


@pytest.fixture
def api(user: User) -> Api:
    return Api(user)


def email_task(user: User, integration_id: int, message_id: str, title: str, *, key: str = "", **extra: Any) -> Task:
    fields: dict[str, Any] = {
        "user_id": user.pk,
        "integration_id": integration_id,
        "message_id": message_id,
        "email_key": key,
        "title": title,
        "due_date": None,
        "priority": "",
        "email_link": f"https://mail.example/{message_id}",
        "email_sender": "Ann <ann@example.com>",
        "email_subject": "The report",
        "email_received_at": timezone.now(),
        "run_id": None,
    }
    fields.update(extra)
    task_insert_from_emails(rows=[EmailTaskRow(**fields)])
    return Task.objects.get(user=user, title=title)


# Authentication ------------------------------------------------------------------------------------


def test_a_token_made_in_the_browser_works_once_shown_and_stops_when_revoked(client: Client, user: User) -> None:
    client.force_login(user)
    created = client.post("/api/tokens", {"name": "my script"}, content_type="application/json")
    assert created.status_code == 201
    secret = created.json()["token"]
    assert secret.startswith("tl_") and created.json()["prefix"] == secret[:10]
    listed = client.get("/api/tokens").json()
    assert [t["name"] for t in listed] == ["my script"] and "token" not in listed[0]
    assert listed[0]["last_used_at"] is None

    program = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert program.get("/api/me").json()["email"] == user.email
    assert PersonalAccessToken.objects.get().last_used_at is not None

    assert client.delete(f"/api/tokens/{created.json()['id']}").status_code == 204
    assert_error(program.get("/api/me"), 401, "invalid_token")
    assert client.get("/api/tokens").json() == []


def test_no_credentials_is_a_401_for_reads_and_writes_alike() -> None:
    anonymous = Client(enforce_csrf_checks=True)
    for response in (
        anonymous.get("/api/tasks"),
        anonymous.post("/api/tasks", {"title": "x"}, content_type="application/json"),
        anonymous.patch("/api/tasks/1", {"title": "x"}, content_type="application/json"),
        anonymous.delete("/api/consent"),
    ):
        assert_error(response, 401, "not_authenticated")
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_token_or_scheme_is_a_401(user: User) -> None:
    assert_error(Client(HTTP_AUTHORIZATION="Bearer tl_nope").get("/api/tasks"), 401, "invalid_token")
    assert_error(Client(HTTP_AUTHORIZATION="Basic dTpw").get("/api/tasks"), 401, "invalid_token")


def test_a_session_write_without_csrf_is_refused_and_with_it_accepted(user: User) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert browser.get("/api/tasks").status_code == 200  # reads need no CSRF token
    assert_error(browser.post("/api/tasks", {"title": "x"}, content_type="application/json"), 403, "csrf_failed")
    assert not Task.objects.exists()
    browser.get("/")  # the page sets the csrftoken cookie
    token = browser.cookies["csrftoken"].value
    response = browser.post("/api/tasks", {"title": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_a_token_needs_no_csrf_but_cannot_manage_tokens(api: Api) -> None:
    assert api.post("/api/tasks", {"title": "From a script"}).status_code == 201
    assert_error(api.post("/api/tokens", {"name": "another"}), 403, "session_required")
    assert_error(api.get("/api/tokens"), 403, "session_required")
    token = PersonalAccessToken.objects.get()
    assert_error(api.delete(f"/api/tokens/{token.pk}"), 403, "session_required")


def test_another_persons_token_cannot_be_revoked(client: Client, user: User) -> None:
    other, _ = access_token_create(user=UserFactory(), name="theirs")
    client.force_login(user)
    assert_error(client.delete(f"/api/tokens/{other.pk}"), 404, "token_not_found")
    other.refresh_from_db()
    assert other.revoked_at is None


# Tasks ---------------------------------------------------------------------------------------------


def test_create_read_and_change_every_field_of_a_task(api: Api) -> None:
    created = api.post("/api/tasks", {"title": "Call the plumber", "notes": "before 5", "priority": "high"})
    assert created.status_code == 201
    task = created.json()
    assert (task["source"], task["status"], task["priority"], task["links"]) == ("manual", "open", "high", [])
    path = f"/api/tasks/{task['id']}"
    assert api.get(path).json()["title"] == "Call the plumber"

    due = (timezone.now().date() + timedelta(days=3)).isoformat()
    patched = api.patch(path, {"title": "Call the plumber again", "notes": "", "due_date": due, "priority": "low"})
    assert patched.status_code == 200
    body = patched.json()
    assert (body["title"], body["notes"], body["due_date"], body["priority"]) == (
        "Call the plumber again",
        "",
        due,
        "low",
    )

    cleared = api.patch(path, {"due_date": None, "priority": None}).json()
    assert (cleared["due_date"], cleared["priority"], cleared["title"]) == (None, None, "Call the plumber again")

    done = api.patch(path, {"status": "done"}).json()
    assert done["status"] == "done" and done["completed_at"] is not None
    reopened = api.patch(path, {"status": "open"}).json()
    assert reopened["status"] == "open" and reopened["completed_at"] is None
    assert api.patch(path, {"status": "dismissed"}).json()["status"] == "dismissed"


def test_a_field_sent_as_null_that_cannot_be_empty_is_refused(api: Api) -> None:
    task = task_create(user=api.user, title="Keep me")
    body = assert_error(api.patch(f"/api/tasks/{task.pk}", {"title": None}), 422, "invalid_input")
    assert [f["field"] for f in body["extra"]["fields"]] == ["title"]
    task.refresh_from_db()
    assert task.title == "Keep me"


def test_a_service_refusing_a_field_is_a_422_naming_it(api: Api) -> None:
    body = assert_error(api.post("/api/tasks", {"title": "x", "due_date": "1900-01-01"}), 422, "invalid_due_date")
    assert body["extra"]["fields"] == [{"field": "due_date", "message": body["message"]}]
    body = assert_error(api.post("/api/tasks", {"title": "   "}), 422, "invalid_input")
    assert body["extra"]["fields"][0]["field"] == "title"


def test_the_list_filters_like_the_page(api: Api) -> None:
    user = api.user
    gmail = IntegrationFactory(user=user, provider="gmail")
    outlook = IntegrationFactory(user=user, provider="outlook")
    email_task(user, gmail.pk, "g1", "Send the report")
    email_task(user, outlook.pk, "o1", "Book the room", email_subject="Rooms")
    task_create(user=user, title="Water the plants", notes="the report is elsewhere")
    closed = task_create(user=user, title="Old chore")
    Task.objects.filter(pk=closed.pk).update(status=Task.Status.DONE)

    def titles(**params: Any) -> set[str]:
        response = api.get("/api/tasks", **params)
        assert response.status_code == 200
        return {t["title"] for t in response.json()["items"]}

    assert titles() == {"Send the report", "Book the room", "Water the plants"}
    assert titles(status="done") == {"Old chore"}
    assert titles(status="all") == {"Send the report", "Book the room", "Water the plants", "Old chore"}
    assert titles(q="report") == {"Send the report", "Water the plants"}
    assert titles(mailbox=outlook.pk) == {"Book the room"}
    assert titles(source="manual") == {"Water the plants"}
    assert titles(source="email_ai", q="room") == {"Book the room"}
    assert titles(q="\x00") == titles()  # a NUL in the search is not a 500
    assert_error(api.get("/api/tasks", status="eaten"), 422, "invalid_input")


def test_a_task_shows_a_link_and_badge_for_each_mailbox_its_email_reached(api: Api) -> None:
    user = api.user
    gmail = IntegrationFactory(user=user, provider="gmail", account_address="me@gmail.example")
    outlook = IntegrationFactory(user=user, provider="outlook", account_address="me@outlook.example")
    task = email_task(user, gmail.pk, "g1", "Send the report", key="<m1@example.com>")
    email_task(user, outlook.pk, "o1", "Send the report", key="<m1@example.com>")
    links = api.get(f"/api/tasks/{task.pk}").json()["links"]
    assert sorted((link["provider_name"], link["address"], link["web_link"]) for link in links) == [
        ("Gmail", "me@gmail.example", "https://mail.example/g1"),
        ("Outlook", "me@outlook.example", "https://mail.example/o1"),
    ]
    assert {link["mailbox_status"] for link in links} == {"active"}


def test_pages_follow_next_to_the_end_in_constant_queries(api: Api, django_assert_max_num_queries: Any) -> None:
    gmail = IntegrationFactory(user=api.user)
    for n in range(7):
        email_task(api.user, gmail.pk, f"m{n}", f"Task {n}", due_date=date.today() + timedelta(days=n))
    seen: list[str] = []
    url: str | None = "/api/tasks?limit=3&q=Task"
    while url:
        with django_assert_max_num_queries(6):
            page = api.client.get(url).json()
        seen += [t["title"] for t in page["items"]]
        url = page["next"]
        if url:
            assert url.startswith("http://testserver/api/tasks?") and "q=Task" in url
    assert seen == [f"Task {n}" for n in range(7)]  # soonest due first, none twice, none left out


def test_bulk_status_changes_only_the_callers_tasks(api: Api) -> None:
    mine = [task_create(user=api.user, title=f"Mine {n}") for n in range(3)]
    theirs = task_create(user=UserFactory(), title="Theirs")
    response = api.post("/api/tasks/bulk-status", {"ids": [t.pk for t in mine[:2]] + [theirs.pk], "status": "done"})
    assert response.json() == {"updated": 2}
    assert sorted(Task.objects.filter(status="done").values_list("title", flat=True)) == ["Mine 0", "Mine 1"]
    assert_error(api.post("/api/tasks/bulk-status", {"ids": [], "status": "done"}), 422, "invalid_input")


def test_another_persons_task_is_not_found(api: Api) -> None:
    theirs = task_create(user=UserFactory(), title="Theirs")
    assert_error(api.get(f"/api/tasks/{theirs.pk}"), 404, "task_not_found")
    assert_error(api.patch(f"/api/tasks/{theirs.pk}", {"status": "done"}), 404, "task_not_found")
    assert api.get("/api/tasks", status="all").json()["items"] == []
    theirs.refresh_from_db()
    assert theirs.status == "open"


# Runs, mailboxes, consent, you ----------------------------------------------------------------------


def test_runs_list_newest_first_in_pages_and_read_one(api: Api) -> None:
    runs = [ExtractionRun.objects.create(user=api.user, trigger="api") for _ in range(3)]
    ExtractionRun.objects.create(user=UserFactory(), trigger="api")
    first = api.get("/api/extraction/runs", limit=2).json()
    assert [r["id"] for r in first["items"]] == [runs[2].pk, runs[1].pk]
    second = api.client.get(first["next"]).json()
    assert [r["id"] for r in second["items"]] == [runs[0].pk] and second["next"] is None
    assert api.get(f"/api/extraction/runs/{runs[0].pk}").json()["status"] == "queued"


def test_extract_now_queues_a_run_and_is_rate_limited(api: Api) -> None:
    consent_grant(user=api.user)
    response = api.post("/api/extraction/runs")
    assert response.status_code == 202 and response.json()["trigger"] == "api"
    for _ in range(5):
        api.post("/api/extraction/runs")
    limited = api.post("/api/extraction/runs")
    body = assert_error(limited, 429, "rate_limited")
    assert int(limited["Retry-After"]) == body["extra"]["retry_after"] >= 1


def test_another_persons_run_is_not_found(api: Api) -> None:
    theirs = ExtractionRun.objects.create(user=UserFactory(), trigger="api")
    assert_error(api.get(f"/api/extraction/runs/{theirs.pk}"), 404, "run_not_found")


def test_mailboxes_show_their_health_and_what_was_set_aside(api: Api) -> None:
    healthy = IntegrationFactory(user=api.user, provider="gmail", last_success_at=timezone.now())
    failing = IntegrationFactory(
        user=api.user, provider="outlook", failure_count=2, last_error="Outlook did not answer.", last_error_code="x"
    )
    ProcessedEmail.objects.create(integration=failing, message_id="q1", outcome="quarantined", last_error="llm_blocked")
    FetchFailure.objects.create(integration=failing, message_id="f1", attempts=1)
    IntegrationFactory(user=UserFactory())
    boxes = {box["id"]: box for box in api.get("/api/mailboxes").json()}
    assert set(boxes) == {healthy.pk, failing.pk}
    assert boxes[healthy.pk]["health"] == "ok" and boxes[healthy.pk]["last_read_at"] is not None
    bad = boxes[failing.pk]
    assert (bad["health"], bad["last_problem"], bad["unread"], bad["set_aside_count"]) == (
        "failing",
        "Outlook did not answer.",
        1,
        1,
    )
    assert "safety filter" in bad["set_aside"][0]["reason"]


def test_consent_is_read_given_and_revoked(api: Api) -> None:
    state = api.get("/api/consent").json()
    assert state["given"] is False and state["text"]["version"] == CONSENT_VERSION
    body = assert_error(api.post("/api/consent", {"text_version": "0"}), 422, "invalid_input")
    assert body["extra"]["fields"][0]["field"] == "text_version"
    assert not consent_is_current(user_id=api.user.pk)
    given = api.post("/api/consent", {"text_version": CONSENT_VERSION}).json()
    assert given["given"] is True and given["granted_at"] is not None
    assert consent_is_current(user_id=api.user.pk)
    assert api.delete("/api/consent").json()["given"] is False
    assert not consent_is_current(user_id=api.user.pk)


def test_consent_given_again_is_the_same_consent(api: Api) -> None:
    consent_grant(user=api.user)
    first = api.get("/api/consent").json()["granted_at"]
    assert api.post("/api/consent", {"text_version": CONSENT_VERSION}).json()["granted_at"] == first


def test_set_your_time_zone(api: Api) -> None:
    assert api.patch("/api/me", {"timezone": "Europe/Paris"}).json()["timezone"] == "Europe/Paris"
    body = assert_error(api.patch("/api/me", {"timezone": "Mars/Olympus"}), 422, "invalid_timezone")
    assert body["extra"]["fields"][0]["field"] == "timezone"
    api.user.refresh_from_db()
    assert api.user.timezone == "Europe/Paris"


# Errors --------------------------------------------------------------------------------------------


def test_malformed_json_is_a_400(api: Api) -> None:
    response = api.client.post("/api/tasks", "{not json", content_type="application/json")
    assert_error(response, 400, "malformed_body")


def test_a_form_body_is_a_400_not_a_500(api: Api) -> None:
    response = api.client.post("/api/tasks", "title=x", content_type="application/x-www-form-urlencoded")
    assert_error(response, 400, "malformed_body")
    broken = api.client.post(
        "/api/tasks", b"--b\r\nContent-Disposition: form-data\r\n", content_type="multipart/form-data; boundary=b"
    )
    assert broken.status_code == 400 and broken.json()["code"] in ("malformed_body", "bad_request")


def test_a_form_body_from_a_browser_session_is_a_400(client: Client, user: User) -> None:
    client.force_login(user)
    broken = client.post(
        "/api/tasks", b"--b\r\nContent-Disposition: form-data\r\n", content_type="multipart/form-data; boundary=b"
    )
    assert broken.status_code == 400 and set(broken.json()) == {"code", "message", "extra"}


def test_unknown_fields_and_wrong_types_are_a_422_naming_them(api: Api) -> None:
    body = assert_error(api.post("/api/tasks", {"title": "x", "colour": "red"}), 422, "invalid_input")
    assert any(f["field"] == "colour" for f in body["extra"]["fields"])
    body = assert_error(api.get("/api/tasks", limit=1000), 422, "invalid_input")
    assert body["extra"]["fields"][0]["field"] == "limit"


def test_a_body_over_the_upload_limit_is_a_413(api: Api, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert_error(api.post("/api/tasks", {"title": "x", "notes": "n" * 2000}), 413, "body_too_large")
    browser = Client()
    browser.force_login(api.user)
    response = browser.post("/api/tasks", {"title": "x" * 2000})  # a form body, read for its CSRF token
    assert_error(response, 413, "body_too_large")


def test_a_wrong_method_is_a_405_with_allow(api: Api) -> None:
    response = api.delete("/api/tasks")
    body = assert_error(response, 405, "method_not_allowed")
    assert set(body["extra"]["allowed"]) == {"GET", "POST"} and "GET" in response["Allow"]
    assert_error(api.client.put("/api/tasks/1"), 405, "method_not_allowed")


def test_unknown_paths_are_a_404(api: Api) -> None:
    assert_error(api.get("/api/nowhere"), 404, "not_found")
    assert_error(api.get("/api/tasks/not-a-number"), 404, "not_found")
    assert_error(api.get("/api/"), 404, "not_found")


# The document --------------------------------------------------------------------------------------


def test_every_operation_declares_every_error_status_with_the_error_schema(client: Client) -> None:
    document = client.get("/api/openapi.json").json()
    operations = [op for ops in document["paths"].values() for op in ops.values()]
    assert len(operations) >= 17
    for operation in operations:
        for status in ("400", "401", "403", "404", "405", "413", "422", "429"):
            content = operation["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/Error"}, (operation["operationId"], status)
    assert set(document["components"]["schemas"]["Error"]["required"]) == {"code", "message", "extra"}


def test_the_docs_page_loads_its_assets_from_our_static_files(client: Client) -> None:
    page = client.get("/api/docs").content.decode()
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "https://" not in page
    assert '"validatorUrl": null' in page
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        response = client.get(f"/static/vendor/swagger-ui/{asset}")
        assert response.status_code == 200
        assert len(b"".join(response.streaming_content)) > 10_000  # type: ignore[attr-defined]


# Conversations: kind, sentence, conversation, history; undo and suggestions -----------------------------


def test_a_task_shows_its_kind_whom_it_waits_on_its_conversation_and_its_history(api: Api) -> None:
    user = api.user
    gmail = IntegrationFactory(user=user)
    item = email_task(
        user,
        gmail.pk,
        "s1",
        "Send the Q3 numbers",
        sentence="Could you send me the Q3 numbers?",
        conversation_key="<t1@x>",
    )
    Task.objects.filter(pk=item.pk).update(kind=Task.Kind.WAITING, waiting_on="Sam <sam@example.org>")
    event = email_closes(item, email_folder="inbox", email_sender="Sam <sam@example.org>", sentence="Here are they.")

    body = api.get(f"/api/tasks/{item.pk}").json()

    assert (body["kind"], body["waiting_on"], body["conversation"]) == ("waiting", "Sam <sam@example.org>", "<t1@x>")
    assert body["sentence"] == "Could you send me the Q3 numbers?"
    assert (body["status"], body["hand_changed"], body["suggestion"]) == ("done", False, None)
    [row] = body["history"]
    assert row["id"] == event.pk
    assert (row["action"], row["by"], row["sentence"], row["status_before"], row["can_undo"]) == (
        "closed",
        "email",
        "Here are they.",
        "open",
        True,
    )
    assert row["email"] == {
        "mailbox_id": gmail.pk,
        "folder": "inbox",
        "sender": "Sam <sam@example.org>",
        "received_at": row["email"]["received_at"],
        "web_link": event.web_link,
    }
    manual = api.get(f"/api/tasks/{task_create(user=user, title='By hand').pk}").json()
    assert (manual["kind"], manual["conversation"], manual["history"]) == ("ask", None, [])


def test_the_list_filters_by_kind(api: Api) -> None:
    gmail = IntegrationFactory(user=api.user)
    for n, kind in enumerate(Task.Kind.values):
        task = email_task(api.user, gmail.pk, f"m{n}", f"A {kind}")
        Task.objects.filter(pk=task.pk).update(kind=kind)

    def titles(**params: Any) -> set[str]:
        return {t["title"] for t in api.get("/api/tasks", **params).json()["items"]}

    assert titles() == {"A ask", "A commitment", "A waiting"}  # every kind unless a filter says one
    assert titles(kind="waiting") == {"A waiting"}
    assert titles(kind="commitment", status="all") == {"A commitment"}
    body = assert_error(api.get("/api/tasks", kind="someday"), 422, "invalid_input")
    assert body["extra"]["fields"][0]["field"] == "kind"


def test_undo_an_emails_close_through_the_api(api: Api) -> None:
    task = email_task(api.user, IntegrationFactory(user=api.user).pk, "m1", "Send the deck")
    event = email_closes(task)
    path = f"/api/tasks/{task.pk}/history/{event.pk}/undo"

    undone = api.post(path)

    assert undone.status_code == 200, undone.content
    body = undone.json()
    assert (body["status"], body["hand_changed"]) == ("open", True)
    assert [(row["action"], row["by"], row["can_undo"]) for row in body["history"]] == [
        ("closed", "email", False),
        ("undone", "person", False),
    ]
    assert body["history"][0]["undone_at"] is not None
    assert_error(api.post(path), 400, "not_undoable")
    assert_error(api.post(f"/api/tasks/{task.pk}/history/{event.pk + 100}/undo"), 404, "event_not_found")
    stranger = UserFactory()
    theirs = email_closes(email_task(stranger, IntegrationFactory(user=stranger).pk, "x1", "Theirs"))
    assert_error(api.post(f"/api/tasks/{theirs.task_id}/history/{theirs.pk}/undo"), 404, "event_not_found")


def test_answer_a_suggestion_through_the_api(api: Api) -> None:
    gmail = IntegrationFactory(user=api.user)
    task = email_task(api.user, gmail.pk, "m1", "Send the deck")
    api.patch(f"/api/tasks/{task.pk}", {"notes": "mine now"})
    later = timezone.localdate() + timedelta(days=9)
    moved = TaskEventFactory(task=task, action="suggested", due_date_after=later, sentence="Next week then.")

    body = api.get(f"/api/tasks/{task.pk}").json()
    assert (body["hand_changed"], body["suggestion"]) == (True, moved.pk)
    path = f"/api/tasks/{task.pk}/history/{moved.pk}/suggestion"
    assert_error(api.post(path, {"answer": "perhaps"}), 422, "invalid_input")
    taken = api.post(path, {"answer": "accept"}).json()
    assert (taken["due_date"], taken["status"], taken["suggestion"]) == (later.isoformat(), "open", None)
    assert_error(api.post(path, {"answer": "dismiss"}), 400, "suggestion_answered")

    closing = TaskEventFactory(task=task, action="suggested", sentence="Here is the deck.")
    assert (
        api.post(f"/api/tasks/{task.pk}/history/{closing.pk}/suggestion", {"answer": "dismiss"}).json()["status"]
        == "open"
    )
    assert api.get(f"/api/tasks/{task.pk}").json()["suggestion"] is None
