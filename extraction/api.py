"""The extraction API: start a run (rate-limited like the button) and read run records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status

from config.http import request_user
from extraction.models import ExtractionRun
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_as_dict, run_get
from extraction.services import extraction_run_request

router = Router(tags=["extraction"])


class RunCountsOut(Schema):
    fetched: int
    already_done: int
    sent_to_llm: int
    tasks_created: int
    quarantined: int


class RunLLMOut(Schema):
    calls: int
    prompt_tokens: int
    output_tokens: int


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


@router.post("/extraction/runs", response={202: RunOut})
def start_run(request: HttpRequest) -> Status[Any]:
    extraction_rate_check(request=request)
    run, _ = extraction_run_request(user=request_user(request), trigger=ExtractionRun.Trigger.API)
    return Status(202, run_as_dict(run))


@router.get("/extraction/runs/{run_id}", response=RunOut)
def get_run(request: HttpRequest, run_id: int) -> dict[str, object]:
    return run_as_dict(run_get(user=request_user(request), run_id=run_id))
