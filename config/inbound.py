"""`python -m config.inbound`: the Procfile's `inbound` process (integrations/inbound/smtp.py). Wrong settings stop
it before Django reads them, with one line naming the setting and exit 78 (config/startup.py), as the others;
then its first log line names the release, and `manage.py inbound_smtp` runs until SIGTERM."""

from __future__ import annotations

import os

from config.startup import settings_or_exit


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    settings_or_exit("inbound")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from config.version import log_start

    log_start("inbound", domain=settings.INBOUND_DOMAIN, port=settings.INBOUND_SMTP_PORT)
    call_command("inbound_smtp")


if __name__ == "__main__":
    main()
