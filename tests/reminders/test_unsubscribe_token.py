"""The digest's unsubscribe link (issue 32 point 7): it shows nothing of the person (no id, no address, in
clear or in base64), it stops working once the digest is turned on again (a 410 page saying so, with the way
to Settings), and it is single-purpose: a calendar secret, or a value the site signed for anything else, is
not taken for it."""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, date, datetime
from urllib.parse import urlencode

import pytest
from django.core import mail, signing
from django.test import Client

from accounts.models import User
from reminders.calendar import calendar_feed_create
from reminders.digest import UNSUBSCRIBE_SALT, digest_enabled, digest_send_due, digest_set, unsubscribe_link_make
from reminders.models import DigestSubscription
from tasks.services import task_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

TOKYO_MORNING = datetime(2026, 12, 1, 22, 30, tzinfo=UTC)  # 07:30 on 2 December in Tokyo
NEXT_TOKYO_MORNING = datetime(2026, 12, 2, 22, 30, tzinfo=UTC)


@pytest.fixture
def person(db: None) -> User:
    """Subscribed, with an id and an address that no random text holds by chance."""
    user = UserFactory(pk=73_915_804, email="quentin.zephyr@example.com", timezone="Asia/Tokyo")
    digest_set(user=user, enabled=True)
    task_create(user=user, title="Renew the lease", due_date=date(2026, 12, 2))
    return user


def _link_of_the_digest(user: User, now: datetime) -> str:
    """The unsubscribe path of the digest the person gets at `now`, as the email's header carries it."""
    mail.outbox.clear()
    digest_send_due(now=now)
    [message] = [m for m in mail.outbox if m.to == [user.email]]
    link = message.extra_headers["List-Unsubscribe"][1:-1]
    return link[link.index("/digest/") :]


def _token(path: str) -> str:
    return path.split("token=", 1)[1]


def _one_click(path: str) -> int:
    """A mail client's "Unsubscribe" button (RFC 8058): a POST to the link, no session, no CSRF token."""
    answer = Client(enforce_csrf_checks=True).post(
        path, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    return answer.status_code


def _decoded(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return b""


def test_the_unsubscribe_link_shows_no_id_or_address_in_clear_or_in_base64(person: User) -> None:
    token = _token(_link_of_the_digest(person, TOKYO_MORNING))

    parts = [token, *re.split(r"[:.]", token)]
    readable = [token.encode(), *(_decoded(part) for part in parts)]
    for text in readable:
        assert str(person.pk).encode() not in text
        assert person.email.encode() not in text and b"quentin" not in text.lower()
        assert b'"u"' not in text  # no signed object of Django's signing.dumps, whose payload is readable


def test_the_link_of_an_email_stops_working_once_the_digest_is_turned_on_again(person: User) -> None:
    old = _link_of_the_digest(person, TOKYO_MORNING)
    assert _one_click(old) == 200
    assert not digest_enabled(user=person)
    settings_page = Client()
    settings_page.force_login(person)
    assert settings_page.post("/settings/digest", {"digest_enabled": "on"}).status_code == 302  # re-subscribed

    page = Client().get(old)
    assert page.status_code == 410 and b'id="link-replaced"' in page.content
    assert b'href="/settings/"' in page.content
    assert _one_click(old) == 410
    assert digest_enabled(user=person)  # the old link changed nothing

    newest = _link_of_the_digest(person, NEXT_TOKYO_MORNING)
    assert _token(newest) != _token(old)
    assert _one_click(newest) == 200
    assert not digest_enabled(user=person)


def test_saving_settings_with_the_digest_on_already_keeps_the_links_of_recent_emails(person: User) -> None:
    link = _link_of_the_digest(person, TOKYO_MORNING)
    settings_page = Client()
    settings_page.force_login(person)
    settings_page.post("/settings/digest", {"digest_enabled": "on"})  # on, and on again

    assert _one_click(link) == 200
    assert not digest_enabled(user=person)


def test_a_calendar_secret_or_a_value_signed_for_another_purpose_is_no_unsubscribe_token(person: User) -> None:
    key = DigestSubscription.objects.get(user=person).unsubscribe_key
    _, calendar_secret = calendar_feed_create(user=person)
    others = {
        "a calendar secret": calendar_secret,
        "the row's key unsigned": key,
        "the key signed with the site's default salt": signing.Signer().sign(key),
        "the key signed with a timestamp for another purpose": signing.TimestampSigner(
            salt="accounts.throttle.device"
        ).sign(key),
        "a signed object of another purpose": signing.dumps({"u": person.pk}, salt="accounts.verification"),
        "a signed object with the default salt": signing.dumps({"u": person.pk}),
    }
    for what, token in others.items():
        answer = Client().post("/digest/unsubscribe?" + urlencode({"token": token}))
        assert answer.status_code == 400 and b'id="link-invalid"' in answer.content, what
    assert digest_enabled(user=person)


def test_a_link_of_an_email_sent_before_the_change_is_refused_with_a_clear_page(person: User) -> None:
    """Links made before issue 32 signed the person's id ({"u": id}); they are refused, saying why."""
    before = signing.dumps({"u": person.pk}, salt=UNSUBSCRIBE_SALT)

    page = Client().post(f"/digest/unsubscribe?token={before}")

    assert page.status_code == 410 and b'id="link-replaced"' in page.content and b'href="/settings/"' in page.content
    assert digest_enabled(user=person)


def test_a_link_turns_off_the_digest_of_its_own_person_only(person: User) -> None:
    other = UserFactory(timezone="Asia/Tokyo")
    digest_set(user=other, enabled=True)

    assert _one_click(f"/digest/unsubscribe?token={_token(unsubscribe_link_make(user=other))}") == 200

    assert digest_enabled(user=person) and not digest_enabled(user=other)
