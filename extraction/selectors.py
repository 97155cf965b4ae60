from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import User
from config.errors import NotFoundError
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import Integration


def run_get(*, user: User, run_id: int) -> ExtractionRun:
    run = ExtractionRun.objects.filter(user=user, pk=run_id).first()
    if run is None:
        raise NotFoundError("There is no such extraction run.", code="run_not_found")
    return run


def run_latest(*, user: User) -> ExtractionRun | None:
    return ExtractionRun.objects.filter(user=user).order_by("-created_at").first()


def run_as_dict(run: ExtractionRun) -> dict[str, object]:
    """The run record as JSON: what the API, the `extract` command and people read."""
    return {
        "id": run.pk,
        "trigger": run.trigger,
        "status": run.status,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "counts": {
            "fetched": run.emails_fetched,
            "already_done": run.emails_already_done,
            "sent_to_llm": run.emails_sent_to_llm,
            "tasks_created": run.tasks_created,
            "quarantined": run.emails_quarantined,
        },
        "llm": {"calls": run.llm_calls, "prompt_tokens": run.prompt_tokens, "output_tokens": run.output_tokens},
        "mailboxes": list(run.mailboxes.values()),
        "rejections": run.rejections,
        "error_code": run.error_code,
        "error_message": run.error_message,
    }


def quarantined_list(*, integration: Integration) -> QuerySet[ProcessedEmail]:
    return ProcessedEmail.objects.filter(integration=integration, outcome=ProcessedEmail.Outcome.QUARANTINED)
