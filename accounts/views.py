from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.consent import CONSENT_NOT_SENT, CONSENT_SENT, CONSENT_TERMS, CONSENT_TITLE, CONSENT_VERSION
from accounts.forms import AccessTokenForm, LoginForm, SignupForm, TimezoneForm
from accounts.models import PersonalAccessToken, User
from accounts.selectors import access_token_list, consent_current
from accounts.services import (
    access_token_create,
    access_token_revoke,
    consent_grant,
    consent_revoke,
    user_create,
    user_set_timezone,
)
from config.errors import ApplicationError
from config.http import request_user


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_create(
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
            name=form.cleaned_data.get("name", ""),
            timezone_name=form.cleaned_data.get("timezone") or "UTC",  # an unknown name falls back to UTC
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("home")
    return render(request, "accounts/signup.html", {"form": form}, status=400 if form.errors else 200)


class TaskliftLoginView(LoginView):
    authentication_form = LoginForm
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form: LoginForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        response.status_code = 400
        return response


@login_required
@require_http_methods(["GET", "POST"])
def consent(request: HttpRequest) -> HttpResponse:
    """Show the consent text; POST action=grant or action=revoke."""
    user = request.user
    assert isinstance(user, User)
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "grant":
            consent_grant(user=user)
            messages.success(request, "Thank you. Tasklift may now send your new email to Gemini to find tasks.")
            return redirect("home")
        if action == "revoke":
            consent_revoke(user=user)
            messages.success(request, "Consent revoked. No more email will be sent to Gemini.")
            return redirect("consent")
        messages.error(request, "Choose to give or to revoke consent.")
        return redirect("consent")
    context = {
        "current": consent_current(user=user),
        "title": CONSENT_TITLE,
        "sent": CONSENT_SENT,
        "not_sent": CONSENT_NOT_SENT,
        "terms": CONSENT_TERMS,
        "version": CONSENT_VERSION,
    }
    return render(request, "accounts/consent.html", context)


# Settings: time zone and personal access tokens -----------------------------------------------------


def _settings_page(
    request: HttpRequest,
    *,
    timezone_form: TimezoneForm | None = None,
    token_form: AccessTokenForm | None = None,
    new_token: tuple[PersonalAccessToken, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    user = request_user(request)
    # A view-level read for now; belongs in accounts/selectors.py as `access_token_list(user=)`.
    tokens = access_token_list(user=user)
    context = {
        "timezone_form": timezone_form or TimezoneForm(initial={"timezone": user.timezone}),
        "token_form": token_form or AccessTokenForm(),
        "tokens": list(tokens),
        "new_token": new_token[0] if new_token else None,
        "new_secret": new_token[1] if new_token else "",
    }
    return render(request, "accounts/settings.html", context, status=status)


@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    return _settings_page(request)


@login_required
@require_POST
def settings_timezone(request: HttpRequest) -> HttpResponse:
    form = TimezoneForm(request.POST)
    if form.is_valid():
        try:
            user_set_timezone(user=request_user(request), timezone_name=form.cleaned_data["timezone"])
        except ApplicationError as error:
            form.add_error("timezone", error.message)
        else:
            messages.success(request, f"Dates and times are now shown in {form.cleaned_data['timezone']} time.")
            return redirect("settings")
    return _settings_page(request, timezone_form=form, status=400)


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    """Make a token and show it this once: only its hash is kept, so the page is the only place it appears."""
    form = AccessTokenForm(request.POST)
    if form.is_valid():
        try:
            created = access_token_create(user=request_user(request), name=form.cleaned_data["name"])
        except ApplicationError as error:
            form.add_error("name", error.message)
        else:
            response = _settings_page(request, new_token=created, status=201)
            response["Cache-Control"] = "no-store"  # the secret must not stay in a cache
            return response
    return _settings_page(request, token_form=form, status=400)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    access_token_revoke(user=request_user(request), token_id=token_id)
    messages.success(request, "The token is revoked: programs using it can no longer reach your tasks.")
    return redirect("settings")
