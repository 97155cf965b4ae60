from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.consent import CONSENT_NOT_SENT, CONSENT_SENT, CONSENT_TERMS, CONSENT_TITLE, CONSENT_VERSION
from accounts.forms import LoginForm, SignupForm
from accounts.models import User
from accounts.selectors import consent_current
from accounts.services import consent_grant, consent_revoke, user_create


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
