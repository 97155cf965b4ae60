"""The digest fans out in chunks (issue 33): a chunk costs the same statements for three people as for forty,
jobs at once share the people, a person's next look is their next morning, and a worker killed mid-chunk
leaves nobody without their digest and nobody with two (the relay a real one: sandbox/smtp.py)."""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from accounts.services import user_set_timezone
from reminders.digest import _claim, digest_send_due, digest_set
from reminders.models import LOOK_AT_ONCE, DigestDay, DigestSubscription
from sandbox.smtp import SmtpSink
from tasks.models import Task
from tasks.services import task_create
from tasks.snooze import person_today
from tests.concurrency import at_once
from tests.factories import UserFactory
from tests.processes import run_mail_job

LEASE = timedelta(seconds=300)  # the chunk processes' DIGEST_CHUNK_LEASE_SECONDS
TOKYO_MORNING = datetime(2026, 12, 1, 22, 30, tzinfo=UTC)  # 07:30 on 2 December in Tokyo


def _people(count: int, zone: str = "Asia/Tokyo", *, due: date | None = date(2026, 12, 2)) -> list[User]:
    people: list[User] = []
    for n in range(count):
        user = UserFactory(timezone=zone)
        digest_set(user=user, enabled=True)
        task_create(user=user, title=f"Report {n}", due_date=due)
        task_create(user=user, title=f"Invoice {n}", due_date=due and due - timedelta(days=3))
        people.append(user)
    return people


def _statements_of_one_scan(settings, count: int) -> int:
    people = _people(count)
    mail.outbox.clear()
    with CaptureQueriesContext(connection) as statements:
        result = digest_send_due(now=TOKYO_MORNING)
    assert result["sent"] == count and len(mail.outbox) == count
    assert {m.to[0] for m in mail.outbox} == {p.email for p in people}
    # The test's own transaction makes the chunk's a savepoint: not a statement of the chunk's.
    return len([q for q in statements.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))])


def test_a_chunk_costs_the_same_statements_for_three_people_as_for_forty(db: None, settings) -> None:
    settings.DIGEST_CHUNK = 50
    few = _statements_of_one_scan(settings, 3)
    DigestSubscription.objects.update(enabled=False)
    many = _statements_of_one_scan(settings, 40)
    assert few == many == 5  # claim, their days, their tasks, the days recorded, the next mornings


def test_each_person_is_looked_at_again_at_their_next_morning(db: None, settings) -> None:
    [tokyo] = _people(1)
    [los_angeles] = _people(1, "America/Los_Angeles")
    digest_send_due(now=TOKYO_MORNING)  # 14:30 in Los Angeles: past its morning, nothing sent
    due = dict(DigestSubscription.objects.values_list("user_id", "due_at"))
    assert due[tokyo.pk] == datetime(2026, 12, 2, 22, 0, tzinfo=UTC)  # 07:00 on 3 December in Tokyo
    assert due[los_angeles.pk] == datetime(2026, 12, 2, 15, 0, tzinfo=UTC)  # 07:00 on 2 December in Los Angeles
    # A new time zone is another morning: looked at by the next scan, which works it out again.
    user_set_timezone(user=los_angeles, timezone_name="Asia/Tokyo")
    assert DigestSubscription.objects.get(user=los_angeles).due_at == LOOK_AT_ONCE
    assert digest_send_due(now=TOKYO_MORNING + timedelta(minutes=5))["sent"] == 1
    assert [m.to for m in mail.outbox] == [[tokyo.email], [los_angeles.email]]


@pytest.mark.django_db(transaction=True)
def test_jobs_at_once_share_the_chunks_and_each_person_gets_one(settings) -> None:
    settings.DIGEST_CHUNK = 3
    people = _people(11)
    results = at_once(*[lambda: digest_send_due(now=TOKYO_MORNING)] * 3)
    assert sum(r["sent"] for r in results) == 11
    assert sorted(m.to[0] for m in mail.outbox) == sorted(p.email for p in people)
    assert DigestDay.objects.filter(outcome=DigestDay.Outcome.SENT).count() == 11


def _chunk_process(sink: SmtpSink, tmp_path: Path, crash_point: str = "") -> subprocess.CompletedProcess[str]:
    return run_mail_job(
        "digest_chunk_job",
        relay_port=sink.port,
        local_dir=str(tmp_path),
        crash_point=crash_point,
        DIGEST_HOUR="0",
        DIGEST_SEND_HOURS="24",  # whatever the hour the test runs at, it is everyone's "morning"
        DIGEST_CHUNK="50",
        # Long enough for a chunk's twelve mails on a loaded machine: a short one made the job give its people
        # back (at 0.8 of it) before it reached the crash point. The test ends the lease itself (LEASE below).
        DIGEST_CHUNK_LEASE_SECONDS=str(LEASE.seconds),
    )


