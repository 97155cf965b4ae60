"""The NinjaAPI root: every app's router is joined here, and every error has one JSON shape,
`{"code", "message", "extra"}`, declared for every operation in the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.urls import URLPattern, URLResolver
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.openapi.docs import DocsBase
from ninja.openapi.schema import OpenAPISchema

from config.auth import NotAuthenticatedError, api_auth
from config.errors import ApplicationError, WaitError, error_body

API_DESCRIPTION = """\
Tasklift's API for programs and for the browser.

**Authentication.** Programs send a personal access token: `Authorization: Bearer tl_…` (make one with
`POST /api/tokens` while signed in; it is shown once). The browser uses its session, and sends the
`csrftoken` cookie's value as `X-CSRFToken` on writes. No credentials is a 401; a session write without
CSRF is a 403.

**Lists** are pages: `{"items": [...], "next": url or null}`; follow `next` until it is null
(`limit` up to 100, default 50).

**Errors** all have one shape: `{"code": "task_not_found", "message": "There is no such task.", "extra": {}}`.
`code` is stable for programs, `message` is written for people. A 422 names the wrong fields in
`extra.fields`; a 429 says in `Retry-After` (and `extra.retry_after`) how many seconds to wait.
"""


class ErrorOut(Schema):
    code: str
    message: str
    extra: dict[str, Any]


ERROR_STATUSES: dict[int, str] = {
    400: "The request could not be read (malformed JSON or form body) or was refused.",
    401: "No credentials, or a token that is not valid.",
    403: "Authenticated, but not allowed (a session write without CSRF; a token where a session is needed).",
    404: "No such object among yours (another person's object is not found either).",
    405: "The path exists but not with this method.",
    413: "The request body is larger than the server accepts.",
    422: "Some input is not valid; `extra.fields` lists each wrong field.",
    429: "Too many requests; wait `Retry-After` seconds.",
}


def _unauthenticated(response: HttpResponse) -> HttpResponse:
    response["WWW-Authenticate"] = 'Bearer realm="tasklift"'
    return response


# Offline docs -------------------------------------------------------------------------------------


class OfflineSwagger(DocsBase):
    """Swagger UI from our own static files (static/vendor/swagger-ui), so /api/docs works without
    internet, started by a static script (templates/api/docs.html): no inline script, as the
    Content-Security-Policy demands."""

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        config = {
            "url": self.get_openapi_url(api, kwargs),
            "dom_id": "#swagger-ui",
            # Off: a deep link puts each path's <a> inside the operation's <button> (axe: nested-interactive),
            # which screen readers announce as one control, so the link cannot be reached.
            "deepLinking": False,
            "validatorUrl": None,  # the online validator badge would call swagger.io
        }
        return render(request, "api/docs.html", {"title": api.title, "config": config})


# The API ------------------------------------------------------------------------------------------


class TaskliftAPI(NinjaAPI):
    """NinjaAPI whose every answer is JSON in the error shape (a wrong method too), with every error
    status declared on every operation."""

    def _get_urls(self) -> list[URLResolver | URLPattern]:
        urls = super()._get_urls()
        for url in urls:
            if isinstance(url, URLPattern):
                url.callback = _json_errors(url.callback)
        return urls

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas["Error"] = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
        for operations in schema["paths"].values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_STATUSES.items():
                    response: dict[str, Any] = {
                        "description": description,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    }
                    if status == 429:
                        response["headers"] = {
                            "Retry-After": {
                                "description": "Seconds to wait before trying again.",
                                "required": True,
                                "schema": {"type": "integer", "minimum": 1},
                            }
                        }
                    responses.setdefault(status, response)
        return schema


def _json_errors(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            response = view(request, *args, **kwargs)
        except Http404:  # the API root, which has no operation of its own
            return api_not_found(request)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            answer = JsonResponse(
                error_body(
                    "method_not_allowed",
                    f"{request.method} is not allowed on {request.path}; use {allowed}.",
                    {"allowed": allowed.split(", ")},
                ),
                status=405,
            )
            answer["Allow"] = allowed
            return answer
        return response

    return wrapper


api = TaskliftAPI(
    title="Tasklift API",
    version="1",
    description=API_DESCRIPTION,
    auth=api_auth,
    urls_namespace="api",
    docs=OfflineSwagger(),
    # API_DOCS: "public" (development), "staff" (production's default: admins only), or "off".
    docs_decorator=staff_member_required if settings.API_DOCS == "staff" else None,
    openapi_url=None if settings.API_DOCS == "off" else "/openapi.json",
    docs_url=None if settings.API_DOCS == "off" else "/docs",
)


@csrf_exempt  # a 404 whatever the method: a DELETE to a wrong path is not a CSRF matter
def api_not_found(request: HttpRequest) -> HttpResponse:
    """Unknown API paths answer in the API's error shape, not with the HTML 404 page."""
    return JsonResponse(error_body("not_found", f"There is no API endpoint at {request.path}."), status=404)


