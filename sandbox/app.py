"""The sandbox WSGI application: one Flask app, one blueprint per service, plus the control API."""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import Any

from flask import Flask, Response, current_app, g, request

from sandbox.state import SERVICES, Fault, SandboxState

# Google's RPC status names, used in the error bodies of Google services.
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def sandbox_state() -> SandboxState:
    state: SandboxState = current_app.config["SANDBOX_STATE"]
    return state


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(payload),
        status=status,
        headers=headers or {},
        content_type="application/json; charset=UTF-8",
    )


def default_error_body(
    service: str, status: int, *, reason: str | None = None, retry_after: str | None = None
) -> dict[str, Any]:
    """The error body the real service sends for `status`, in that service's shape (for Gmail, with the
    `errors[].reason` `reason`, by default the usual one for the status: see sandbox.gmail.error_body)."""
    if service == "gmail":
        from sandbox.gmail import error_body

        return error_body(status, reason, retry_after=retry_after)
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    if service in ("graph", "microsoft"):
        code = {429: "TooManyRequests", 503: "ServiceUnavailable", 401: "InvalidAuthenticationToken"}
        return {"error": {"code": code.get(status, phrase.replace(" ", "")), "message": phrase, "innerError": {}}}
    return {"error": {"code": status, "message": phrase, "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}


def fault_response(service: str, fault: Fault) -> tuple[int, dict[str, str], str]:
    """Status, headers and body text of a fault, after its delay."""
    if fault.delay_ms:
        time.sleep(fault.delay_ms / 1000)
    headers = {"Content-Type": "application/json; charset=UTF-8", **fault.headers}
    if fault.status == 429 and not any(k.lower() == "retry-after" for k in headers):
        headers["Retry-After"] = "1"
    retry_after = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    body = (
        fault.body
        if fault.body is not None
        else default_error_body(service, fault.status, reason=fault.reason, retry_after=retry_after)
    )
    text = body if isinstance(body, str) else json.dumps(body)
    return fault.status, headers, text


def create_app(state: SandboxState | None = None, *, base_url: str = "", tls_base_url: str = "") -> Flask:
    """Build the sandbox app. `base_url` is how clients reach it (used in links it hands out);
    `tls_base_url` is its HTTPS listener, used in the links of Microsoft identity and Graph."""
    # conversations, dns, graph_subscriptions, mailview and push only add routes (to the graph and control
    # blueprints): imported for that.
    from sandbox import (  # noqa: F401
        control,
        conversations,
        dns,
        gemini,
        gmail,
        google_oauth,
        graph,
        graph_subscriptions,
        mailview,
        microsoft,
        pubsub,
        push,
        webpush,
    )

    app = Flask("sandbox", template_folder="templates")
    app.config["SANDBOX_STATE"] = state or SandboxState()
    app.config["SANDBOX_BASE_URL"] = base_url.rstrip("/")
    app.config["SANDBOX_TLS_BASE_URL"] = tls_base_url.rstrip("/")
    for module in (control, google_oauth, gmail, gemini, microsoft, graph, pubsub, webpush):
        app.register_blueprint(module.blueprint)
    pubsub.signing_keys(app.config["SANDBOX_STATE"])  # made at start: the kid stays for the server's life

    @app.before_request
    def log_and_fault() -> Response | None:
        service = request.blueprint or ""
        if service not in SERVICES:
            return None
        st = sandbox_state()
        body = request.get_data(as_text=True)
        headers = {
            name: ", ".join(request.headers.getlist(name))
            for name in dict.fromkeys(request.headers.keys())
            if name.lower() != "authorization"  # the log is readable by anyone who can reach the sandbox
        }
        g.logged = st.record(
            service, request.method, request.path, request.query_string.decode(), body, headers=headers
        )
        target = f"{request.method} {request.full_path.rstrip('?')}"
        fault = st.take_fault(service, target, body)
        if fault is None:
            return None
        status, headers, text = fault_response(service, fault)
        return Response(text, status=status, headers=headers)

    @app.after_request
    def remember_status(response: Response) -> Response:
        logged = g.get("logged")
        if logged is not None:
            logged.status = response.status_code
        return response

    @app.errorhandler(404)
    def not_found(_: Exception) -> Response:
        service = request.blueprint or "control"
        if service == "control":
            return json_response({"error": {"code": "not_found", "message": f"No route {request.path}"}}, 404)
        return json_response(default_error_body(service, 404), 404)

    @app.errorhandler(405)
    def wrong_method(_: Exception) -> Response:
        return json_response(
            {"error": {"code": "method_not_allowed", "message": f"{request.method} is not allowed on {request.path}"}},
            405,
        )

    return app
