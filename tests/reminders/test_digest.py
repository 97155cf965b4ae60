"""The morning digest: one email a day per person at their morning, in their time zone, whatever the number
of workers and restarts; none on a day with nothing to say; off until chosen, and off again by a signed link
that needs no login (what the link carries, and when it dies: test_unsubscribe_token.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from email import message_from_bytes, policy
from pathlib import Path

import pytest
from django.core import mail, signing
from django.test import Client

from accounts.models import User
from reminders.digest import digest_send_due, digest_set, unsubscribe_link_make
from reminders.models import DigestDay
from tasks.models import Task
from tasks.services import task_create
from tests.concurrency import at_once
from tests.factories import UserFactory

# 22:30 UTC on 1 December is 07:30 on 2 December in Tokyo and 14:30 on 1 December in Los Angeles.
TOKYO_MORNING = datetime(2026, 12, 1, 22, 30, tzinfo=UTC)
# 15:10 UTC on 2 December is 07:10 in Los Angeles (2 December), 00:10 on 3 December in Tokyo, 16:10 in Berlin.
LA_MORNING = datetime(2026, 12, 2, 15, 10, tzinfo=UTC)
BERLIN_MORNING = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)  # 07:30 in Berlin


def _person(zone: str, *, digest: bool = True) -> User:
    user = UserFactory(timezone=zone)
    if digest:
        digest_set(user=user, enabled=True)
    return user


def _task(user: User, title: str, due: date | None, **fields: object) -> Task:
    task = task_create(user=user, title=title, due_date=due)
    if fields:
        Task.objects.filter(pk=task.pk).update(**fields)
    return task


def _digests_to(user: User) -> list[mail.EmailMessage]:
    return [m for m in mail.outbox if m.to == [user.email]]


@pytest.fixture
def three_zones(db: None) -> tuple[User, User, User]:
    tokyo = _person("Asia/Tokyo")
    los_angeles = _person("America/Los_Angeles")
    berlin = _person("Europe/Berlin")  # nothing due: never an email
    _task(tokyo, "Tokyo report", date(2026, 12, 2))
    _task(tokyo, "Tokyo invoice", date(2026, 11, 30))
    _task(tokyo, "Tokyo later", date(2026, 12, 20))
    _task(los_angeles, "LA call", date(2026, 12, 2))
    _task(berlin, "Berlin someday", None)
    _task(berlin, "Berlin next month", date(2027, 1, 15))
    return tokyo, los_angeles, berlin


def test_the_digest_is_sent_at_each_persons_morning_in_their_time_zone_once(three_zones: tuple[User, ...]) -> None:
    tokyo, los_angeles, berlin = three_zones

    digest_send_due(now=TOKYO_MORNING)
    assert [len(_digests_to(p)) for p in (tokyo, los_angeles, berlin)] == [1, 0, 0]  # only Tokyo's morning
    [message] = _digests_to(tokyo)
    assert "Tokyo report" in message.body and "Tokyo invoice" in message.body  # due today (their 2 Dec), overdue
    assert "Tokyo later" not in message.body
    assert message.subject == "Tasklift today: 1 due today, 1 overdue"

    digest_send_due(now=TOKYO_MORNING + timedelta(minutes=5))  # the next scan of the same morning
    digest_send_due(now=BERLIN_MORNING)
    digest_send_due(now=LA_MORNING)
    assert [len(_digests_to(p)) for p in (tokyo, los_angeles, berlin)] == [1, 1, 0]
    assert "LA call" in _digests_to(los_angeles)[0].body
    # Berlin's morning came, with nothing due: no email, and the day is settled (not looked at again).
    assert DigestDay.objects.get(user=berlin).outcome == DigestDay.Outcome.EMPTY


def test_no_digest_without_choosing_it_and_none_outside_the_morning(db: None) -> None:
    quiet = _person("Asia/Tokyo", digest=False)
    _task(quiet, "Due", date(2026, 12, 2))
    evening = _person("America/Los_Angeles")
    _task(evening, "Due", date(2026, 12, 1))
    digest_send_due(now=TOKYO_MORNING)  # 14:30 in Los Angeles: past the morning
    assert mail.outbox == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_scanning_at_once_send_one_digest_per_person(three_zones: tuple[User, ...]) -> None:
    """Two scans at the same moment, each on its own database connection (two workers): each person's
    day is taken by one of them; the other waits on its row and finds it taken."""
    tokyo, _, _ = three_zones
    results = at_once(*[lambda: digest_send_due(now=TOKYO_MORNING)] * 2)
    assert sorted(r["sent"] for r in results) == [0, 1]
    assert len(_digests_to(tokyo)) == 1


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)
def test_two_worker_processes_at_once_then_a_restart_send_one_digest_per_person(
    three_zones: tuple[User, ...], tmp_path: Path
) -> None:
    """The beat job run by two worker processes started together, then by a worker started again, on the
    real clock, with people in Tokyo, Los Angeles and Berlin: one email to each person with something due
    today in their own time zone, none to Berlin's (nothing due). The emails are files (the development
    backend), read back per recipient."""
    import subprocess
    import sys

    from django.conf import settings

    from tasks.snooze import person_today
    from tests.processes import ROOT, process_env

    tokyo, los_angeles, berlin = three_zones
    Task.objects.filter(user__in=[tokyo, los_angeles]).delete()
    for user in (tokyo, los_angeles):
        _task(user, f"Due today in {user.timezone}", person_today(user=user))  # each one's own today
    env = process_env(
        TASKLIFT_LOCAL_DIR=str(tmp_path),  # the development email backend writes under it
        REDIS_URL=settings.REDIS_URL,
        DIGEST_HOUR="0",
        DIGEST_SEND_HOURS="24",  # whatever the hour the test runs at, it is everyone's "morning"
    )
    script = "from reminders.jobs import digest_chunk_job; print(digest_chunk_job.apply().get())"

    def worker() -> subprocess.Popen[str]:
        command = [sys.executable, "manage.py", "shell", "-c", script]
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    for batch in ([worker(), worker()], [worker()]):  # two workers at once, then one started again
        for process in batch:
            _, errors = process.communicate(timeout=180)
            assert process.returncode == 0, errors
    messages = [
        message_from_bytes(chunk.strip().encode(), policy=policy.default)
        for path in (tmp_path / "mail").glob("*.log")
        for chunk in path.read_text().split("-" * 79)
        if chunk.strip()
    ]
    assert sorted(str(m["To"]) for m in messages) == sorted([tokyo.email, los_angeles.email])
    for message in messages:
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert DigestDay.objects.get(user=berlin).outcome == DigestDay.Outcome.EMPTY


def test_the_digest_carries_rfc_8058_one_click_unsubscribe_headers(three_zones: tuple[User, ...]) -> None:
    tokyo, _, _ = three_zones
    digest_send_due(now=TOKYO_MORNING)
    [message] = _digests_to(tokyo)
    link = message.extra_headers["List-Unsubscribe"]
    assert link.startswith("<http") and "/digest/unsubscribe?token=" in link and link.endswith(">")
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert link[1:-1] in message.body


def test_the_digest_unsubscribe_link_works_signed_out(three_zones: tuple[User, ...]) -> None:
    tokyo, _, _ = three_zones
    link = unsubscribe_link_make(user=tokyo)
    path = link.split("127.0.0.1:8000", 1)[-1] if "127.0.0.1:8000" in link else link[link.index("/digest/") :]
    browser = Client()  # nobody logged in
    page = browser.get(path)
    assert page.status_code == 200 and b'id="unsubscribe"' in page.content  # asks first: scanners change nothing
    assert tokyo.digest_subscription.enabled
    done = browser.post(path)
    assert done.status_code == 200 and b'id="unsubscribed"' in done.content
    tokyo.digest_subscription.refresh_from_db()
    assert not tokyo.digest_subscription.enabled
    digest_send_due(now=TOKYO_MORNING)
    assert _digests_to(tokyo) == []


def test_a_mail_clients_one_click_post_unsubscribes_from_the_digest(three_zones: tuple[User, ...]) -> None:
    tokyo, _, _ = three_zones
    link = unsubscribe_link_make(user=tokyo)
    path = link[link.index("/digest/") :]
    answer = Client(enforce_csrf_checks=True).post(
        path, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert answer.status_code == 200
    tokyo.digest_subscription.refresh_from_db()
    assert not tokyo.digest_subscription.enabled


def test_a_forged_or_expired_digest_unsubscribe_link_gives_a_clear_page(three_zones: tuple[User, ...]) -> None:
    tokyo, _, _ = three_zones
    browser = Client()
    forged = signing.dumps({"u": tokyo.pk}, salt="another purpose")
    for token in (forged, "nonsense", "", unsubscribe_link_make(user=tokyo).split("token=")[1][:-3] + "abc"):
        answer = browser.post(f"/digest/unsubscribe?token={token}")
        assert answer.status_code == 400 and b'id="link-invalid"' in answer.content, token
    with pytest.MonkeyPatch.context() as patch:  # a link made 91 days ago (the clock the signer reads)
        patch.setattr("time.time", lambda: datetime.now(UTC).timestamp() - 91 * 86400)
        expired = unsubscribe_link_make(user=tokyo).split("token=")[1]
    answer = browser.post(f"/digest/unsubscribe?token={expired}")
    assert answer.status_code == 400 and b'id="link-expired"' in answer.content
    tokyo.digest_subscription.refresh_from_db()
    assert tokyo.digest_subscription.enabled  # none of them changed anything


def test_newly_past_due_waiting_items_are_in_the_digest_once(db: None) -> None:
    tokyo = _person("Asia/Tokyo")
    _task(tokyo, "Answer from Ann", date(2026, 12, 1), kind=Task.Kind.WAITING, waiting_on="Ann <ann@example.com>")
    _task(tokyo, "Old wait", date(2026, 11, 20), kind=Task.Kind.WAITING)
    digest_send_due(now=TOKYO_MORNING)
    [message] = _digests_to(tokyo)
    assert "Answer from Ann" in message.body and "Old wait" not in message.body
    mail.outbox.clear()
    digest_send_due(now=TOKYO_MORNING + timedelta(days=1))  # nothing newly past due, nothing else: no email
    assert _digests_to(tokyo) == []


def test_the_digest_is_chosen_in_settings(client: Client, user: User) -> None:
    client.force_login(user)
    page = client.get("/settings/")
    assert (
        b'id="digest-enabled"' in page.content and b"checked" not in page.content.split(b'id="digest-enabled"')[1][:20]
    )
    assert client.post("/settings/digest", {"digest_enabled": "on"}).status_code == 302
    assert user.digest_subscription.enabled
    client.post("/settings/digest", {})
    user.digest_subscription.refresh_from_db()
    assert not user.digest_subscription.enabled
