from typing import Any

from django.core.management.base import BaseCommand, CommandError

from integrations.services import integration_reencrypt_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored mailbox credential with the newest key of TASKLIFT_ENCRYPTION_KEYS. "
        "Rotate a key by putting a new one first, running this, then removing the old one."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count, unreadable = integration_reencrypt_all()
        self.stdout.write(f"Re-encrypted the credentials of {count} mailbox(es) with the newest key.")
        if unreadable:
            raise CommandError(
                f"No configured key reads the credentials of mailbox(es) {unreadable}: those people must "
                "connect again (or put back the key that encrypted them and run this again)."
            )