@pytest.mark.slow  # it starts processes (tests/slow.py)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("crash_point", "copies"),
    [
        # Killed after the 5th person's send was journalled: the next job records those five, sends the rest.
        ("digest_journalled:5", {}),
        # Killed between the mail server's 250 to the 5th person and the journal: that person gets a second
        # copy (with the same Message-ID), nobody gets none: the side chosen (reminders/digest.py).
        ("digest_handed_over:5", {4: 2}),
    ],
)
def test_a_worker_killed_mid_chunk_leaves_nobody_without_a_digest(
    tmp_path: Path, crash_point: str, copies: dict[int, int]
) -> None:
    people = sorted(_people(12, "UTC", due=None), key=lambda p: p.pk)
    for user in people:
        Task.objects.filter(user=user).update(due_date=person_today(user=user))
    with SmtpSink(tmp_path / "relay") as sink:
        killed = _chunk_process(sink, tmp_path, crash_point)
        assert killed.returncode == -9, killed.stderr
        assert len(sink.messages()) == 5
        assert not DigestDay.objects.exists()  # the chunk died before it recorded anything
        # Its lease (DIGEST_CHUNK_LEASE_SECONDS) ends, as that much time would: its people are due again.
        assert DigestSubscription.objects.filter(due_at__gt=timezone.now()).count() == len(people)
        DigestSubscription.objects.update(due_at=F("due_at") - LEASE)
        again = _chunk_process(sink, tmp_path)
        assert again.returncode == 0, again.stderr
        kept = sink.messages()
    received = [str(m["To"]) for m in kept]
    assert [received.count(p.email) for p in people] == [copies.get(n, 1) for n in range(len(people))]
    assert len({str(m["Message-ID"]) for m in kept}) == len(people)  # a copy is the same message
    assert DigestDay.objects.filter(outcome=DigestDay.Outcome.SENT).count() == len(people)


def test_a_zone_change_or_the_digest_on_again_leaves_a_person_held_by_a_chunk_to_that_chunk(db: None, settings) -> None:
    """A chunk holds its people by a lease on `due_at`: made due at once meanwhile, a second chunk would claim
    the same person beside the first and both could send."""
    settings.DIGEST_HOUR, settings.DIGEST_SEND_HOURS = 0, 24  # whatever the hour, it is their morning
    [ann, bob] = _people(2, "UTC", due=None)
    Task.objects.update(due_date=person_today(user=ann))
    held = _claim(now=timezone.now(), limit=2)  # a chunk in flight: it claimed both and has sent nothing yet
    assert {c.user.pk for c in held} == {ann.pk, bob.pk}
    lease = dict(DigestSubscription.objects.values_list("user_id", "due_at"))

    user_set_timezone(user=ann, timezone_name="Europe/London")
    digest_set(user=bob, enabled=False)
    digest_set(user=bob, enabled=True)

    assert dict(DigestSubscription.objects.values_list("user_id", "due_at")) == lease
    assert digest_send_due()["sent"] == 0 and mail.outbox == []  # nobody claimed a second time
    # Once the lease has ended (as its time would), the same change makes the person due at once.
    DigestSubscription.objects.update(due_at=F("due_at") - timedelta(seconds=settings.DIGEST_CHUNK_LEASE_SECONDS))
    user_set_timezone(user=ann, timezone_name="UTC")
    assert DigestSubscription.objects.get(user=ann).due_at == LOOK_AT_ONCE


def test_a_person_whose_mail_cannot_be_made_does_not_hold_back_the_rest_of_the_chunk(db: None) -> None:
    [broken, ann] = sorted(_people(2), key=lambda p: p.pk)  # claimed in this order
    User.objects.filter(pk=broken.pk).update(email="broken\n@example.com")  # no header can carry it

    result = digest_send_due(now=TOKYO_MORNING)

    assert (result["sent"], result["failed"]) == (1, 1)
    assert [m.to for m in mail.outbox] == [[ann.email]]
    # Looked at again at the next scan, not dropped for the day.
    assert DigestSubscription.objects.get(user=broken).due_at < TOKYO_MORNING + timedelta(hours=1)
