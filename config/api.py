"""The NinjaAPI root: every app's router is joined here, and every error has one JSON shape."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import django_auth

from config.errors import ApplicationError, RateLimitedError

api = NinjaAPI(title="Tasklift API", version="1", auth=django_auth, urls_namespace="api")


def error_body(code: str, message: str, extra: dict[str, object] | None = None) -> dict[str, object]:
    return {"code": code, "message": message, "extra": extra or {}}


def api_not_found(request: HttpRequest) -> HttpResponse:
    """Unknown API paths answer in the API's error shape, not with the HTML 404 page."""
    return JsonResponse(error_body("not_found", f"There is no API endpoint at {request.path}."), status=404)


@api.exception_handler(ApplicationError)
def application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    response = api.create_response(request, error_body(exc.code, exc.message, exc.extra), status=exc.status)
    if isinstance(exc, RateLimitedError):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(NinjaValidationError)
def validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    fields = [
        {
            "field": ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "payload")),
            "message": err.get("msg"),
        }
        for err in exc.errors
    ]
    return api.create_response(
        request, error_body("invalid_input", "Some fields are not valid.", {"fields": fields}), status=422
    )


@api.exception_handler(AuthenticationError)
def authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return api.create_response(request, error_body("not_authenticated", "Log in to use the API."), status=401)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return api.create_response(request, error_body("http_error", str(exc)), status=exc.status_code)


def _join_routers() -> None:
    from extraction.api import router as extraction_router
    from tasks.api import router as tasks_router

    api.add_router("/", tasks_router)
    api.add_router("/", extraction_router)


_join_routers()
