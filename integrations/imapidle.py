"""Seconds-fresh IMAP mail: the `imap-idle` process (Procfile) holds IMAP IDLE (RFC 2177) on the Inbox of each
active IMAP mailbox whose owner consents, and rings the same doorbell as push (extraction_doorbell) when the
server says mail arrived. A ring only asks for a run; the run reads by the cursor, so a ring lost, repeated or
late loses and duplicates nothing, and the polling scan still checks every mailbox (extraction/idlecheck.py).

- One connection and one thread per mailbox (a thread blocks on its socket; IDLE costs the server and us
  nothing between messages), at most IMAP_IDLE_MAX_CONNECTIONS per process; more mailboxes than that are left
  to the scan's checks, and the log says so. Several processes split the mailboxes between them by id
  (IMAP_IDLE_SHARD of IMAP_IDLE_SHARDS).
- IDLE is renewed every IMAP_IDLE_RENEW_SECONDS (servers end an IDLE after 30 minutes), a dropped connection is
  opened again after a wait doubling from 1 s to 5 minutes, a refused sign-in marks the mailbox as needing
  its password again (as a run would) and its watch ends.
- Every IMAP_IDLE_REFRESH_SECONDS the list of mailboxes is read again: a mailbox connected, reconnected or
  disconnected is watched, watched again or let go.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Exists, OuterRef
from django.db.models.functions import Mod

from accounts.models import AIConsent
from config.crypto import SecretUnreadable
from config.heartbeat import imap_idle_tick_record
from integrations.models import Integration
from integrations.providers.base import ProviderAuthError, ProviderError, ProviderUnavailable
from integrations.providers.imap import ImapAccount, ImapProvider

logger = logging.getLogger(__name__)

BACKOFF_MAX_S = 300.0
IDLE_POLL_S = 1.0  # how often a watch looks up from IDLE to see whether it is asked to stop


@dataclass
class Watch:
    """One mailbox's IDLE, in a thread of its own."""

    integration_id: int
    account: ImapAccount
    address: str
    ring: Callable[[int], None]
    refused: Callable[[int, ProviderError], None]
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    idling: threading.Event = field(default_factory=threading.Event)  # set while IDLE is held (tests, metrics)
    held: bool = False  # IDLE was held since the last failure

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"imap-idle-{self.integration_id}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        wait = 1.0
        while not self.stop.is_set():
            provider = ImapProvider(self.account, address=self.address)
            try:
                self._hold(provider)
                wait = 1.0
            except ProviderAuthError as error:
                logger.warning("imap idle of integration=%s: sign-in refused; watch ended", self.integration_id)
                self.refused(self.integration_id, error)
                return
            except ProviderError as error:
                if self.held:  # it held IDLE before this failure: the wait starts again from 1 s
                    wait, self.held = 1.0, False
                logger.info("imap idle of integration=%s: %s; again in %.0f s", self.integration_id, error, wait)
            finally:
                self.idling.clear()
                provider.close()
            self.stop.wait(wait)
            wait = min(wait * 2, BACKOFF_MAX_S)

    def _hold(self, provider: ImapProvider) -> None:
        """IDLE on the Inbox until asked to stop, renewed every IMAP_IDLE_RENEW_SECONDS; rings on new mail.
        Returns when asked to stop; raises when the connection fails."""
        provider.call(lambda c: c.select_folder("INBOX", readonly=True))  # signs in first
        while not self.stop.is_set():
            provider.call(lambda c: c.idle())
            self.idling.set()
            self.held = True
            renew_at = time.monotonic() + settings.IMAP_IDLE_RENEW_SECONDS
            try:
                while not self.stop.is_set() and time.monotonic() < renew_at:
                    responses = provider.call(lambda c: c.idle_check(timeout=IDLE_POLL_S))
                    if any(len(r) > 1 and r[1] in (b"EXISTS", b"RECENT") for r in responses):
                        self.ring(self.integration_id)
                    if not responses and provider.call(lambda c: _peer_closed(c.socket())):
                        raise ProviderUnavailable("The server ended the IDLE connection.")
            finally:
                self.idling.clear()
                if provider.connected:
                    provider.call(lambda c: c.idle_done())


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the server closed the connection: imapclient's idle_check takes the end of the stream for "no
    news" (it returns nothing, for ever), so a watch cut off would sit idle and deaf. A peek at the TCP stream
    (under TLS, without reading a byte of it) tells: nothing to read and the stream ended."""
    probe = socket.socket(sock.family, sock.type, fileno=os.dup(sock.fileno()))
    try:
        return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing sent
    except OSError:
        return True
    finally:
        probe.close()


class IdleWatcher:
    """The process: its watches, the refresh of their list, and the doorbell (rung from this thread only, in
    batches: one database connection whatever the number of watches)."""

    def __init__(self) -> None:
        self.watches: dict[int, tuple[str, Watch]] = {}  # integration id -> (its stored credentials, watch)
        self.rings: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.refusals: queue.SimpleQueue[tuple[int, ProviderError]] = queue.SimpleQueue()
        self.stopping = threading.Event()
        self.rung = 0

    def refresh(self) -> None:
        """Watch the mailboxes of this shard as they are now."""
        from integrations.services import integration_credentials

        consenting = AIConsent.objects.in_force().filter(user=OuterRef("user_id"))
        mailboxes = list(
            Integration.objects.filter(provider=Integration.Provider.IMAP, status=Integration.Status.ACTIVE)
            .filter(Exists(consenting))
            .annotate(shard=Mod("pk", settings.IMAP_IDLE_SHARDS))
            .filter(shard=settings.IMAP_IDLE_SHARD)
            .order_by("pk")
            .only("pk", "account_address", "credentials_encrypted")
        )
        limit = settings.IMAP_IDLE_MAX_CONNECTIONS
        if len(mailboxes) > limit:
            logger.warning(
                "imap idle: %d mailboxes in this shard, %d watched; the rest are read by the scan's checks",
                len(mailboxes),
                limit,
            )
        wanted = {m.pk: m for m in mailboxes[:limit]}
        for integration_id in [i for i in self.watches if i not in wanted]:
            self._let_go(integration_id)
        for integration_id, mailbox in wanted.items():
            held = self.watches.get(integration_id)
            if held is not None and held[0] == mailbox.credentials_encrypted:
                continue
            if held is not None:  # reconnected: its new password
                self._let_go(integration_id)
            try:
                account = ImapAccount.load(integration_credentials(integration=mailbox))
            except SecretUnreadable:  # a run says so on Mailboxes
                logger.warning("imap idle: credentials of integration=%s unreadable", integration_id)
                continue
            watch = Watch(integration_id, account, mailbox.account_address, self.rings.put, self._refused)
            self.watches[integration_id] = (mailbox.credentials_encrypted, watch)
            watch.start()

    def _refused(self, integration_id: int, error: ProviderError) -> None:
        self.refusals.put((integration_id, error))

    def _let_go(self, integration_id: int) -> None:
        _, watch = self.watches.pop(integration_id)
        watch.stop.set()

    def deliver_rings(self) -> int:
        """Ring the doorbell for every mailbox that said it has mail since the last call; mark refused ones."""
        from extraction.scheduling import extraction_doorbell
        from integrations.services import integration_mark_failed

        ids: set[int] = set()
        while True:
            try:
                ids.add(self.rings.get_nowait())
            except queue.Empty:
                break
        while True:
            try:
                integration_id, error = self.refusals.get_nowait()
            except queue.Empty:
                break
            integration = Integration.objects.filter(pk=integration_id).first()
            if integration is not None:
                integration_mark_failed(integration=integration, error=error)
        if ids:
            queued = extraction_doorbell(integration_ids=ids)
            self.rung += len(ids)
            logger.info("imap idle rang for %d mailboxes: %d runs queued", len(ids), queued)
        return len(ids)

    def serve(self) -> None:
        """Until `stopping` is set: refresh the list now and then, deliver rings as they come."""
        next_refresh = 0.0
        while not self.stopping.is_set():
            close_old_connections()
            if time.monotonic() >= next_refresh:
                self.refresh()
                imap_idle_tick_record(settings.IMAP_IDLE_SHARD)  # `python -m config.healthcheck imap-idle`
                next_refresh = time.monotonic() + settings.IMAP_IDLE_REFRESH_SECONDS
            self.deliver_rings()
            self.stopping.wait(0.2)
        stopped = [self.watches[i][1] for i in list(self.watches)]
        for integration_id in list(self.watches):
            self._let_go(integration_id)
        for watch in stopped:  # each ends its IDLE and logs out within a poll
            if watch.thread is not None:
                watch.thread.join(timeout=IDLE_POLL_S + settings.IMAP_TIMEOUT_SECONDS)

    def idling(self) -> list[int]:
        return [i for i, (_, watch) in self.watches.items() if watch.idling.is_set()]


def watcher_stats(watcher: IdleWatcher) -> dict[str, Any]:
    return {"watched": len(watcher.watches), "idling": len(watcher.idling()), "rung": watcher.rung}
