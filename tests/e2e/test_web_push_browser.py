"""A reminder by Web Push reaches Chromium's service worker (issue 34): the page's script registers /sw.js, the
server pushes the reminder (pywebpush) to the sandbox's push service, which decrypts it; handed to the service
worker as the browser's push service would, it shows the reminder as a notification that opens the task."""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import User
from reminders.models import Reminder
from reminders.ring import reminders_send_due
from sandbox.client import SandboxClient
from tasks.services import task_create
from tasks.snooze import person_today
from tests.e2e.conftest import push_subscribe_page, service_worker_push


@pytest.mark.e2e
def test_web_push_reminder_shown_by_the_service_worker(
    live_site: str, consenting_user: User, sandbox: SandboxClient, signed_in: Any
) -> None:
    page = signed_in
    push_subscribe_page(page, live_site, sandbox)
    expect(page.locator("#push-settings h2")).to_have_text("Reminders on this device")
    page.reload()
    expect(page.locator("#push-list")).to_contain_text("Chromium")

    task = task_create(
        user=consenting_user,
        title="Call Bob about the lease",
        due_date=person_today(user=consenting_user) + timedelta(days=1),
        due_time=time(9, 0),
        reminder=60,
    )
    Reminder.objects.filter(task=task).update(remind_at=timezone.now() - timedelta(seconds=1))  # its time is now
    assert reminders_send_due()["pushed"] == 1
    [message] = sandbox.webpush_messages()

    shown = service_worker_push(page, live_site, message["payload"])

    assert shown == [
        {"title": "Call Bob about the lease", "body": "Due at 09:00", "url": f"{live_site}/tasks/{task.pk}"}
    ]
