"""An IMAP server that fails (the issue's "Faults"): the connection dropped mid-FETCH, a message the server never
gives, a server at its connection limit or throttling, a server too slow to answer, the Sent folder renamed or
deleted. Whatever happens, no mail is lost, none is read twice, and no cursor is ever ahead of handled mail.

The faults come from tests/imapproxy.py, a proxy in front of the test's Dovecot that the mailbox's stored
credentials point at; folders are renamed and deleted by the test's own mail client on Dovecot itself."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from imapclient import IMAPClient

from accounts.models import User
from config.crypto import encrypt_json
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import Integration, SyncCursor
from integrations.providers.imap import READ_COMMANDS, imap_tls_context
from integrations.services import integration_credentials
from sandbox.dovecot import Dovecot
from tasks.models import Task
from tests.conftest import ImapBox, run_extraction
from tests.imapproxy import ImapProxy
from tests.integrations.test_imap_provider import command_names
from tests.mail import ask, rfc822
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

BODY_FETCH = r"^UID FETCH \S+ \(BODY\.PEEK\[\]"  # a read of messages, not the listing's ENVELOPE fetch
SENT = SyncCursor.Purpose.SENT_MAIL
INBOX = SyncCursor.Purpose.TASK_EXTRACTION


@pytest.fixture
def proxy(dovecot: Dovecot, imap: ImapBox) -> Iterator[ImapProxy]:
    """A proxy in front of Dovecot, the mailbox of `imap` reached through it from now on."""
    proxy = ImapProxy.in_front_of(dovecot)
    integration = imap.integration
    credentials = {**integration_credentials(integration=integration), "port": proxy.port}
    integration.credentials_encrypted = encrypt_json(credentials)
    integration.save(update_fields=["credentials_encrypted", "updated_at"])
    yield proxy
    proxy.close()


def position(box: ImapBox, folder: str = "INBOX") -> str:
    """The folder's UIDVALIDITY and UIDNEXT now, as its cursor begins once every message of it is handled."""
    with box.dovecot.client(box.address) as client:
        status = client.folder_status(folder, ["UIDVALIDITY", "UIDNEXT"])
    return f"{status[b'UIDVALIDITY']}:{status[b'UIDNEXT']}:"


def uid_of(box: ImapBox, message_id: str, folder: str = "INBOX") -> int:
    with box.dovecot.client(box.address) as client:
        client.select_folder(folder, readonly=True)
        (uid,) = client.search(["HEADER", "Message-ID", message_id])
    return int(uid)


def ledger(purpose: str = INBOX) -> list[str]:
    return list(ProcessedEmail.objects.filter(purpose=purpose).values_list("message_id", flat=True))


def task_ids(box: ImapBox) -> list[str]:
    return list(Task.objects.filter(integration=box.integration).values_list("source_id", flat=True))


def positioned(user: User) -> None:
    """A first run: both cursors at a position (the Inbox's connect-time mark gone, Sent mail's first read made)."""
    first = run_extraction(user)
    assert first.status == ExtractionRun.Status.SUCCEEDED, first.error_message
    assert first.error_code == "", first.error_message


def refreshed(integration: Integration) -> Integration:
    integration.refresh_from_db()
    return integration


def sent_mail(box: ImapBox, subject: str) -> str:
    return rfc822(subject, f"I'll take care of {subject.lower()} myself.", sender=box.address)


# The connection dropped mid-FETCH ------------------------------------------------------------------------------


@pytest.mark.parametrize("skip", [0, 1], ids=["first-read", "second-read"])
def test_a_connection_dropped_mid_fetch_loses_nothing_and_reads_nothing_twice(
    skip: int, imap: ImapBox, proxy: ImapProxy, consenting_user: User
) -> None:
    positioned(consenting_user)
    ids = [imap.deliver(ask(n)) for n in range(30)]  # two reads of the run (20 + 10)
    before = imap.cursor
    cut = proxy.drop(BODY_FETCH, skip=skip)

    dropped = run_extraction(consenting_user)

    assert cut.applied == 1
    handled = ledger()
    assert dropped.status != ExtractionRun.Status.RUNNING
    if set(handled) != set(ids):  # the run did not get everything again by itself: it said so, and waits
        assert imap.cursor == before  # never ahead of handled mail
        report = dropped.mailboxes[str(imap.integration.pk)]
        assert report["status"] == "failed", report
        assert report["error_code"] == "provider_unavailable"
        assert "dropped the connection" in report["error"]
    assert sorted(task_ids(imap)) == sorted(handled)  # each email handled has its task, and no more
    assert refreshed(imap.integration).status == Integration.Status.ACTIVE  # nothing for the person to do

    again = run_extraction(consenting_user)

    assert again.status == ExtractionRun.Status.SUCCEEDED, again.error_message
    assert again.error_code == "", again.error_message
    assert sorted(ledger()) == sorted(ids)  # every email once
    assert sorted(task_ids(imap)) == sorted(ids)  # no task twice
    assert imap.cursor.startswith(position(imap))


