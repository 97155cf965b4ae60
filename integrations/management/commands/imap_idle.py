"""`manage.py imap_idle`: the Procfile's `imap-idle` process (integrations/imapidle.py). Stops on SIGTERM or
SIGINT, letting go of every IDLE connection."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from integrations.imapidle import IdleWatcher


class Command(BaseCommand):
    help = "Hold IMAP IDLE on the Inbox of each IMAP mailbox and ring the doorbell when mail arrives."

    def handle(self, *args: Any, **options: Any) -> None:
        if not 0 <= settings.IMAP_IDLE_SHARD < settings.IMAP_IDLE_SHARDS:
            raise CommandError(
                f"IMAP_IDLE_SHARD is {settings.IMAP_IDLE_SHARD}: it must be from 0 to IMAP_IDLE_SHARDS - 1 "
                f"({settings.IMAP_IDLE_SHARDS - 1})."
            )
        watcher = IdleWatcher()

        def stop(signum: int, frame: FrameType | None) -> None:
            watcher.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(
            f"imap idle: shard {settings.IMAP_IDLE_SHARD} of {settings.IMAP_IDLE_SHARDS}, "
            f"at most {settings.IMAP_IDLE_MAX_CONNECTIONS} connections"
        )
        watcher.serve()
        self.stdout.write("imap idle: stopped")
