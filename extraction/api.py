"""The extraction API: start a run (rate-limited like the button, refused without AI consent), stop one, and read
run records, newest first; the senders the person muted, muted from a task and unmuted."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Field, Path, Query, Router, Schema, Status

from accounts.models import User
from config.http import request_user
from config.pagination import PageParams, page_of
from extraction.controls import extraction_consent_check, extraction_run_cancel
from extraction.models import ExtractionRun
from extraction.muting import Muted, muted_sender_list, sender_mute, sender_unmute
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_as_dict, run_get
from extraction.services import extraction_run_request
from tasks.selectors import task_get

router = Router(tags=["extraction"])


class RunCountsOut(Schema):
    fetched: int
    already_done: int
    sent_to_llm: int
    tasks_created: int
    quarantined: int
    cut_to_fit: int = 0  # emails whose sender, subject or body was cut to fit the prompt
    skipped_bulk: int = 0  # newsletters, notifications and list mail not sent to Gemini
    secrets_redacted: int = 0  # one-time codes, passwords, card numbers... replaced before sending
    ungrounded: int = Field(
        0, description="Tasks Gemini gave whose sentence Tasklift did not find in their email: not kept."
    )
    items_closed: int = Field(0, description="Open items an email of their conversation delivered or settled.")
    items_updated: int = Field(0, description="Open items an email of their conversation gave a new due date.")
    items_suggested: int = Field(
        0, description="Changes an email would have made to items changed by hand: kept as suggestions."
    )
    commitments_created: int = Field(0, description="New tasks the person promised in mail they sent.")
    waiting_created: int = Field(0, description="New items the person waits for, asked in mail they sent.")
    item_answers_refused: int = Field(
        0, description="Item changes Gemini named that were not applied: an item not given, a sentence not found."
    )
    old_asks_skipped: int = Field(
        0, description="New items not written: their sentence stands in an earlier item of the conversation."
    )


class RunLLMOut(Schema):
    calls: int
    prompt_tokens: int
    output_tokens: int
    prompt_version: str = Field(
        "", description="The version of the prompt the run sent: compare token and task figures within one."
    )


class RunMailboxOut(Schema):
    provider: str
    address: str
    before: str | None
    after: str | None
    status: str
    error_code: str
    error: str
    unread: int = 0  # emails that failed to read this run (read again next time)
    resync: str = ""  # "expired" or "query_changed" when the mailbox was resynced
    not_read: int = 0  # emails of a resync's window over its bound, not read
    note: str = ""  # what a resync did, in plain words


class RunOut(Schema):
    id: int
    trigger: str
    status: str
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    counts: RunCountsOut
    llm: RunLLMOut
    mailboxes: list[RunMailboxOut]
    rejections: list[dict[str, Any]]
    error_code: str
    error_message: str
    cancel_requested_at: datetime | None = Field(
        None, description="When you asked the run to stop (it ends `cancelled` at its next batch boundary)."
    )


class RunErrorOut(Schema):
    """The API's one error shape, for a status only some operations answer (409). config/api.py's ErrorOut, which
    this module cannot import: config/api.py imports the routers."""

    code: str
    message: str
    extra: dict[str, Any]


class RunPage(Schema):
    items: list[RunOut]
    next: str | None = Field(description="The URL of the next page, or null on the last one.")


RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The run's id.")]


def run_list(*, user: User) -> QuerySet[ExtractionRun]:
    """The person's runs, newest first. (A selector; here until extraction/selectors.py takes it.)"""
    return ExtractionRun.objects.filter(user=user).order_by("-created_at", "-id")


def run_out(run: ExtractionRun) -> dict[str, object]:
    """The run record, with when its stop was asked. (Here until run_as_dict in extraction/selectors.py has it.)"""
    return {**run_as_dict(run), "cancel_requested_at": run.cancel_requested_at}