# A message the server never gives ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "NO [SERVERBUG] Internal error occurred. Refer to server log for more information.",
        "BAD Error in IMAP command UID FETCH: Invalid messageset",
    ],
    ids=["NO", "BAD"],
)
def test_a_message_the_server_never_gives_is_set_aside_after_bounded_tries_and_the_rest_proceeds(
    reply: str, imap: ImapBox, proxy: ImapProxy, consenting_user: User, settings
) -> None:
    positioned(consenting_user)
    ids = [imap.deliver(ask(n)) for n in range(5)]
    broken = ids[2]
    broken_uid = uid_of(imap, broken)
    refused = proxy.answer(BODY_FETCH, reply, uid=broken_uid)
    before = imap.cursor

    first = run_extraction(consenting_user)

    assert first.status == ExtractionRun.Status.SUCCEEDED, first.error_message
    assert first.error_code == "partial"
    assert "could not be read" in first.error_message
    assert first.mailboxes[str(imap.integration.pk)]["unread"] == 1
    assert sorted(task_ids(imap)) == sorted(set(ids) - {broken})  # the rest of the mail proceeds
    assert imap.cursor == before  # the broken one is not handled yet: the cursor waits for it

    for _ in range(settings.EXTRACTION_FETCH_ATTEMPTS - 1):
        last = run_extraction(consenting_user)

    assert last.emails_quarantined == 1
    entry = ProcessedEmail.objects.get(message_id=broken)
    assert entry.outcome == ProcessedEmail.Outcome.QUARANTINED
    assert entry.last_error.startswith("fetch_provider_unavailable")
    assert imap.cursor.startswith(position(imap))  # set aside where a person sees it: the cursor moves
    assert sorted(task_ids(imap)) == sorted(set(ids) - {broken})  # none twice
    tries = refused.applied
    assert tries <= 2 * settings.EXTRACTION_FETCH_ATTEMPTS  # a read in its chunk, then alone, per run

    later = run_extraction(consenting_user)

    assert later.status == ExtractionRun.Status.SUCCEEDED and later.error_code == ""
    assert refused.applied == tries  # set aside: never asked for again
    assert refreshed(imap.integration).status == Integration.Status.ACTIVE


# A server that limits connections, or throttles -------------------------------------------------------------------


def through(proxy: ImapProxy, box: ImapBox) -> IMAPClient:
    """A signed-in connection through the proxy: the person's phone, say."""
    client = IMAPClient("127.0.0.1", port=proxy.port, ssl=True, ssl_context=imap_tls_context())
    client.login(box.address, box.password)
    return client


def test_a_server_at_its_connection_limit_makes_the_mailbox_wait_and_loses_no_mail(
    imap: ImapBox, proxy: ImapProxy, consenting_user: User
) -> None:
    positioned(consenting_user)
    ids = [imap.deliver(ask(n)) for n in range(3)]
    before = imap.cursor
    proxy.limit_connections(1)  # as Dovecot's mail_max_userip_connections: the sign-in answered NO [LIMIT]
    phone = through(proxy, imap)  # the person's other mail client holds the one connection allowed

    refused = run_extraction(consenting_user)

    integration = refreshed(imap.integration)
    assert integration.status == Integration.Status.ACTIVE  # not a wrong password: nothing to reconnect
    assert integration.last_error_code == "provider_rate_limited"
    assert integration.retry_after is not None and integration.retry_after > timezone.now()  # the mailbox waits
    assert refused.mailboxes[str(integration.pk)]["error_code"] == "provider_rate_limited"
    assert imap.cursor == before and ledger() == []
    connections = proxy.connections

    waiting = run_extraction(consenting_user)  # at once: the mailbox is still waiting

    assert proxy.connections == connections  # no sign-in tried before its time
    assert waiting.mailboxes[str(integration.pk)]["error_code"] == "provider_rate_limited"
    assert imap.cursor == before

    phone.logout()
    Integration.objects.filter(pk=integration.pk).update(retry_after=timezone.now() - timedelta(seconds=1))
    proxy.limit_connections(None)
    done = run_extraction(consenting_user)

    assert done.status == ExtractionRun.Status.SUCCEEDED and done.error_code == "", done.error_message
    assert sorted(task_ids(imap)) == sorted(ids)
    assert imap.cursor.startswith(position(imap))
    assert refreshed(imap.integration).retry_after is None


