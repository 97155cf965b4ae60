from typing import Any

from django.core.management.base import BaseCommand

from config.metrics import metrics_dir_clear


class Command(BaseCommand):
    help = (
        "Empty PROMETHEUS_MULTIPROC_DIR, where every process writes its metrics. Run it when the deployment "
        "starts, before any web, worker or beat process: files left by an earlier start would be counted again."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"emptied {metrics_dir_clear()}")
