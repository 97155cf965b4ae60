"""What every part of a run shares: its record (written only by the delivery that holds the lease), the lease
that fences every write, and how a run stops.

The parts of a run (extraction/reading.py reads the mailboxes, extraction/batches.py keeps Gemini calls in
flight, extraction/writing.py writes what a batch means, extraction/pipeline.py keeps the order and the
commit) each take the run's RunRecord rather than one another.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import redis
from django.db import InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone

from accounts.selectors import consent_allows_reading
from extraction.crashpoints import crash_point
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.services import lease_alive, lease_holds

LEASE_LOST = "Stopped: another run of yours took over; it finishes the work."
# The error code of a run its person stopped (Stop, or the API's cancel: extraction/controls.py).
STOPPED = "stopped"
# What losing Redis or PostgreSQL under a run raises: the run is queued again (`_interrupted`), not failed.
INFRASTRUCTURE_ERRORS = (redis.ConnectionError, redis.TimeoutError, OperationalError, InterfaceError)


def stopped_message(read: int) -> str:
    """How a run its person stopped reads, with the emails it handled (its ledger rows) before it stopped."""
    emails = "1 email" if read == 1 else f"{read} emails"
    return f"Stopped: {emails} read before you stopped; the rest will be read next time."


class LeaseBusy(Exception):
    """Another run of this person holds the lease; try again later."""


class RunStopped(Exception):
    """The run cannot go on; it ends with `status` and a message a person can read. `retry_after`: no run
    of this person starts before then (Gemini asked to wait)."""

    def __init__(self, status: str, code: str, message: str, *, retry_after: datetime | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


class RunRecord:
    """One delivery of a run: the run's row and the lease token this delivery holds (set once it is taken)."""

    def __init__(self, run: ExtractionRun) -> None:
        self.run = run
        self.token: int | None = None

    def update(self, **fields: Any) -> None:
        """Write the run's record, unless another delivery of this run took it over (its lease token)."""
        runs = ExtractionRun.objects.filter(pk=self.run.pk)
        if "lease_token" not in fields:
            runs = runs.filter(lease_token=self.token)
        runs.update(updated_at=timezone.now(), **fields)
        for name, value in fields.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self.run, name, value)

    def add(self, **counts: int) -> None:
        """Add to the run's counters (summed in the database: several threads of the run count)."""
        ExtractionRun.objects.filter(pk=self.run.pk).update(**{name: F(name) + n for name, n in counts.items()})

    def count_llm(self, *, calls: int, prompt: int = 0, output: int = 0) -> None:
        self.add(llm_calls=calls, prompt_tokens=prompt, output_tokens=output)

    def reject(self, code: str, emails: int) -> None:
        self.run.refresh_from_db(fields=["rejections"])
        # Codes and counts only: what Gemini answered is never kept (it may quote the mail).
        self.update(rejections=[*self.run.rejections, {"emails": emails, "code": code}])

    def hold_lease(self) -> None:
        """Inside a write transaction: lock the lease row until commit and check the token, so a runner
        that lost the lease writes nothing."""
        assert self.token is not None
        if not lease_holds(user_id=self.run.user_id, token=self.token):
            raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)

    def stop_asked(self) -> bool:
        """Whether the person asked the run to stop (Stop, or the API's cancel: extraction/controls.py)."""
        return ExtractionRun.objects.filter(pk=self.run.pk, cancel_requested_at__isnull=False).exists()

    def stop_if_asked(self) -> None:
        """Before a batch is sent, a batch boundary: end the run if its person asked it to stop. What earlier
        batches wrote stays; no cursor moves (only the commit after every batch moves them)."""
        if self.stop_asked():
            raise self.stop_seen()

    def stop_seen(self) -> RunStopped:
        """The runner has just seen that its person asked the run to stop: how the run ends."""
        crash_point("stop")  # the stop is seen, the run's end not yet recorded
        return self.stopped()

    def stopped(self) -> RunStopped:
        """The end of a run its person stopped, counting what it wrote (every delivery's) up to now."""
        read = ProcessedEmail.objects.filter(run_id=self.run.pk).count()
        return RunStopped(ExtractionRun.Status.CANCELLED, STOPPED, stopped_message(read))

    def guard(self) -> None:
        """Before each fetch and each Gemini call: the lease is still ours, and consent still stands (a revoke
        stops the run)."""
        assert self.token is not None
        if not lease_alive(user_id=self.run.user_id, token=self.token):
            raise RunStopped(ExtractionRun.Status.CANCELLED, "lease_lost", LEASE_LOST)
        if not consent_allows_reading(user_id=self.run.user_id):
            raise RunStopped(
                ExtractionRun.Status.CANCELLED,
                "consent_revoked",
                "Stopped: AI consent was revoked during the run. Nothing more was sent to Gemini.",
            )
