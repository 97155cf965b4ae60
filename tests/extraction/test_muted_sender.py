"""Teaching Tasklift (issue 23 point 9): "Never make tasks from this sender" on a task, and "Not a task" on a
dismissed one, are remembered per person, shown and undone in Settings, and honoured by the next runs: that
sender's mail is skipped before Gemini like bulk mail, recorded in the ledger with its reason, and counted."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User
from extraction.models import ExtractionRun, MutedSender, ProcessedEmail
from sandbox.client import SandboxClient
from tasks.models import Task
from tasks.services import task_create
from tests.conftest import GmailBox, connect_gmail, run_extraction
from tests.factories import UserFactory
from tests.mail import rfc822

pytestmark = pytest.mark.django_db

PROMO = "Pushy Vendor <Sales@Vendor.example>"


def vendor_ask(n: int) -> str:
    return rfc822(f"Offer {n}", f"Hi,\n\nPlease renew the vendor plan {n} by Friday.\n", sender=PROMO)


def colleague_ask(n: int) -> str:
    return rfc822(f"Report {n}", f"Hi,\n\nPlease send the quarterly report {n} by Friday.\n")


def prompts(sandbox: SandboxClient) -> str:
    return "\n".join(r["body"] for r in sandbox.requests("gemini") if "generateContent" in r["path"])


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_muted_sender_from_a_task_is_skipped_before_gemini_recorded_and_counted(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(vendor_ask(1))
    run_extraction(consenting_user)
    task = Task.objects.get(title__icontains="vendor plan 1")
    client.force_login(consenting_user)
    row = client.get("/").content.decode()
    assert f'action="/tasks/{task.pk}/mute-sender"' in row  # offered on the task

    answer = client.post(f"/tasks/{task.pk}/mute-sender", {"reason": "sender"}, follow=True)

    said = " ".join(str(m) for m in answer.context["messages"])
    assert "sales@vendor.example" in said and "Settings" in said, said
    muted = MutedSender.objects.get(user=consenting_user)
    assert (muted.address, muted.reason) == ("sales@vendor.example", "sender")

    sandbox.clear_requests()
    skipped_id = gmail.deliver(vendor_ask(2))
    gmail.deliver(colleague_ask(3))
    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert "vendor plan 2" not in prompts(sandbox) and "quarterly report 3" in prompts(sandbox)
    entry = ProcessedEmail.objects.get(message_id=skipped_id)
    assert (entry.outcome, entry.last_error) == ("skipped", "muted:sender")
    assert (run.emails_skipped, run.emails_sent_to_llm, run.tasks_created) == (1, 1, 1)
    assert not Task.objects.filter(title__icontains="vendor plan 2").exists()

    page = text(client.get("/settings/").content.decode())
    assert "sales@vendor.example" in page and "1 email skipped" in page, page
    # Not among the bulk mail one may have read from Mailboxes: it is undone in Settings.
    assert "Offer 2" not in client.get("/mailboxes/").content.decode()
    line = text(client.get("/").content.decode())
    assert "senders you muted" in line


def test_not_a_task_on_a_dismissed_task_mutes_its_sender_with_that_reason(
    client: Client, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(vendor_ask(1))
    run_extraction(consenting_user)
    task = Task.objects.get()
    client.force_login(consenting_user)
    assert f'/tasks/{task.pk}/mute-sender" ' not in client.get("/?status=dismissed").content.decode()
    client.post(f"/tasks/{task.pk}/status", {"status": "dismissed"})
    dismissed = client.get("/?status=dismissed").content.decode()
    assert re.search(r'name="reason" value="not_a_task"[^>]*>\s*Not a task', dismissed), dismissed

    client.post(f"/tasks/{task.pk}/mute-sender", {"reason": "not_a_task"})

    muted = MutedSender.objects.get(user=consenting_user)
    assert muted.reason == "not_a_task"
    assert "you marked a task from them as not a task" in text(client.get("/settings/").content.decode())
    gmail.deliver(vendor_ask(2))
    run_extraction(consenting_user)
    assert ProcessedEmail.objects.filter(last_error="muted:not_a_task").count() == 1


def test_muted_sender_undone_in_settings_is_read_again_and_only_for_that_person(
    client: Client, sandbox: SandboxClient, gmail: GmailBox, consenting_user: User
) -> None:
    gmail.deliver(vendor_ask(1))
    run_extraction(consenting_user)
    client.force_login(consenting_user)
    client.post(f"/tasks/{Task.objects.get().pk}/mute-sender", {"reason": "sender"})
    muted = MutedSender.objects.get()

    # Another person who gets the same sender's mail still has it read.
    other = UserFactory()
    from accounts.services import consent_grant

    consent_grant(user=other)
    theirs = connect_gmail(sandbox, other, "other@example.com")
    theirs.deliver(vendor_ask(5))
    run_extraction(other)
    assert Task.objects.filter(user=other, title__icontains="vendor plan 5").exists()
    assert client.post(f"/settings/muted/{muted.pk}/delete").status_code == 302
    assert not MutedSender.objects.exists()
    settings_page = client.get("/settings/").content.decode()
    assert "sales@vendor.example" not in settings_page[settings_page.index('id="muted-senders"') :]

    gmail.deliver(vendor_ask(2))
    run_extraction(consenting_user)
    assert Task.objects.filter(user=consenting_user, title__icontains="vendor plan 2").exists()


def test_muted_sender_needs_an_email_task_of_ones_own(client: Client, consenting_user: User) -> None:
    by_hand = task_create(user=consenting_user, title="Buy milk")
    someone = task_create(user=UserFactory(), title="Theirs")
    client.force_login(consenting_user)

    answer = client.post(f"/tasks/{by_hand.pk}/mute-sender", {"reason": "sender"}, follow=True)
    assert answer.status_code == 200
    assert "no sender" in " ".join(str(m) for m in answer.context["messages"])
    answer = client.post(f"/tasks/{someone.pk}/mute-sender", {"reason": "sender"}, follow=True)
    assert "no such task" in " ".join(str(m) for m in answer.context["messages"]).lower()
    answer = client.post(f"/tasks/{by_hand.pk}/mute-sender", {"reason": "nonsense"}, follow=True)
    assert answer.status_code == 200
    assert client.post("/settings/muted/999999/delete", follow=True).status_code == 200
    assert not MutedSender.objects.exists()
