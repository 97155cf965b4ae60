"""The control API under /_sandbox/: faults, the request log, settings and reset.

Service modules add their own control routes (mailboxes, tokens) to this blueprint through
`control_route`, so the whole control surface lives under one prefix. Every input is validated with
pydantic and a malformed request gets a 400 naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from flask import Blueprint, Response, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sandbox.app import json_response, sandbox_state
from sandbox.state import SERVICES

blueprint = Blueprint("control", __name__, url_prefix="/_sandbox")

Model = TypeVar("Model", bound=BaseModel)


class ControlError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@blueprint.errorhandler(ControlError)
def control_error(error: ControlError) -> Response:
    return json_response({"error": {"code": error.code, "message": error.message}}, error.status)


def parse_body(model: type[Model]) -> Model:
    """Parse the JSON request body into `model`, or raise a ControlError that names the problem."""
    data = request.get_json(silent=True)
    if data is None:
        if request.get_data():
            raise ControlError("invalid_json", "The request body is not valid JSON.")
        data = {}
    if not isinstance(data, dict):
        raise ControlError("invalid_body", "The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors())
        raise ControlError("invalid_field", problems) from exc


def control_route(rule: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a control route on the shared /_sandbox blueprint (used by the service modules)."""
    return blueprint.route(rule, **options)


class FaultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: Literal["google_oauth", "gmail", "gemini", "microsoft", "graph", "pubsub", "webpush"]
    status: int = Field(ge=100, le=599)
    body: dict[str, Any] | list[Any] | str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    delay_ms: int = Field(default=0, ge=0, le=120_000)
    times: int | None = Field(default=1, ge=1)
    route: str | None = None
    match: str | None = None
    reason: str | None = None  # Gmail only: the errors[].reason of the default body

    @model_validator(mode="after")
    def known_reason(self) -> FaultIn:
        if self.reason is None:
            return self
        from sandbox.gmail import ERROR_REASONS

        if self.service != "gmail":
            raise ValueError("reason is only for gmail faults")
        if self.reason not in ERROR_REASONS:
            raise ValueError(f"reason must be one of {', '.join(ERROR_REASONS)}")
        if self.body is not None:
            raise ValueError("give reason or body, not both")
        return self


class SettingsIn(BaseModel):
    """Settings to change; those left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    gemini_latency_ms: int | None = Field(default=None, ge=0, le=120_000)
    gmail_push_rate_limit: bool | None = None
    push_retry_delays_ms: list[Annotated[int, Field(ge=0, le=60_000)]] | None = Field(default=None, max_length=20)
    graph_validation_timeout_ms: int | None = Field(default=None, ge=1, le=60_000)
    gmail_watch_pushes_every_change: bool | None = None
    # Part of an ask sentence (any case) -> the sentence Gemini quotes for that task instead ({} for none).
    gemini_sentences: (
        dict[Annotated[str, Field(min_length=1, max_length=500)], Annotated[str, Field(max_length=2_000)]] | None
    ) = Field(default=None, max_length=50)


@blueprint.post("/reset")
def reset() -> Response:
    sandbox_state().reset()
    return json_response({"ok": True})


@blueprint.post("/faults")
def add_fault() -> Response:
    spec = parse_body(FaultIn)
    if spec.route:
        import re

        try:
            re.compile(spec.route)
        except re.error as exc:
            raise ControlError("invalid_field", f"route: not a valid regular expression ({exc})") from exc
    fault = sandbox_state().add_fault(**spec.model_dump())
    return json_response(fault.as_dict(), 201)


@blueprint.get("/faults")
def list_faults() -> Response:
    st = sandbox_state()
    with st.lock:
        return json_response({"faults": [f.as_dict() for f in st.faults]})


@blueprint.delete("/faults")
def clear_faults() -> Response:
    service = request.args.get("service")
    if service is not None and service not in SERVICES:
        raise ControlError("invalid_field", f"service: must be one of {', '.join(SERVICES)}")
    sandbox_state().clear_faults(service)
    return json_response({"ok": True})


@blueprint.delete("/faults/<int:fault_id>")
def remove_fault(fault_id: int) -> Response:
    if not sandbox_state().remove_fault(fault_id):
        raise ControlError("not_found", f"no fault {fault_id}", 404)
    return json_response({"ok": True})


@blueprint.get("/requests")
def request_log() -> Response:
    service = request.args.get("service")
    if service is not None and service not in SERVICES:
        raise ControlError("invalid_field", f"service: must be one of {', '.join(SERVICES)}")
    return json_response({"requests": [e.as_dict() for e in sandbox_state().requests_for(service)]})


@blueprint.delete("/requests")
def clear_request_log() -> Response:
    st = sandbox_state()
    with st.lock:
        st.log.clear()
    return json_response({"ok": True})


@blueprint.put("/settings")
def put_settings() -> Response:
    spec = parse_body(SettingsIn)
    st = sandbox_state()
    with st.lock:
        st.settings.update({k: v for k, v in spec.model_dump().items() if v is not None})
        return json_response(st.settings)


@blueprint.get("/settings")
def get_settings() -> Response:
    return json_response(sandbox_state().settings)
