"""Revoking a calendar link in Settings always answers in words (issue 31 point 8): the link revoked, or, for
an id that is unknown, another person's or revoked already, a message that nothing was changed (never
silence, never a 500), with every live link, the person's and anyone else's, still live."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from reminders.calendar import calendar_feed_create
from reminders.models import CalendarFeed
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

REVOKED = "The calendar link is revoked: calendars subscribed to it get nothing more."
NOT_THERE = "That calendar link is not there any more (revoked already, or not one of yours): nothing was changed."


def revoke(client: Client, feed_id: int | str) -> str:
    """Press Revoke as the settings page does; the words of the settings page it comes back to."""
    response = client.post(f"/settings/calendar/{feed_id}/revoke")
    assert response.status_code == 302 and response["Location"] == "/settings/", response
    page = client.get(response["Location"])
    assert page.status_code == 200
    return " ".join(page.content.decode().split())


@pytest.fixture
def person(client: Client, user: User) -> User:
    client.force_login(user)
    return user


def live(feed: CalendarFeed) -> bool:
    feed.refresh_from_db()
    return feed.revoked_at is None


def test_revoking_my_link_says_it_is_revoked(client: Client, person: User) -> None:
    feed, _ = calendar_feed_create(user=person)

    said = revoke(client, feed.pk)

    assert REVOKED in said and NOT_THERE not in said
    assert not live(feed)


def test_revoking_an_unknown_link_says_nothing_was_changed(client: Client, person: User) -> None:
    mine, _ = calendar_feed_create(user=person)

    said = revoke(client, 987654321)

    assert NOT_THERE in said and REVOKED not in said
    assert live(mine)


def test_revoking_another_persons_link_says_nothing_was_changed_and_leaves_it_live(
    client: Client, person: User
) -> None:
    theirs, _ = calendar_feed_create(user=UserFactory())

    said = revoke(client, theirs.pk)

    assert NOT_THERE in said and REVOKED not in said
    assert theirs.prefix not in said  # nothing of their link is shown
    assert live(theirs)


def test_revoking_a_link_twice_says_the_second_time_that_nothing_was_changed(client: Client, person: User) -> None:
    feed, _ = calendar_feed_create(user=person)
    assert REVOKED in revoke(client, feed.pk)
    revoked_at = CalendarFeed.objects.get(pk=feed.pk).revoked_at

    said = revoke(client, feed.pk)

    assert NOT_THERE in said and REVOKED not in said
    assert CalendarFeed.objects.get(pk=feed.pk).revoked_at == revoked_at  # the first revocation stands


def test_revoking_an_id_past_any_id_says_nothing_was_changed(client: Client, person: User) -> None:
    said = revoke(client, "9" * 30)  # more than a bigint holds

    assert NOT_THERE in said


def test_a_revoked_link_said_so_stays_out_of_the_list(client: Client, person: User) -> None:
    feed, _ = calendar_feed_create(user=person)
    CalendarFeed.objects.filter(pk=feed.pk).update(revoked_at=timezone.now())

    said = revoke(client, feed.pk)

    assert NOT_THERE in said
    assert f'data-feed-id="{feed.pk}"' not in said
