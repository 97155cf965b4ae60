from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, PasswordResetConfirmView, PasswordResetView
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.consent import CHANGES, CONSENT_NOT_SENT, CONSENT_SENT, CONSENT_TERMS, CONSENT_TITLE, CONSENT_VERSION
from accounts.counting import CountingUnavailable
from accounts.emails import MAIL_UNAVAILABLE, mail_server_ready
from accounts.forms import (
    AccessTokenForm,
    ConfirmPasswordForm,
    EmailForm,
    LanguageForm,
    LoginForm,
    ResetRequestForm,
    SignupForm,
    TimezoneForm,
)
from accounts.languages import DATE_ORDERS, LANGUAGES, language_from_browser
from accounts.models import PersonalAccessToken, User
from accounts.ratelimit import AccountAction, account_rate_check
from accounts.selectors import access_token_list, consent_in_force
from accounts.services import (
    access_token_create,
    access_token_revoke,
    consent_grant,
    consent_revoke,
    email_confirmation_resend,
    user_email_confirm,
    user_password_reset_done,
    user_set_language,
    user_set_timezone,
    user_signup,
)
from accounts.throttle import (
    LoginThrottled,
    device_cookie_give,
    login_attempt_begin,
    login_attempt_succeeded,
    login_throttled_response,
)
from accounts.verification import VerificationLinkExpired, VerificationLinkInvalid, verification_link_user
from config.errors import ApplicationError, RateLimitedError
from config.http import request_user
from config.unavailable import unavailable_response

# The address a sign-up or a resend sent an email to, for the "check your inbox" page.
SESSION_EMAIL = "accounts.signup_email"
# The account this browser just signed up (set only when an account was made): its confirmation link opened
# here logs in without asking for the password again, since this browser typed it. Server-side sessions
# (the database) keep it invisible to the client, so a taken address answers the same.
SESSION_PENDING = "accounts.signup_pending"


