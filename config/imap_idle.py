"""`python -m config.imap_idle`: the Procfile's `imap-idle` process (integrations/imapidle.py). Wrong settings stop
it before Django reads them, with one line naming the setting and exit 78 (config/startup.py), as web, worker and
beat; then its first log line names the release, and `manage.py imap_idle` runs until SIGTERM."""

from __future__ import annotations

import os

from config.startup import settings_or_exit


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    settings_or_exit("imap-idle")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from config.version import log_start

    log_start("imap-idle", shard=settings.IMAP_IDLE_SHARD, shards=settings.IMAP_IDLE_SHARDS)
    call_command("imap_idle")


if __name__ == "__main__":
    main()
