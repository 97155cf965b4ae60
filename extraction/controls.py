"""What a person does to their runs (issue 31): start one, only with AI consent, and stop one.

Starting without AI consent is refused at once, with where to give it: no run is queued that could only end
`skipped`, and the press does not count against the rate limit.

Stopping keeps DESIGN §1 by moving no cursor. A run's cursors move only in its commit after every batch
(extraction/pipeline.py), which a stopped run never makes; a cursor part-way is not to be had (a Gmail
historyId or a Graph delta link stands for a whole listing, and a run reads its mail in conversation order
across mailboxes, not in the cursor's order). So every cursor stays where the run found it, behind no email
that is not handled; what the run's batches wrote stays (each batch's tasks and ledger rows in one
transaction); and the next run fetches the same delta again, skips what the ledger holds and reads the rest.

- A queued run ends `cancelled` at once: no runner has it (or its runner died and it waits to be taken up
  again). Its job, when a worker takes it, finds it finished.
- A running run has the stop recorded (`cancel_requested_at`); its runner ends it `cancelled` at its next
  batch boundary: no batch more is sent, the answers already asked for are written
  (RunRecord.stop_if_asked). A runner that dies after the stop is taken up again by the reaper and ends the
  run at once. A stop asked after the last batch is still seen by the commit, which then moves nothing.
- A finished run has nothing to stop: RunFinishedError (409 `run_finished`).
"""

from __future__ import annotations

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from accounts.selectors import consent_allows_reading
from config.errors import ApplicationError, NotFoundError
from config.metrics import run_ended
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.runrecord import STOPPED, stopped_message

NOT_STARTED = "Stopped before it started: nothing was read; your new mail will be read next time."


class NoConsentError(ApplicationError):
    """No AI consent in force: Tasklift may not read the person's mail, so no run is started."""

    status = 403


class RunFinishedError(ApplicationError):
    """The run has already ended: there is nothing to stop."""

    status = 409


def extraction_consent_check(*, user: User) -> None:
    """Before a run is queued at the person's request (Extract now, the API): refuse at once without AI
    consent, saying where to give it."""
    if not consent_allows_reading(user_id=user.pk):
        raise NoConsentError(
            "No read was started: Tasklift has no AI consent to read your mail. Give consent, then try again.",
            code="no_consent",
            extra={"consent_url": reverse("consent")},
        )


def extraction_run_cancel(*, user: User, run_id: int) -> ExtractionRun:
    """Stop the person's run: a queued one ends now, a running one at its next batch boundary. Asked again
    while it runs, nothing changes. Returns the run as it stands.

    Raises NotFoundError (`run_not_found`) for a run that is not theirs, RunFinishedError (`run_finished`)
    for one that has ended."""
    now = timezone.now()
    with transaction.atomic():
        # The run's row is locked, as the runner's commit locks it: a stop is either seen by the commit, or
        # waits for it and finds the run finished.
        run = ExtractionRun.objects.select_for_update().filter(user=user, pk=run_id).first()
        if run is None:
            raise NotFoundError("There is no such extraction run.", code="run_not_found")
        if run.is_finished:
            raise RunFinishedError(
                f"This run already finished ({run.get_status_display().lower()}); there is nothing to stop.",
                code="run_finished",
                extra={"status": run.status},
            )
        changes: dict[str, object] = {"cancel_requested_at": run.cancel_requested_at or now, "updated_at": now}
        if run.status == ExtractionRun.Status.QUEUED:
            # Queued again after its runner died or lost its services, it may have written batches already.
            read = ProcessedEmail.objects.filter(run_id=run.pk).count() if run.deliveries else 0
            changes.update(
                status=ExtractionRun.Status.CANCELLED,
                finished_at=now,
                retry_after=None,
                error_code=STOPPED,
                error_message=stopped_message(read) if run.deliveries else NOT_STARTED,
            )
        ExtractionRun.objects.filter(pk=run.pk).update(**changes)
    run.refresh_from_db()
    run_ended(run)  # counted once: only a run ended here (a running one is counted by its runner)
    return run
