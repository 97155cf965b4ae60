"""The `inbound` process: an SMTP server (aiosmtpd) for the forward-to addresses, behind the domain's MX.

Each message is decided and stored by integrations/inbound/accept.py, and the reply to DATA is its answer: 250
only after the commit. One recipient per transaction (a second is told 452 4.5.3, and the sending server sends
it again on its own), so one answer always speaks for the whole transaction. The checks and the database work
run on threads beside the event loop (asgiref's `sync_to_async`, its default pool: a few threads, each with its
own database connection), so sessions are handled side by side.
STARTTLS is offered with the operator's certificate (INBOUND_TLS_CERT, INBOUND_TLS_KEY).
"""

from __future__ import annotations

import logging
import ssl
import threading
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from config.metrics import inbound_count
from integrations.inbound.accept import UNAVAILABLE_NOW, Answer, inbound_accept, recipient_answer

logger = logging.getLogger(__name__)

TOO_MANY_RECIPIENTS = "452 4.5.3 One forward-to address per message: send the others separately"


def _recipient(address: str) -> Answer | None:
    close_old_connections()  # a connection the database ended meanwhile (a restart) is opened again
    refusal, _ = recipient_answer(address)
    return refusal


def _accept(**message: Any) -> str:
    close_old_connections()
    return inbound_accept(**message).reply


class InboundHandler:
    """aiosmtpd's handler: RCPT TO is checked against the forward-to addresses, DATA is decided and stored."""

    async def handle_RCPT(self, server: SMTP, session: Any, envelope: Any, address: str, options: list[str]) -> str:
        if envelope.rcpt_tos:
            return TOO_MANY_RECIPIENTS
        refusal = await sync_to_async(_recipient, thread_sensitive=False)(address)
        if refusal is not None:
            inbound_count("smtp", refusal.outcome)
            return refusal.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Any, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content
        if not isinstance(raw, bytes):
            raw = str(raw).encode()
        try:
            return await sync_to_async(_accept, thread_sensitive=False)(
                recipient=envelope.rcpt_tos[0],
                raw=raw,
                client_ip=str(session.peer[0]) if session.peer else "",
                helo=session.host_name or "",
                mail_from=envelope.mail_from or "",
                via="smtp",
            )
        except Exception:  # never a traceback in the reply; the sender tries again later
            logger.exception("inbound: a message could not be handled")
            return UNAVAILABLE_NOW.reply


def _tls_context() -> ssl.SSLContext | None:
    if not settings.INBOUND_TLS_CERT:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.INBOUND_TLS_CERT, settings.INBOUND_TLS_KEY or None)
    return context


class InboundServer:
    """The server on INBOUND_SMTP_HOST:INBOUND_SMTP_PORT (or the given host and port), in a thread of its own."""

    def __init__(self, *, host: str | None = None, port: int | None = None) -> None:
        self.controller = Controller(
            InboundHandler(),
            hostname=host or settings.INBOUND_SMTP_HOST,
            port=port or settings.INBOUND_SMTP_PORT,
            server_hostname=settings.INBOUND_HOSTNAME,
            data_size_limit=settings.INBOUND_MAX_BYTES,
            tls_context=_tls_context(),
            ready_timeout=10,
        )

    def serve(self, stopping: threading.Event) -> None:
        """Take mail until `stopping` is set; then stop listening (a message being stored is finished first)."""
        self.controller.start()
        logger.info("inbound listening on %s:%s", self.controller.hostname, self.controller.port)
        try:
            stopping.wait()
        finally:
            self.controller.stop()
