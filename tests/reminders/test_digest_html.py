"""The morning digest as a mail worth opening (issue 34): HTML beside its text, each task with its sender, its
due date and time, and a link that opens it; the waiting items past their date apart. Inline styles only (mail
clients drop style sheets), and the link works: signed in it shows the task, signed out it asks for a login
first."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from email import message_from_bytes, policy
from email.message import EmailMessage as ParsedMessage
from html.parser import HTMLParser

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client

from accounts.models import User
from reminders.digest import digest_send_due, digest_set
from tasks.models import Task
from tasks.services import task_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BERLIN_MORNING = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)  # 07:30 on 2 December in Berlin
TODAY = date(2026, 12, 2)


class _Read(HTMLParser):
    """The links (href and text), tags and attributes of an HTML part, as a mail client reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        if tag == "a":
            self._href, self._text = dict(attrs).get("href") or "", []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links[" ".join("".join(self._text).split())] = self._href
            self._href = None


def _parts(message: mail.EmailMessage) -> tuple[str, str]:
    parsed = message_from_bytes(message.message().as_bytes(), policy=policy.default)
    assert isinstance(parsed, ParsedMessage)
    assert parsed.get_content_type() == "multipart/alternative"
    text, html = (part for part in parsed.iter_parts())
    assert (text.get_content_type(), html.get_content_type()) == ("text/plain", "text/html")
    return str(text.get_content()), str(html.get_content())


@pytest.fixture
def berlin(client: Client) -> tuple[User, dict[str, Task]]:
    person = UserFactory(timezone="Europe/Berlin")
    digest_set(user=person, enabled=True)
    tasks = {
        "call": task_create(user=person, title="Call Bob about the offsite", due_date=TODAY, due_time=time(15, 0)),
        "invoice": task_create(user=person, title="Pay the <b>invoice</b>", due_date=date(2026, 11, 28)),
        "deck": task_create(user=person, title="Answer on the deck", due_date=date(2026, 12, 1)),
    }
    Task.objects.filter(pk=tasks["call"].pk).update(
        email_sender="Ann Lee <ann@example.com>", email_subject="Offsite planning"
    )
    Task.objects.filter(pk=tasks["deck"].pk).update(kind=Task.Kind.WAITING, waiting_on="Raj <raj@example.com>")
    return person, tasks


def test_digest_html_links_each_task_with_its_sender_date_and_time(berlin: tuple[User, dict[str, Task]]) -> None:
    person, tasks = berlin
    digest_send_due(now=BERLIN_MORNING)
    [message] = [m for m in mail.outbox if m.to == [person.email]]
    text, html = _parts(message)

    read = _Read()
    read.feed(html)
    site = settings.SITE_URL
    assert read.links["Call Bob about the offsite"] == f"{site}/tasks/{tasks['call'].pk}"
    assert read.links["Pay the <b>invoice</b>"] == f"{site}/tasks/{tasks['invoice'].pk}"  # a title is text
    assert read.links["Answer on the deck"] == f"{site}/tasks/{tasks['deck'].pk}"
    assert "Ann Lee" in html and "15:00" in html and "Offsite planning" in html
    assert "<b>invoice</b>" not in html  # escaped, never markup
    # The waiting item past its date stands apart, after the person's own.
    assert html.index("Still waiting") > html.index("Call Bob about the offsite")
    assert html.index("Answer on the deck") > html.index("Still waiting") and "Raj" in html
    # Inline styles only: no style sheet, no class a mail client would not know, no script.
    assert not read.tags & {"style", "link", "script"} and "class" not in read.attributes
    assert "style" in read.attributes
    assert "Unsubscribe" in read.links or any("unsubscribe" in href for href in read.links.values())

    # The text part says the same, with the same links.
    assert f"{site}/tasks/{tasks['call'].pk}" in text and "15:00" in text and "Ann Lee" in text


def test_digest_html_link_opens_the_task_signed_in_and_asks_for_a_login_first_signed_out(
    client: Client, berlin: tuple[User, dict[str, Task]]
) -> None:
    person, tasks = berlin
    path = f"/tasks/{tasks['call'].pk}"
    signed_out = Client().get(path)
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/login/?next=")
    client.force_login(person)
    page = client.get(path)
    assert page.status_code == 200
    body = page.content.decode()
    assert "<html" in body and "Call Bob about the offsite" in body and f'id="task-{tasks["call"].pk}"' in body
    other = UserFactory()
    client.force_login(other)
    missing = client.get(path)  # someone else's task: not found, said on a page
    assert missing.status_code == 404 and "<html" in missing.content.decode()