def test_a_server_throttling_reads_makes_the_mailbox_wait_and_loses_no_mail(
    imap: ImapBox, proxy: ImapProxy, consenting_user: User
) -> None:
    positioned(consenting_user)
    ids = [imap.deliver(ask(n)) for n in range(3)]
    before = imap.cursor
    throttle = proxy.answer(BODY_FETCH, "NO [LIMIT] Too many requests in a short time; try again later.")

    throttled = run_extraction(consenting_user)

    integration = refreshed(imap.integration)
    assert throttled.mailboxes[str(integration.pk)]["error_code"] == "provider_rate_limited"
    assert integration.status == Integration.Status.ACTIVE
    assert integration.retry_after is not None and integration.retry_after > timezone.now()
    assert imap.cursor == before and ledger() == [] and task_ids(imap) == []
    asked = throttle.applied

    run_extraction(consenting_user)  # at once: the mailbox waits, nothing asked of the server

    assert throttle.applied == asked
    assert imap.cursor == before

    proxy.clear()
    Integration.objects.filter(pk=integration.pk).update(retry_after=timezone.now() - timedelta(seconds=1))
    done = run_extraction(consenting_user)

    assert done.status == ExtractionRun.Status.SUCCEEDED and done.error_code == "", done.error_message
    assert sorted(task_ids(imap)) == sorted(ids)
    assert imap.cursor.startswith(position(imap))
    assert refreshed(imap.integration).retry_after is None


# A slow server -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("slow", [r"^UID SEARCH", BODY_FETCH], ids=["listing", "reading"])
def test_a_server_too_slow_to_answer_fails_the_mailbox_with_a_clear_error_and_loses_nothing(
    slow: str, imap: ImapBox, proxy: ImapProxy, consenting_user: User, settings
) -> None:
    positioned(consenting_user)
    ids = [imap.deliver(ask(n)) for n in range(3)]
    before = imap.cursor
    settings.IMAP_TIMEOUT_SECONDS = 1
    late = proxy.delay(slow, seconds=3 * settings.IMAP_TIMEOUT_SECONDS)

    timed_out = run_extraction(consenting_user)

    assert late.applied >= 1
    report = timed_out.mailboxes[str(imap.integration.pk)]
    assert report["status"] == "failed", report
    assert report["error_code"] == "provider_unavailable"
    assert report["error"] == "127.0.0.1 did not answer in time."
    assert timed_out.status in (ExtractionRun.Status.FAILED, ExtractionRun.Status.SUCCEEDED)
    assert timed_out.error_code in ("provider_unavailable", "partial")
    assert "did not answer in time" in timed_out.error_message
    assert imap.cursor == before and ledger() == [] and task_ids(imap) == []
    assert refreshed(imap.integration).status == Integration.Status.ACTIVE

    proxy.clear()
    done = run_extraction(consenting_user)

    assert done.status == ExtractionRun.Status.SUCCEEDED and done.error_code == "", done.error_message
    assert sorted(task_ids(imap)) == sorted(ids)
    assert imap.cursor.startswith(position(imap))


@pytest.mark.parametrize("fault", ["timed-out", "sign-in-refused"])
def test_a_connection_given_up_on_is_closed_not_left_holding_a_server_slot(
    fault: str, imap: ImapBox, proxy: ImapProxy, consenting_user: User, settings
) -> None:
    positioned(consenting_user)
    imap.deliver(ask(1))
    if fault == "timed-out":
        settings.IMAP_TIMEOUT_SECONDS = 1
        proxy.delay(BODY_FETCH, seconds=3 * settings.IMAP_TIMEOUT_SECONDS)
    else:
        proxy.answer(r"^LOGIN ", "NO [AUTHENTICATIONFAILED] Authentication failed.")

    failed = run_extraction(consenting_user)

    assert failed.mailboxes[str(imap.integration.pk)]["status"] == "failed"
    wait_for(  # a server counts an abandoned connection against its limit until it times out itself
        lambda: proxy.open_connections() == 0,
        timeout=5,
        what=f"every connection of the run closed, the one given up on ({fault}) included",
    )


# The Sent folder renamed or deleted ----------------------------------------------------------------------------


