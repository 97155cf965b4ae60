"""Never mute yourself (issue 31): "Never make tasks from this sender" is not offered on items of the person's own
mail (a waiting item, a promise: their Sent mail), and the service refuses any address of theirs (the account's,
any mailbox they connected), on the page and in the API. Mutes of one's own address made before are lifted by a
migration that says how many."""

from __future__ import annotations

import importlib
import re

import pytest
from django.apps import apps
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun, MutedSender, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, run_extraction
from tests.mail import rfc822
from tests.tasks.test_api_v1 import Api, assert_error

pytestmark = pytest.mark.django_db

SAM = "Sam Lee <sam@example.org>"


def row(page: str, task: Task) -> str:
    found = re.search(rf'<li class="task[^"]*" id="task-{task.pk}".*?</li>\s*(?=<li|</ul>)', page, re.S)
    assert found, f"task {task.pk} is not on the page"
    return found.group(0)


def waiting_item(sandbox: SandboxClient, gmail: GmailBox, user: User) -> Task:
    sandbox.send_gmail(gmail.address, to=[SAM], body="Could you send me the Q3 numbers by Friday?")
    run = run_extraction(user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    return Task.objects.get(user=user, kind=Task.Kind.WAITING)


def test_own_address_no_mute_is_offered_on_a_waiting_item_and_the_service_refuses_it(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    waiting = waiting_item(sandbox, gmail, consenting_user)
    gmail.deliver(rfc822("Report", "Hi,\n\nPlease send the quarterly report by Friday.\n", sender=SAM))
    run_extraction(consenting_user)
    ask = Task.objects.get(user=consenting_user, kind=Task.Kind.ASK)
    client.force_login(consenting_user)

    page = client.get("/?kind=waiting").content.decode()
    assert "mute-sender" not in row(page, waiting)
    assert 'data-action="mute-sender"' in row(client.get("/").content.decode(), ask)  # a stranger's: offered

    # Asked anyway (an old page, a hand-made request): refused with a message, nothing muted.
    answer = client.post(f"/tasks/{waiting.pk}/mute-sender", {"reason": "sender"}, follow=True)
    said = " ".join(str(m) for m in answer.context["messages"])
    assert "your own address" in said, said
    assert not MutedSender.objects.exists()

    # And the person's Sent mail goes on reaching Gemini.
    sandbox.send_gmail(gmail.address, to=[SAM], body="Could you also send me the Q4 plan by Monday?")
    run = run_extraction(consenting_user)
    assert run.emails_skipped == 0 and run.emails_sent_to_llm == 1


def test_own_address_the_api_refuses_the_account_and_every_mailbox_address(
    sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    api = Api(consenting_user)
    for sender in (f"Me <{consenting_user.email.upper()}>", f"Me at work <{gmail.address}>"):
        own = Task.objects.create(
            user=consenting_user,
            title=f"From {sender}",
            source=Task.Source.EMAIL_AI,
            email_sender=sender,
            integration=gmail.integration,
            source_id=f"m-{len(sender)}",
        )
        body = assert_error(api.post("/api/muted-senders", {"task_id": own.pk, "reason": "sender"}), 400, "own_address")
        assert "your own address" in body["message"]
    assert not MutedSender.objects.exists()

    stranger = Task.objects.create(
        user=consenting_user,
        title="Renew",
        source=Task.Source.EMAIL_AI,
        email_sender="Vendor <Sales@Vendor.example>",
        integration=gmail.integration,
        source_id="m-vendor",
    )
    made = api.post("/api/muted-senders", {"task_id": stranger.pk, "reason": "sender"})
    assert made.status_code == 201, made.content
    assert made.json()["address"] == "sales@vendor.example"
    listed = api.get("/api/muted-senders").json()
    assert [m["address"] for m in listed] == ["sales@vendor.example"]
    assert api.delete(f"/api/muted-senders/{listed[0]['id']}").status_code == 204
    assert api.get("/api/muted-senders").json() == []
    assert_error(api.delete(f"/api/muted-senders/{listed[0]['id']}"), 404, "muted_sender_not_found")
    assert_error(api.post("/api/muted-senders", {"task_id": 999999, "reason": "sender"}), 404, "task_not_found")
    assert_error(api.post("/api/muted-senders", {"task_id": stranger.pk, "reason": "loud"}), 422, "invalid_input")


def test_own_address_mutes_made_before_are_lifted_by_a_migration_that_says_how_many(
    capsys: pytest.CaptureFixture[str], gmail: GmailBox, consenting_user: User
) -> None:
    MutedSender.objects.create(user=consenting_user, address=gmail.address, reason="sender", task_title="Q3")
    MutedSender.objects.create(user=consenting_user, address=consenting_user.email.lower(), reason="sender")
    MutedSender.objects.create(user=consenting_user, address="sales@vendor.example", reason="sender")
    migration = importlib.import_module("extraction.migrations.0018_lift_own_address_mutes")

    migration.lift_own_address_mutes(apps, None)

    assert list(MutedSender.objects.values_list("address", flat=True)) == ["sales@vendor.example"]
    assert "Lifted 2 mutes of people's own addresses" in capsys.readouterr().out
    assert not ProcessedEmail.objects.exists()
