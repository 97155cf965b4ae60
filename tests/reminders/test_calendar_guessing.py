"""The calendar feed against guessing and stale caches (issue 32 point 7): wrong secrets from one address are
refused past CALENDAR_GUESSES_PER_ADDRESS (a 429 with Retry-After, nothing looked up), while the right secret
is never counted; without Redis a 503 with Retry-After; and the feed is `private, no-cache` with an ETag, so
an unchanged feed is a 304 and a revoked one a 404 at the very next fetch."""

from __future__ import annotations

from datetime import date, time, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import DjangoAssertNumQueries, Settings

from accounts.models import User
from accounts.services import user_set_timezone
from reminders.calendar import calendar_feed_create, calendar_feed_revoke
from tasks.services import task_create
from tasks.snooze import person_today
from tests.factories import UserFactory
from tests.integrations.test_webhooks_unavailable import closed_port

pytestmark = pytest.mark.django_db

LIMIT = 20  # CALENDAR_GUESSES_PER_ADDRESS's default
GUESSER = "203.0.113.7"
CALENDAR_APP = "198.51.100.20"


def _path(secret: str) -> str:
    return f"/calendar/{secret}.ics"


def _wrong(n: int) -> str:
    return _path(f"tl_cal_wrong-guess-{n:04d}-{'x' * 30}")


@pytest.fixture
def secret(user: User) -> str:
    task_create(user=user, title="Renew the passport", due_date=date(2026, 12, 4))
    _, made = calendar_feed_create(user=user)
    return made


def test_wrong_secrets_are_refused_past_the_limit_while_the_right_one_from_another_address_works(
    secret: str, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    guesser = Client(REMOTE_ADDR=GUESSER)
    assert [guesser.get(_wrong(n)).status_code for n in range(LIMIT)] == [404] * LIMIT

    with django_assert_num_queries(0):  # counted before the lookup: a refused guess is never looked up
        refused = guesser.get(_wrong(LIMIT))
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 600 and b"Too many wrong calendar links" in refused.content
    assert guesser.get(_path(secret)).status_code == 429  # else the refusal would tell a right guess apart

    assert Client(REMOTE_ADDR=CALENDAR_APP).get(_path(secret)).status_code == 200


def test_a_calendar_app_fetching_its_own_link_is_never_counted(secret: str) -> None:
    app = Client(REMOTE_ADDR=CALENDAR_APP)
    assert {app.get(_path(secret)).status_code for _ in range(3 * LIMIT)} == {200}

    # Its fetches left the address's whole allowance of wrong secrets untouched.
    assert [app.get(_wrong(n)).status_code for n in range(LIMIT)] == [404] * LIMIT
    assert app.get(_wrong(LIMIT)).status_code == 429


def test_a_revoked_link_fetched_again_and_again_does_not_refuse_its_address(user: User, secret: str) -> None:
    """A calendar app keeps fetching a revoked link, from the fetchers that also fetch other people's links."""
    revoked_feed, revoked = calendar_feed_create(user=UserFactory())
    calendar_feed_revoke(user=revoked_feed.user, feed_id=revoked_feed.pk)
    fetcher = Client(REMOTE_ADDR=CALENDAR_APP)

    assert {fetcher.get(_path(revoked)).status_code for _ in range(2 * LIMIT)} == {404}
    assert fetcher.get(_path(secret)).status_code == 200


def test_without_redis_the_feed_answers_503_with_retry_after(secret: str, settings: Settings) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"

    answer = Client(REMOTE_ADDR=CALENDAR_APP).get(_path(secret))

    assert answer.status_code == 503 and int(answer["Retry-After"]) > 0


def test_an_unchanged_feed_is_a_304_for_its_etag_and_a_changed_one_a_new_body(
    user: User, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = Client(REMOTE_ADDR=CALENDAR_APP)
    noon = timezone.now().replace(hour=12, minute=0)  # the same day an hour on, whenever the test runs
    monkeypatch.setattr(timezone, "now", lambda: noon)
    first = app.get(_path(secret))
    assert first.status_code == 200 and first["Cache-Control"] == "private, no-cache"
    etag = first["ETag"]
    monkeypatch.setattr(timezone, "now", lambda: noon + timedelta(hours=1))  # the app's next fetch

    again = app.get(_path(secret), HTTP_IF_NONE_MATCH=etag)  # the same tasks, the same bytes
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag

    task_create(user=user, title="Pay the rent", due_date=date(2026, 12, 5))
    changed = app.get(_path(secret), HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag and b"Pay the rent" in changed.content


def test_a_revoked_feed_is_a_404_at_the_next_fetch_even_with_its_etag(client: Client, user: User, secret: str) -> None:
    app = Client(REMOTE_ADDR=CALENDAR_APP)
    etag = app.get(_path(secret))["ETag"]
    client.force_login(user)
    [feed] = user.calendar_feeds.all()
    assert client.post(f"/settings/calendar/{feed.pk}/revoke").status_code == 302

    assert app.get(_path(secret), HTTP_IF_NONE_MATCH=etag).status_code == 404


def test_an_unchanged_feed_is_answered_304_without_being_built_and_any_change_is_seen(
    user: User, secret: str, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    """The ETag comes from what the feed depends on (its tasks' count, ids and last change), so a calendar app
    asking again costs the feed's lookup and one aggregate, whatever the number of its events; a title edited,
    a task done or a date moved is a new ETag and a new body."""
    for day in range(1, 30):
        task_create(user=user, title=f"Task {day}", due_date=date(2026, 12, day))
    app = Client(REMOTE_ADDR=CALENDAR_APP)
    etag = app.get(_path(secret))["ETag"]

    with django_assert_max_num_queries(3):  # the feed, its last fetch (an hour's precision), the aggregate
        assert app.get(_path(secret), HTTP_IF_NONE_MATCH=etag).status_code == 304

    task = user.tasks.get(title="Task 3")
    for change in ({"title": "Task three"}, {"due_date": date(2026, 12, 31)}, {"status": "done"}):
        for field, value in change.items():
            setattr(task, field, value)
        task.save()
        answer = app.get(_path(secret), HTTP_IF_NONE_MATCH=etag)
        assert answer.status_code == 200, change
        assert answer["ETag"] != etag
        etag = answer["ETag"]
    assert b"Task three" not in answer.content  # done: out of the feed


def test_a_new_time_zone_is_a_new_feed_though_the_day_and_the_tasks_are_the_same(user: User, secret: str) -> None:
    """A timed event starts at its time in the person's zone: London to Lisbon (the same day and offset, always)
    changes every timed event's TZID, so the ETag the app holds must not answer 304."""
    user_set_timezone(user=user, timezone_name="Europe/London")
    tomorrow = person_today(user=user) + timedelta(days=1)
    task_create(user=user, title="Call Bob", due_date=tomorrow, due_time=time(15, 0))
    app = Client(REMOTE_ADDR=CALENDAR_APP)
    first = app.get(_path(secret))
    assert b"TZID=Europe/London" in first.content

    user_set_timezone(user=user, timezone_name="Europe/Lisbon")
    again = app.get(_path(secret), HTTP_IF_NONE_MATCH=first["ETag"])

    assert again.status_code == 200 and again["ETag"] != first["ETag"] and b"TZID=Europe/Lisbon" in again.content