def _rate_limited(request: HttpRequest, error: RateLimitedError) -> HttpResponse:
    response = render(
        request,
        "accounts/rate_limited.html",
        {"message": error.message, "wait_minutes": -(-error.retry_after // 60)},
        status=429,
    )
    response["Retry-After"] = str(error.retry_after)
    return response


def _emails_refused(request: HttpRequest, *, action: AccountAction, recipient: str) -> HttpResponse | None:
    """The page refusing a request that would send an account email, or None to go on (accounts/ratelimit.py)."""
    try:
        account_rate_check(request=request, action=action, recipient=recipient)
    except RateLimitedError as error:
        return _rate_limited(request, error)
    except CountingUnavailable:
        return unavailable_response(request)
    return None


def _email_simulated() -> bool:
    """Development without SMTP: the pages say where the email went instead of an inbox."""
    return str(settings.EMAIL_BACKEND) == "django.core.mail.backends.filebased.EmailBackend"


# Sign-up and email confirmation -------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    """Whether or not the address has an account, a valid sign-up answers with the "check your inbox" page and
    sends one email (a confirmation link, or how to log in): the page never tells which."""
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        if refused := _emails_refused(request, action="signup", recipient=email):
            return refused
        if not mail_server_ready():  # before the account is made: nothing changes, and it can be tried again
            form.add_error(None, MAIL_UNAVAILABLE)
            return render(request, "accounts/signup.html", {"form": form}, status=503)
        language, date_order = language_from_browser(request.headers.get("Accept-Language", ""))  # the browser's
        user = user_signup(
            email=email,
            password=form.cleaned_data["password1"],
            name=form.cleaned_data.get("name", ""),
            timezone_name=form.cleaned_data.get("timezone") or "UTC",  # an unknown name falls back to UTC
            language=language,
            date_order=date_order,
        )
        request.session[SESSION_EMAIL] = email
        if user is not None:
            request.session[SESSION_PENDING] = user.pk
        return redirect("signup_done")
    return render(request, "accounts/signup.html", {"form": form}, status=400 if form.errors else 200)


def _check_inbox(request: HttpRequest, *, form: Form | None = None, status: int = 200) -> HttpResponse:
    email = request.session.get(SESSION_EMAIL, "")
    context = {
        "email": email,
        "form": form or EmailForm(initial={"email": email}),
        "max_age_hours": settings.EMAIL_VERIFICATION_MAX_AGE_HOURS,
        "email_simulated": _email_simulated(),
        "mail_dir": settings.EMAIL_FILE_PATH,
    }
    return render(request, "accounts/signup_done.html", context, status=status)


@require_GET
def signup_done(request: HttpRequest) -> HttpResponse:
    return _check_inbox(request)


@require_http_methods(["GET", "POST"])
def signup_resend(request: HttpRequest) -> HttpResponse:
    """Send the confirmation link again; answers the same for any address (see email_confirmation_resend)."""
    if request.method == "GET":
        return _check_inbox(request)
    form = EmailForm(request.POST)
    if not form.is_valid():
        return _check_inbox(request, form=form, status=400)
    email = form.cleaned_data["email"].strip().lower()
    if refused := _emails_refused(request, action="resend", recipient=email):
        return refused
    if not mail_server_ready():
        form.add_error(None, MAIL_UNAVAILABLE)
        return _check_inbox(request, form=form, status=503)
    email_confirmation_resend(email=email)
    request.session[SESSION_EMAIL] = email
    messages.success(request, f"We sent the email to {email} again.")
    return redirect("signup_done")


def _confirm_and_log_in(request: HttpRequest, user: User) -> HttpResponse:
    user_email_confirm(user=user)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session.pop(SESSION_PENDING, None)
    request.session.pop(SESSION_EMAIL, None)
    messages.success(request, f"Thank you: {user.email} is confirmed. Welcome to Tasklift.")
    return redirect("home")


@require_http_methods(["GET", "POST"])
def signup_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link of the confirmation email. Opened in the browser that signed up (or by the signed-in account
    itself) it confirms and logs in; elsewhere it asks for the account's password first, so that a person who
    clicks the link of a sign-up someone else made with their address does not confirm an account whose
    password that someone knows. That password is counted like a login's, for the account the link names
    (never for what the form sends)."""
    try:
        user = verification_link_user(token=token)
    except VerificationLinkExpired as error:
        context = {"message": error.message, "form": EmailForm(initial={"email": error.email})}
        return render(request, "accounts/confirm_invalid.html", context, status=400)
    except VerificationLinkInvalid as error:
        context = {"message": error.message, "form": EmailForm()}
        return render(request, "accounts/confirm_invalid.html", context, status=400)
    if user.email_verified:
        messages.info(request, f"{user.email} is already confirmed.")
        return redirect("home" if request.user.pk == user.pk else "login")
    if request.session.get(SESSION_PENDING) == user.pk or request.user.pk == user.pk:
        return _confirm_and_log_in(request, user)
    form = ConfirmPasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            attempt = login_attempt_begin(request=request, account=user.email)
        except LoginThrottled as refusal:
            return login_throttled_response(request, refusal)
        if user.check_password(form.cleaned_data["password"]):
            response = _confirm_and_log_in(request, user)
            login_attempt_succeeded(attempt=attempt, request=request, response=response)
            return response
        form.add_error("password", "That is not the password of this account. Forgot it? Set a new one below.")
    context = {"form": form, "email": user.email}
    return render(request, "accounts/confirm.html", context, status=400 if form.errors else 200)


# Log in and password reset ------------------------------------------------------------------------


class TaskliftLoginView(LoginView):
    authentication_form = LoginForm
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form: LoginForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        response.status_code = 400
        return response


class TaskliftPasswordResetView(PasswordResetView):
    """Asks for an address and answers "check your inbox" whether or not it has an account (Django's own
    behaviour); rate-limited like sign-up. The email's link goes to SITE_URL, never to the request's Host."""

    form_class = ResetRequestForm
    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form: ResetRequestForm) -> HttpResponse:  # type: ignore[override]
        if refused := _emails_refused(self.request, action="password-reset", recipient=form.cleaned_data["email"]):
            return refused
        if not mail_server_ready():  # for every address alike: the page must not tell which have an account
            form.add_error(None, MAIL_UNAVAILABLE)
            return self.render_to_response(self.get_context_data(form=form), status=503)
        self.extra_email_context = {
            "site_url": settings.SITE_URL,
            "timeout_minutes": settings.PASSWORD_RESET_TIMEOUT // 60,
        }
        return super().form_valid(form)

    def form_invalid(self, form: ResetRequestForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        response.status_code = 400
        return response


class TaskliftPasswordResetConfirmView(PasswordResetConfirmView):
    """The link of the reset email. It works while logging in is slowed for too many failed attempts; setting
    the password confirms the address (user_password_reset_done) and gives this browser the account's device
    cookie, so that it logs in whatever strangers keep guessing (accounts/throttle.py). The strangers' count is
    left as it is: a reset must not give them a fresh start."""

    template_name = "registration/password_reset_confirm.html"

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        user_password_reset_done(user=form.user)
        device_cookie_give(response=response, email=form.user.email)
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        response.status_code = 400
        return response

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        if not context.get("validlink"):
            kwargs["status"] = 400  # an expired, used or mangled link
        return super().render_to_response(context, **kwargs)


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
        "current": (current := consent_in_force(user=user)),
        # Agreed to an earlier text: what changed since, newest last (each version's change said once).
        "changes": [
            CHANGES[v]
            for v in sorted(CHANGES, key=int)
            if current and current.text_version != CONSENT_VERSION and int(v) > int(current.text_version)
        ],
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
    language_form: LanguageForm | None = None,
    token_form: AccessTokenForm | None = None,
    new_token: tuple[PersonalAccessToken, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    user = request_user(request)
    # A view-level read for now; belongs in accounts/selectors.py as `access_token_list(user=)`.
    tokens = access_token_list(user=user)
    context = {
        "timezone_form": timezone_form or TimezoneForm(initial={"timezone": user.timezone}),
        "language_form": language_form
        or LanguageForm(initial={"language": user.language, "date_order": user.date_order}),
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
def settings_language(request: HttpRequest) -> HttpResponse:
    form = LanguageForm(request.POST)
    if form.is_valid():
        chosen = form.cleaned_data
        user_set_language(user=request_user(request), language=chosen["language"], date_order=chosen["date_order"])
        order = DATE_ORDERS[chosen["date_order"]].lower()
        messages.success(
            request, f"Quick add now reads dates in {LANGUAGES[chosen['language']]} (and English), {order}."
        )
        return redirect("settings")
    return _settings_page(request, language_form=form, status=400)


@login_required
@require_POST
def settings_bulk_mail(request: HttpRequest) -> HttpResponse:
    """Skip newsletters, notifications and list mail (the default), or send them to Gemini too."""
    reads = request.POST.get("read_bulk_mail") == "on"
    User.objects.filter(pk=request_user(request).pk).update(read_bulk_mail=reads)
    messages.success(
        request,
        "Newsletters and notifications will be read too."
        if reads
        else "Newsletters and notifications will be skipped (not sent to Gemini).",
    )
    return redirect("settings")


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
