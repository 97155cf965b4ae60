from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from accounts.models import User


class Command(BaseCommand):
    help = "Create the local demo account and an admin account (idempotent; resets their passwords)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", required=True)
        parser.add_argument("--admin-password", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        # Both addresses count as confirmed: nobody reads mail at tasklift.test, and they exist to log in with.
        now = timezone.now()
        demo, _ = User.objects.get_or_create(email="demo@tasklift.test", defaults={"name": "Demo User"})
        demo.set_password(options["password"])
        demo.email_verified_at = demo.email_verified_at or now
        demo.save(update_fields=["password", "email_verified_at"])
        admin, _ = User.objects.get_or_create(
            email="admin@tasklift.test", defaults={"name": "Admin", "is_staff": True, "is_superuser": True}
        )
        admin.set_password(options["admin_password"])
        admin.email_verified_at = admin.email_verified_at or now
        admin.save(update_fields=["password", "email_verified_at"])
        self.stdout.write("Seeded demo@tasklift.test and admin@tasklift.test")
