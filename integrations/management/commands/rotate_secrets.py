from typing import Any

from django.core.management.base import BaseCommand

from integrations.services import integration_reencrypt_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored mailbox credential with the newest key of TASKLIFT_ENCRYPTION_KEYS. "
        "Rotate a key by putting a new one first, running this, then removing the old one."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = integration_reencrypt_all()
        self.stdout.write(f"Re-encrypted the credentials of {count} mailbox(es) with the newest key.")
