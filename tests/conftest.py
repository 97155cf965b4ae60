"""Shared fixtures: the sandbox server (one per test session) and a reset control client per test."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.conf import settings

from accounts.models import User
from accounts.services import consent_grant
from extraction.models import ExtractionRun
from extraction.pipeline import extraction_run_execute
from integrations.models import Integration, SyncCursor
from integrations.providers.gmail import gmail_credentials
from integrations.providers.imap import ImapAccount
from integrations.services import gmail_connect
from sandbox.client import SandboxClient
from sandbox.dovecot import Dovecot, dovecot_missing
from sandbox.server import SandboxServer
from tests.databases import end_other_sessions, template_database
from tests.factories import UserFactory
from tests.timing import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401 (the run's timing)

# Which tests are slow, and the guard that keeps it so. A plugin, not hooks imported here: a conftest's hooks are
# not called for the setup of session fixtures (their node is the session, above tests/), and the guard must see
# those to leave them out of its rule.
pytest_plugins = ["tests.slow"]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """The test database (one per pytest-xdist worker) is a copy of the migrated template (tests/databases.py);
    Django's `migrate` on it then has nothing left to do."""
    settings.DATABASES["default"]["TEST"]["TEMPLATE"] = template_database()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database, which it drops at the end: only once no thread of a test is still
    connected to it (else PostgreSQL refuses, and the database is left behind on the server)."""
    yield
    from django.db import connections

    name = connections["default"].settings_dict["NAME"]
    connections.close_all()
    end_other_sessions(name)


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[SandboxServer]:
    """The sandbox on settings.SANDBOX_URL, and over TLS on settings.SANDBOX_TLS_URL (Microsoft, Graph) with
    its generated certificate written to settings.MICROSOFT_CA_BUNDLE, the file the app trusts; its DNS on
    settings.INBOUND_DNS_SERVER."""
    url = urlsplit(settings.SANDBOX_URL)
    tls_url = urlsplit(settings.SANDBOX_TLS_URL)
    server = SandboxServer(
        url.hostname or "127.0.0.1",
        url.port or 0,
        tls_port=tls_url.port or 0,
        cert_path=settings.MICROSOFT_CA_BUNDLE,
    ).start()
    # Tasklift's inbound mail checks (DKIM, SPF, DMARC) resolve through the sandbox's DNS, on UDP at its port.
    settings.INBOUND_DNS_SERVER = f"127.0.0.1:{server.port}"
    yield server
    server.stop()
    Path(settings.MICROSOFT_CA_BUNDLE).unlink(missing_ok=True)  # a file of this test run only


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    """A real IMAP server (Debian's Dovecot, sandbox/dovecot.py) for this test run, its certificate written
    where settings.IMAP_CA_BUNDLE says. Each test that uses it makes users of its own."""
    missing = dovecot_missing()
    if missing:
        pytest.skip(missing)
    server = Dovecot(ca_path=Path(settings.IMAP_CA_BUNDLE)).start()
    yield server
    server.stop()
    Path(settings.IMAP_CA_BUNDLE).unlink(missing_ok=True)


@pytest.fixture
def sandbox(sandbox_server: SandboxServer) -> Iterator[SandboxClient]:
    """The sandbox, reset to empty before the test."""
    client = SandboxClient(sandbox_server.url)
    client.reset()
    yield client


@pytest.fixture(autouse=True)
def _clean_redis() -> Iterator[None]:
    """Each test starts with no cache entries of this test run (rate-limit counters) and an empty Celery
    queue. Only this run's keys are removed, so a test run beside another one does not disturb it."""
    import redis

    connection = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(connection.scan_iter(match=f"{settings.CACHES['default']['KEY_PREFIX']}:*", count=1000))
    if keys:
        connection.delete(*keys)
    connection.delete(settings.CELERY_TASK_DEFAULT_QUEUE)
    yield


@pytest.fixture
def broker_queue() -> Callable[[], int]:
    """How many jobs wait in the Celery queue of the test Redis database."""
    import redis

    connection = redis.Redis.from_url(settings.REDIS_URL)

    def length() -> int:
        return int(connection.llen(settings.CELERY_TASK_DEFAULT_QUEUE))

    return length


@pytest.fixture
def redis_pushes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """For each round trip from this process to Redis that pushed onto a list (a job sent to a queue): how
    many pushes it carried. [250] is 250 jobs in one round trip; [1] * 250, one round trip per job.

    Counted where redis-py sends commands to the server, one send per round trip (a pipeline is one send),
    by wrapping that method; what it sends is unchanged.
    """
    import redis.connection

    pushes: list[int] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: redis.connection.AbstractConnection, command: Any, check_health: bool = True) -> None:
        parts = [command] if isinstance(command, (bytes, str)) else command
        packed = b"".join(p.encode() if isinstance(p, str) else bytes(p) for p in parts)
        if count := packed.count(b"$5\r\nLPUSH\r\n"):  # a command's name, as RESP sends it
            pushes.append(count)
        send(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    return pushes


@pytest.fixture
def user(db: None) -> User:
    return UserFactory()


@pytest.fixture
def consenting_user(user: User) -> User:
    consent_grant(user=user)
    return user


class MailboxCursors:
    """The connected mailbox's two cursors, as the database holds them (a box of the tests below)."""

    integration: Integration

    @property
    def cursor(self) -> str:
        return SyncCursor.objects.get(integration=self.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION).value

    @property
    def sent_cursor(self) -> str | None:
        """The Sent mail cursor's value (None when the mailbox has none)."""
        cursor = SyncCursor.objects.filter(integration=self.integration, purpose=SyncCursor.Purpose.SENT_MAIL).first()
        return cursor.value if cursor else None


@dataclass
class GmailBox(MailboxCursors):
    """A sandbox Gmail mailbox connected to a Tasklift user."""

    sandbox: SandboxClient
    address: str
    integration: Integration

    def deliver(self, raw: str, *, at: datetime | None = None) -> str:
        """The message's id; `at` its internalDate (default now)."""
        return str(self.sandbox.deliver(self.address, raw, internal_date=at)["id"])

    def history_id(self) -> str:
        return str(self.sandbox.call("GET", "/gmail/messages", params={"address": self.address})["historyId"])


def connect_gmail(sandbox: SandboxClient, user: User, address: str) -> GmailBox:
    sandbox.create_mailbox(address)
    tokens = sandbox.issue_token(address)
    credentials = gmail_credentials(
        access_token=tokens["access_token"],
        refresh_token=tokens["refresh_token"],
        expiry=datetime.fromisoformat(tokens["expiry"]),
    )
    integration = gmail_connect(user=user, credentials=credentials)
    return GmailBox(sandbox=sandbox, address=address, integration=integration)


@pytest.fixture
def gmail(sandbox: SandboxClient, consenting_user: User) -> GmailBox:
    """An empty Gmail mailbox of a consenting user, connected; the sandbox request log starts empty."""
    box = connect_gmail(sandbox, consenting_user, "person@example.com")
    sandbox.clear_requests()
    return box


def run_extraction(user: User) -> ExtractionRun:
    """One run, synchronously, through the same code the Celery job calls."""
    run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)
    return extraction_run_execute(run=run)