def test_a_renamed_sent_folder_is_followed_to_the_folder_now_marked_sent_and_nothing_is_read_twice(
    imap: ImapBox, consenting_user: User
) -> None:
    positioned(consenting_user)
    earlier = imap.deliver(sent_mail(imap, "The budget"), folder="Sent")
    assert run_extraction(consenting_user).error_code == ""
    assert ledger(SENT) == [earlier]
    with imap.dovecot.client(imap.address) as client:  # the person renames it (Dovecot makes a new Sent)
        client.rename_folder("Sent", "Sent 2025")
    later = imap.deliver(sent_mail(imap, "The offsite"), folder="Sent")
    received = imap.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.error_code == "", run.error_message
    assert sorted(ledger(SENT)) == sorted([earlier, later])  # the new Sent's mail read; the old, not twice
    assert ledger(INBOX) == [received] and received in task_ids(imap)  # the Inbox read as ever
    assert imap.sent_cursor is not None and imap.sent_cursor.startswith("sent:" + position(imap, "Sent"))
    assert imap.cursor.startswith(position(imap))


def test_a_deleted_sent_folder_leaves_the_inbox_read(imap: ImapBox, consenting_user: User) -> None:
    positioned(consenting_user)
    earlier = imap.deliver(sent_mail(imap, "The budget"), folder="Sent")
    assert run_extraction(consenting_user).error_code == ""
    with imap.dovecot.client(imap.address) as client:
        client.delete_folder("Sent")
    received = imap.deliver(ask(1))

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert run.error_code == "", run.error_message
    assert ledger(INBOX) == [received] and received in task_ids(imap)
    assert run.mailboxes[f"{imap.integration.pk}:sent"]["status"] == "ok"
    assert imap.cursor.startswith(position(imap))

    later = imap.deliver(sent_mail(imap, "The offsite"), folder="Sent")  # sent mail goes on in a new Sent
    assert run_extraction(consenting_user).error_code == ""
    assert sorted(ledger(SENT)) == sorted([earlier, later])


def test_a_run_through_the_proxy_reads_as_from_dovecot_and_sends_only_read_commands(
    imap: ImapBox, proxy: ImapProxy, consenting_user: User
) -> None:
    """The harness itself: relayed both ways intact, and it sees the sign-in Dovecot's own log leaves out."""
    ids = [imap.deliver(ask(n)) for n in range(3)]

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED and run.error_code == "", run.error_message
    assert sorted(task_ids(imap)) == sorted(ids)
    sent = command_names(proxy.commands)
    assert {"LOGIN", "EXAMINE", "UID FETCH", "LOGOUT"} <= sent
    assert sent <= READ_COMMANDS, sent - READ_COMMANDS
    assert not any(imap.password in line for line in proxy.commands)
    wait_for(lambda: proxy.open_connections() == 0, timeout=5, what="the run's connection logged out")


@pytest.mark.django_db(transaction=True)
def test_the_idle_watch_whose_connection_drops_connects_again_and_still_rings(
    proxy: ImapProxy, imap: ImapBox, consenting_user: User, caplog: pytest.LogCaptureFixture
) -> None:
    """The imap-idle process's watch: its connection cut as it starts IDLE comes back after its backoff (1 s
    first), holds IDLE again, and new mail still rings for a run."""
    import threading

    from integrations.imapidle import IdleWatcher

    caplog.set_level("INFO", logger="integrations.imapidle")
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    cut = proxy.drop(r"^IDLE\b", times=1)
    logins = sum(1 for c in proxy.commands if c.split()[1:2] == ["LOGIN"])  # the run's
    watcher = IdleWatcher()
    serving = threading.Thread(target=watcher.serve, daemon=True)
    serving.start()
    try:
        wait_for(lambda: cut.applied == 1, timeout=10, what="the first IDLE's connection cut")
        wait_for(lambda: watcher.idling() == [imap.integration.pk], timeout=10, what="IDLE held again")
        # the watch's first connection, and a new one signed in after the cut
        assert sum(1 for c in proxy.commands if c.split()[1:2] == ["LOGIN"]) == logins + 2
        assert proxy.open_connections() == 1  # the cut one is gone
        imap.deliver(ask(1))
        wait_for(lambda: watcher.rung >= 1, timeout=10, what="a ring for the new email")
        # cut again once it held IDLE: its wait starts from 1 s again, not from where the last failures left it
        proxy.cut_all()
        wait_for(lambda: caplog.text.count("again in") == 2, timeout=10, what="the cut seen while in IDLE")
        wait_for(lambda: watcher.idling() == [imap.integration.pk], timeout=10, what="IDLE held a third time")
    finally:
        watcher.stopping.set()
        serving.join(timeout=10)
    assert [line.rsplit("again in ", 1)[1] for line in caplog.messages if "again in" in line] == ["1 s", "1 s"]
    assert ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.WEBHOOK).count() == 1
