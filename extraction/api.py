"""The extraction API: start a run (rate-limited like the button) and read run records."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from config.http import request_user
from extraction.models import ExtractionRun
from extraction.ratelimit import extraction_rate_check
from extraction.selectors import run_as_dict, run_get
from extraction.services import extraction_run_request

router = Router(tags=["extraction"])


@router.post("/extraction/runs", response={202: dict[str, Any]})
def start_run(request: HttpRequest) -> Status[Any]:
    extraction_rate_check(request=request)
    run, _ = extraction_run_request(user=request_user(request), trigger=ExtractionRun.Trigger.API)
    return Status(202, run_as_dict(run))


@router.get("/extraction/runs/{run_id}", response=dict[str, Any])
def get_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    return run_as_dict(run_get(user=request_user(request), run_id=run_id))