# Errors -------------------------------------------------------------------------------------------


@api.exception_handler(ApplicationError)
def application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    status, extra = exc.status, exc.extra
    if status == 400 and isinstance(extra.get("field"), str):
        # A service refusing one field is a validation error like the schema's own: same status, and
        # the same `extra.fields` list, so a program handles both one way.
        status, extra = 422, {**extra, "fields": [{"field": extra["field"], "message": exc.message}]}
    response = api.create_response(request, error_body(exc.code, exc.message, extra), status=status)
    if isinstance(exc, WaitError):
        response["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, NotAuthenticatedError):
        _unauthenticated(response)
    return response


@api.exception_handler(NinjaValidationError)
def validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    fields = [{"field": _field_name(err.get("loc", ())), "message": err.get("msg")} for err in exc.errors]
    return api.create_response(
        request, error_body("invalid_input", "Some fields are not valid.", {"fields": fields}), status=422
    )


def _field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    """`title` for ("body", "payload", "title"), `limit` for ("query", "limit"): the name the caller sent."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie", "form", "file"):
        parts = parts[1:]
    if parts and parts[0] == "payload":
        parts = parts[1:]
    return ".".join(str(p) for p in parts)


@api.exception_handler(AuthenticationError)
def authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    body = error_body(
        "not_authenticated", "Log in, or send a personal access token as 'Authorization: Bearer <token>'."
    )
    return _unauthenticated(api.create_response(request, body, status=401))


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        body = error_body(
            "malformed_body",
            "The request body is not valid JSON. Send a JSON object with Content-Type: application/json.",
        )
    else:
        body = error_body("http_error", str(exc))
    return api.create_response(request, body, status=exc.status_code)


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(request, error_body("not_found", "There is no such object."), status=404)


@api.exception_handler(RequestDataTooBig)
def body_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    message = "The request body is too large. Send less at once (split a bulk change into several)."
    return api.create_response(request, error_body("body_too_large", message), status=413)


@api.exception_handler(TooManyFieldsSent)
def too_many_fields(request: HttpRequest, exc: TooManyFieldsSent) -> HttpResponse:
    return api.create_response(request, error_body("body_too_large", "The request has too many fields."), status=413)


@api.exception_handler(TooManyFilesSent)
def too_many_files(request: HttpRequest, exc: TooManyFilesSent) -> HttpResponse:
    return api.create_response(request, error_body("body_too_large", "The request has too many files."), status=413)


@api.exception_handler(MultiPartParserError)
def malformed_form(request: HttpRequest, exc: MultiPartParserError) -> HttpResponse:
    body = error_body("malformed_body", "The form body could not be read. Send a JSON object instead.")
    return api.create_response(request, body, status=400)


@api.exception_handler(SuspiciousOperation)
def suspicious(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    return api.create_response(request, error_body("bad_request", "The request could not be read."), status=400)


def _join_routers() -> None:
    from accounts.api import router as accounts_router
    from extraction.api import router as extraction_router
    from integrations.api import router as integrations_router
    from tasks.api import router as tasks_router

    api.add_router("/", tasks_router)
    api.add_router("/", extraction_router)
    api.add_router("/", integrations_router)
    api.add_router("/", accounts_router)


_join_routers()
