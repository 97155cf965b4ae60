"""`manage.py inbound_smtp`: the Procfile's `inbound` process (integrations/inbound/smtp.py). Stops on SIGTERM or
SIGINT: it stops listening, and a message being stored is finished (its sender, not answered, sends it again)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from integrations.inbound.smtp import InboundServer


class Command(BaseCommand):
    help = "Take mail for the forward-to addresses over SMTP (answering 250 only once it is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=None, help="Listen here instead of INBOUND_SMTP_HOST.")
        parser.add_argument("--port", type=int, default=None, help="Listen here instead of INBOUND_SMTP_PORT.")

    def handle(self, *args: Any, **options: Any) -> None:
        stopping = threading.Event()

        def stop(signum: int, frame: FrameType | None) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        server = InboundServer(host=options["host"], port=options["port"])
        tls = "with STARTTLS" if settings.INBOUND_TLS_CERT else "without STARTTLS (no INBOUND_TLS_CERT)"
        self.stdout.write(
            f"inbound: mail for *@{settings.INBOUND_DOMAIN} on "
            f"{server.controller.hostname}:{server.controller.port}, {tls}",
        )
        self.stdout.flush()
        server.serve(stopping)
        self.stdout.write("inbound: stopped")
