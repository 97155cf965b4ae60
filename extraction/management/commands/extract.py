import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import User
from extraction.models import ExtractionRun
from extraction.pipeline import LeaseBusy, extraction_run_execute
from extraction.selectors import run_as_dict


class Command(BaseCommand):
    help = "Run one extraction for EMAIL now, in this process, and print the run record as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(email__iexact=options["email"]).first()
        if user is None:
            raise CommandError(f"No account with the email address {options['email']}.")
        run = ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN)
        try:
            run = extraction_run_execute(run=run)
        except LeaseBusy:
            run.delete()
            raise CommandError(
                "Another extraction run of this person is in progress; try again when it ends."
            ) from None
        self.stdout.write(json.dumps(run_as_dict(run), indent=2))