def approve_consent_page(http: requests.Session, authorize_url: str, address: str, decision: str) -> dict[str, str]:
    """Drive a sandbox consent page (Google's or Microsoft's) like a person; returns the query of the
    redirect back to Tasklift."""
    page = http.get(authorize_url, timeout=10)
    assert page.status_code == 200, page.text
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.text)[1])  # type: ignore[index]
    fields = {
        html.unescape(name): html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
    }
    fields.update(address=address, decision=decision)
    base = "{0.scheme}://{0.netloc}".format(urlsplit(authorize_url))
    answer = http.post(base + action, data=fields, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    return {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["Location"]).query).items()}


@dataclass
class ImapBox(MailboxCursors):
    """A Dovecot mailbox connected to a Tasklift user over IMAP."""

    dovecot: Dovecot
    address: str
    password: str
    integration: Integration

    def deliver(self, raw: str | bytes, *, at: datetime | None = None, folder: str = "INBOX") -> str:
        """Put the message in `folder` (APPEND); its id as Tasklift keys it (its Message-ID)."""
        self.dovecot.deliver(self.address, raw, folder=folder, at=at)
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        found = re.search(r"^Message-ID:\s*<?([^>\r\n]+)>?", text, re.IGNORECASE | re.MULTILINE)
        assert found, "test mail for IMAP carries a Message-ID"
        return found[1].strip()

    def account(self, **changes: Any) -> ImapAccount:
        fields = {"host": "127.0.0.1", "port": self.dovecot.tls_port, "security": "tls", "username": self.address}
        return ImapAccount(**{**fields, "password": self.password, **changes})


