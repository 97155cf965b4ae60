from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from accounts.models import User


class Command(BaseCommand):
    help = "Create the local demo account and an admin account (idempotent; resets their passwords)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", required=True)
        parser.add_argument("--admin-password", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        demo, _ = User.objects.get_or_create(email="demo@tasklift.test", defaults={"name": "Demo User"})
        demo.set_password(options["password"])
        demo.save(update_fields=["password"])
        admin, _ = User.objects.get_or_create(
            email="admin@tasklift.test", defaults={"name": "Admin", "is_staff": True, "is_superuser": True}
        )
        admin.set_password(options["admin_password"])
        admin.save(update_fields=["password"])
        self.stdout.write("Seeded demo@tasklift.test and admin@tasklift.test")