@router.get("/extraction/runs", response=RunPage, summary="List your extraction runs (a page)")
def list_runs(request: HttpRequest, page: Query[PageParams]) -> dict[str, Any]:
    result = page_of(request, run_list(user=request_user(request)), page)
    result["items"] = [run_out(run) for run in result["items"]]
    return result


@router.post(
    "/extraction/runs",
    response={202: RunOut},
    summary="Extract now",
    description="Queues a run (or returns the one already waiting). Limited like the button: past the limit, "
    "a 429 with `Retry-After`. Without AI consent, a 403 `no_consent` (`extra.consent_url`: where to give it), "
    "and no run is queued.",
)
def start_run(request: HttpRequest) -> Status[Any]:
    user = request_user(request)
    extraction_consent_check(user=user)
    extraction_rate_check(request=request)
    run, _ = extraction_run_request(user=user, trigger=ExtractionRun.Trigger.API)
    return Status(202, run_out(run))


@router.get("/extraction/runs/{int:run_id}", response=RunOut, summary="Read one run")
def get_run(request: HttpRequest, run_id: RunId) -> dict[str, object]:
    return run_out(run_get(user=request_user(request), run_id=run_id))


@router.post(
    "/extraction/runs/{int:run_id}/cancel",
    response={200: RunOut, 202: RunOut, 409: RunErrorOut},
    summary="Stop a run",
    description="A queued run ends `cancelled` at once: 200. A running run ends `cancelled` at its next batch "
    "boundary: 202, with `cancel_requested_at` set (asking again changes nothing). What it wrote stays; no "
    "mailbox position moves, and the next run reads the rest. A run that has finished: 409 `run_finished` "
    "(`extra.status`: how it ended). Another person's run, or none: 404 `run_not_found`.",
)
def cancel_run(request: HttpRequest, run_id: RunId) -> Status[Any]:
    run = extraction_run_cancel(user=request_user(request), run_id=run_id)
    return Status(200 if run.is_finished else 202, run_out(run))


MutedId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The muted sender's id.")]


class MutedSenderOut(Schema):
    id: int
    address: str
    reason: str = Field(description="`sender` (never make tasks from this sender) or `not_a_task`.")
    task_title: str = Field(description="The task it was muted from, to recognise it by.")
    created_at: datetime
    skipped: int = Field(0, description="Emails of theirs skipped so far.")


class MuteIn(Schema):
    task_id: int = Field(ge=1, le=2**63 - 1, description="The task whose email's sender to mute.")
    reason: Literal["sender", "not_a_task"] = Field("sender", description="`sender` or `not_a_task`.")


def muted_out(muted: Muted) -> dict[str, Any]:
    return {
        "id": muted.pk,
        "address": muted.address,
        "reason": muted.reason,
        "task_title": muted.task_title,
        "created_at": muted.since,
        "skipped": muted.skipped,
    }


@router.get("/muted-senders", response=list[MutedSenderOut], summary="List the senders you muted")
def list_muted_senders(request: HttpRequest) -> list[dict[str, Any]]:
    return [muted_out(m) for m in muted_sender_list(user=request_user(request))]


@router.post(
    "/muted-senders",
    response={201: MutedSenderOut},
    summary="Make no more tasks from the sender of a task's email",
    description="Refused with `own_address` for the person's own addresses (the account's, any connected "
    "mailbox's): their Sent mail is where promises and waiting items are found.",
)
def mute_sender(request: HttpRequest, payload: MuteIn) -> Status[Any]:
    user = request_user(request)
    muted = sender_mute(user=user, task=task_get(user=user, task_id=payload.task_id), reason=payload.reason)
    return Status(201, next(muted_out(m) for m in muted_sender_list(user=user) if m.pk == muted.pk))


@router.delete("/muted-senders/{int:muted_id}", response={204: None}, summary="Read a muted sender's mail again")
def unmute_sender(request: HttpRequest, muted_id: MutedId) -> Status[None]:
    sender_unmute(user=request_user(request), muted_id=muted_id)
    return Status(204, None)