def connect_imap(dovecot: Dovecot, user: User, address: str | None = None) -> ImapBox:
    """A new Dovecot user (a unique address unless given), connected as the connect form does."""
    from integrations.services import imap_connect

    address = address or f"person-{uuid.uuid4().hex[:10]}@imap.example.org"
    password = f"app-password-{uuid.uuid4().hex[:8]}"
    dovecot.add_user(address, password)
    box = ImapBox(dovecot=dovecot, address=address, password=password, integration=None)  # type: ignore[arg-type]
    box.integration = imap_connect(user=user, account=box.account(), address=address)
    return box


@pytest.fixture
def imap(dovecot: Dovecot, sandbox: SandboxClient, consenting_user: User) -> ImapBox:
    """An empty Dovecot mailbox of a consenting user, connected over IMAP (TLS, verified); Gemini is the
    sandbox's, as always."""
    return connect_imap(dovecot, consenting_user)


@dataclass
class OutlookBox(MailboxCursors):
    """A sandbox Outlook mailbox connected to a Tasklift user."""

    sandbox: SandboxClient
    address: str
    integration: Integration

    def deliver(self, raw: str, *, at: datetime | None = None) -> str:
        """The message's id; `at` its receivedDateTime (default now)."""
        return str(self.sandbox.deliver_outlook(self.address, raw, received_at=at)["id"])


def connect_outlook(sandbox: SandboxClient, user: User, address: str) -> OutlookBox:
    """Connect through the real MSAL auth-code flow and the sandbox's Microsoft consent page."""
    from django.contrib.sessions.backends.db import SessionStore

    from integrations.oauth.microsoft import MicrosoftOAuthFlow
    from integrations.providers.outlook import graph_session
    from integrations.services import outlook_connect

    sandbox.create_outlook_mailbox(address)
    flow = MicrosoftOAuthFlow(SessionStore())
    params = approve_consent_page(graph_session(), flow.get_authorization_url(), address, "accept")
    msal_cache, home_account_id, access_token = flow.get_token_cache(params=params)
    integration = outlook_connect(
        user=user, msal_cache=msal_cache, home_account_id=home_account_id, access_token=access_token
    )
    return OutlookBox(sandbox=sandbox, address=address, integration=integration)


@pytest.fixture
def outlook(sandbox: SandboxClient, consenting_user: User) -> OutlookBox:
    """An empty Outlook mailbox of a consenting user, connected and read once (so its cursor is a delta
    link); the sandbox request log starts empty."""
    box = connect_outlook(sandbox, consenting_user, "person@outlook.example.com")
    first = run_extraction(consenting_user)
    assert first.status == ExtractionRun.Status.SUCCEEDED, first.error_message
    box.integration.refresh_from_db()
    sandbox.clear_requests()
    return box
