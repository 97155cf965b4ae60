"""An IMAP mailbox (a real Dovecot) read by a run like Gmail and Outlook: new mail by UID from the cursor's
UIDNEXT, mail moved in read whatever its date, the ledger keyed by Message-ID, and never a command that
changes the mailbox."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import User
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.providers.imap import READ_COMMANDS
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import ImapBox, run_extraction
from tests.mail import ask, no_ask, rfc822

pytestmark = pytest.mark.django_db


def command_names(lines: list[str]) -> set[str]:
    """The command of each "TAG NAME ARGS" line ("UID FETCH", "EXAMINE"); a line continuing a literal is
    not a command."""
    names = set()
    for line in lines:
        parts = line.split()
        if len(parts) < 2 or not parts[0].isalnum():
            continue
        name = parts[1].upper()
        names.add(f"UID {parts[2].upper()}" if name == "UID" and len(parts) > 2 else name)
    return names


def test_a_run_reads_new_imap_mail_once_and_moves_the_cursor(imap: ImapBox, consenting_user: User) -> None:
    asks = [imap.deliver(ask(n)) for n in range(12)]
    imap.deliver(no_ask(99))
    before = imap.cursor

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert set(Task.objects.filter(integration=imap.integration).values_list("source_id", flat=True)) == set(asks)
    assert ProcessedEmail.objects.filter(integration=imap.integration).count() == 13
    assert imap.cursor != before and not imap.cursor.endswith(":first")
    # mail after it is read by the next run, and nothing twice
    later = imap.deliver(ask(50))
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.filter(integration=imap.integration).count() == 13
    assert Task.objects.filter(source_id=later).exists()


def test_mail_moved_into_the_inbox_is_read_whatever_its_date(imap: ImapBox, consenting_user: User) -> None:
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    old = datetime.now(UTC) - timedelta(days=400)
    filed = imap.deliver(ask(7), at=old, folder="Archive")
    with imap.dovecot.client(imap.address) as client:  # the person moves it back into the Inbox
        client.select_folder("Archive")
        client.move(client.search(["ALL"]), "INBOX")

    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED

    assert Task.objects.filter(integration=imap.integration, source_id=filed).exists()


def test_only_commands_that_read_are_ever_sent(imap: ImapBox, consenting_user: User) -> None:
    for n in range(3):
        imap.deliver(ask(n))
    imap.deliver(ask(3), folder="Sent")
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    sent = command_names(imap.dovecot.commands(imap.address))
    assert {"EXAMINE", "UID FETCH"} <= sent  # the log sees Tasklift's commands
    assert sent <= READ_COMMANDS, sent - READ_COMMANDS
    assert not any(
        "BODY[" in line.upper() and "BODY.PEEK[" not in line.upper() for line in imap.dovecot.commands(imap.address)
    )
    with imap.dovecot.client(imap.address) as client:
        client.select_folder("INBOX", readonly=True)
        flags = client.get_flags(client.search(["ALL"]))
    assert all(b"\\Seen" not in f for f in flags.values())  # still unread in the person's mail client


@pytest.mark.slow  # doveadm
def test_a_changed_uidvalidity_is_a_resync_by_message_id(imap: ImapBox, consenting_user: User) -> None:
    first = [imap.deliver(ask(n)) for n in range(3)]
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    after = imap.deliver(ask(10))
    imap.dovecot.doveadm("mailbox", "update", "-u", imap.address, "--uid-validity", "12345", "INBOX")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert imap.cursor.startswith("12345:")
    assert set(Task.objects.filter(integration=imap.integration).values_list("source_id", flat=True)) == {*first, after}
    assert Task.objects.filter(integration=imap.integration).count() == 4  # none twice


def test_an_idle_check_of_a_quiet_mailbox_is_one_status_per_folder_and_writes_no_run(
    imap: ImapBox, consenting_user: User
) -> None:
    from extraction.idlecheck import mailboxes_idle_check

    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED  # both cursors at a position
    assert imap.integration.cursors.count() == 2
    runs, sessions = ExtractionRun.objects.count(), len(imap.dovecot.sessions(imap.address))

    quiet = mailboxes_idle_check(integration_ids=[imap.integration.pk])

    assert (quiet.quiet, quiet.with_mail, quiet.runs_queued) == (1, 0, 0)
    assert ExtractionRun.objects.count() == runs
    check = imap.dovecot.sessions(imap.address)[sessions:]
    assert len(check) == 1  # one connection
    assert [" ".join(line.split()[1:3]) for line in check[0]] == ['STATUS "INBOX"', 'STATUS "Sent"', "LOGOUT"]

    imap.deliver(ask(1))
    found = mailboxes_idle_check(integration_ids=[imap.integration.pk])
    assert (found.with_mail, found.runs_queued) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_idle_rings_the_doorbell_within_seconds_of_new_mail_and_a_run_reads_it(
    imap: ImapBox, consenting_user: User
) -> None:
    """The `imap-idle` process's watcher (in this process: threads): IDLE held on the Inbox, a new email rings the
    doorbell, which queues a run (trigger webhook, as a push does)."""
    import threading

    from integrations.imapidle import IdleWatcher
    from tests.waiting import wait_for

    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    watcher = IdleWatcher()
    serving = threading.Thread(target=watcher.serve, daemon=True)
    serving.start()
    try:
        wait_for(lambda: watcher.idling() == [imap.integration.pk], timeout=10, what="IDLE held on the Inbox")
        runs = ExtractionRun.objects.count()
        imap.deliver(ask(1))
        wait_for(lambda: watcher.rung >= 1, timeout=5, what="the doorbell rung for the new email")
        run = wait_for(
            lambda: ExtractionRun.objects.filter(trigger=ExtractionRun.Trigger.WEBHOOK).first(),
            timeout=5,
            what="a run requested by the ring",
        )
        assert run is not None and run.status == ExtractionRun.Status.QUEUED
        assert ExtractionRun.objects.count() == runs + 1
    finally:
        watcher.stopping.set()
        serving.join(timeout=10)
    assert not serving.is_alive()
    assert not [session for session in imap.dovecot.sessions(imap.address) if session and "IDLE" in session[-1]]


def test_an_imap_tasks_links_open_the_email_in_tasklift(imap: ImapBox, consenting_user: User, client) -> None:  # type: ignore[no-untyped-def]
    """IMAP has no web client to link to: the row's subject and its IMAP badge open Tasklift's reading pane."""
    message_id = imap.deliver(ask(4))
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    task = Task.objects.get(source_id=message_id)
    client.force_login(consenting_user)
    page = client.get("/").content.decode()
    row = page[page.index(f'id="task-{task.pk}"') :]
    assert f'href="/tasks/{task.pk}/email" class="email-link"' in row
    assert f'href="/tasks/{task.pk}/email" data-provider="imap" title="Read the email' in row
    pane = client.get(f"/tasks/{task.pk}/email")
    assert pane.status_code == 200 and "Please send the report for project 4" in pane.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_same_message_in_gmail_and_an_imap_mailbox_is_one_task_and_one_conversation(
    imap: ImapBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    """IMAP has no thread id: the conversation is the Message-ID's, so Gmail's copy and the IMAP copy of one email
    are one task with a link through each mailbox, and a reply seen through either closes it."""
    from tasks.models import TaskLink
    from tests.conftest import connect_gmail

    gmail = connect_gmail(sandbox, consenting_user, "person@gmail.example.com")
    raw = ask(8)
    earlier = datetime.now(UTC) - timedelta(minutes=10)  # the reply comes after it, whatever the clock's second
    gmail.deliver(raw, at=earlier)
    message_id = imap.deliver(raw, at=earlier)

    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED

    task = Task.objects.get()
    assert {link.integration.provider for link in TaskLink.objects.filter(task=task)} == {"gmail", "imap"}
    # the person's reply, in the IMAP mailbox's Sent folder, closes it
    reply = rfc822("Re: Project 8", "Here is the report.", sender=imap.address)
    imap.deliver(reply.replace("Subject:", f"In-Reply-To: <{message_id}>\nSubject:", 1), folder="Sent")
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    task.refresh_from_db()
    assert task.status == Task.Status.DONE


def test_one_provider_read_from_two_threads_reads_each_message_from_its_own_folder(imap: ImapBox) -> None:
    """A run's fetcher threads read the Inbox's and Sent's mail through one provider (one connection): each
    read holds it whole, so no UID is read in the folder the other thread opened."""
    from concurrent.futures import ThreadPoolExecutor

    from integrations.providers.imap import ImapProvider

    inbox = {imap.deliver(ask(n)): f"Project {n}" for n in range(6)}
    sent = {
        imap.deliver(rfc822(f"Sent {n}", "I will.", sender=imap.address), folder="Sent"): f"Sent {n}" for n in range(6)
    }
    provider = ImapProvider(imap.account(), address=imap.address)
    since = datetime.now(UTC) - timedelta(days=1)
    assert set(provider.first_read(since, 100, folder="inbox").message_ids) == set(inbox)  # both listed: where
    assert set(provider.first_read(since, 100, folder="sent").message_ids) == set(sent)  # each one is

    def subjects(wanted: dict[str, str]) -> list[bool]:
        return [
            all(email.subject == wanted[email.message_id] for email in provider.fetch_emails(list(wanted)).emails)
            for _ in range(15)
        ]

    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(subjects, [inbox, sent]))
    finally:
        provider.close()
    assert all(all(r) for r in results)


@pytest.mark.django_db(transaction=True)
def test_the_idle_watcher_holds_at_most_its_connections_and_lets_go_of_a_disconnected_mailbox(
    imap: ImapBox,
    consenting_user: User,
    settings,
    caplog,  # type: ignore[no-untyped-def]
) -> None:
    """IMAP_IDLE_MAX_CONNECTIONS bounds a process's IDLE connections (the rest are left to the scan's checks, and
    the log says so); a mailbox disconnected is let go at the next refresh."""
    import threading

    from integrations.imapidle import IdleWatcher
    from integrations.services import integration_disconnect
    from tests.conftest import connect_imap
    from tests.waiting import wait_for

    second = connect_imap(imap.dovecot, consenting_user)
    settings.IMAP_IDLE_MAX_CONNECTIONS = 1
    settings.IMAP_IDLE_REFRESH_SECONDS = 1
    watcher = IdleWatcher()
    serving = threading.Thread(target=watcher.serve, daemon=True)
    serving.start()
    try:
        wait_for(lambda: watcher.idling() == [imap.integration.pk], timeout=10, what="the first mailbox in IDLE")
        assert list(watcher.watches) == [imap.integration.pk]  # one connection, the second left to the checks
        assert "2 mailboxes in this shard, 1 watched" in caplog.text
        integration_disconnect(integration=imap.integration)
        wait_for(lambda: watcher.idling() == [second.integration.pk], timeout=10, what="the other one watched")
    finally:
        watcher.stopping.set()
        serving.join(timeout=10)
