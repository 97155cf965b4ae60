from zoneinfo import available_timezones

from django import forms
from django.contrib.auth.forms import AuthenticationForm, BaseUserCreationForm, PasswordResetForm

from accounts.languages import DATE_ORDERS, LANGUAGES
from accounts.models import User


class SignupForm(BaseUserCreationForm[User]):
    # Filled from the browser by static/js/app.js; without JavaScript the person starts on UTC and can
    # change it under Settings.
    timezone = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput(attrs={"data-browser-tz": ""}))

    class Meta:
        model = User
        fields = ("email", "name")

    def clean_email(self) -> str:
        return str(self.cleaned_data["email"]).strip().lower()

    def validate_unique(self) -> None:
        """Never "this address is taken": sign-up answers the same whether or not it is (accounts.services)."""


class LoginForm(AuthenticationForm):
    username = forms.EmailField(
        label="Email address", widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "username"})
    )

    def confirm_login_allowed(self, user: User) -> None:
        """An account whose address is not confirmed cannot log in with its password (the confirmation link logs
        in). It gets the same error as a wrong password: otherwise signing up with an address and then logging in
        with the password just chosen would tell whether the address already had an account."""
        super().confirm_login_allowed(user)
        if not user.email_verified:
            raise self.get_invalid_login_error()


class EmailForm(forms.Form):
    """The address to send a confirmation link to again."""

    email = forms.EmailField(
        label="Email address", max_length=254, widget=forms.EmailInput(attrs={"autocomplete": "email"})
    )


class ConfirmPasswordForm(forms.Form):
    password = forms.CharField(
        label="Password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autofocus": True, "autocomplete": "current-password"}),
    )


class ResetRequestForm(PasswordResetForm):
    email = forms.EmailField(
        label="Email address",
        max_length=254,
        widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"}),
    )


def _timezone_choices() -> list[tuple[str, str]]:
    return [(name, name.replace("_", " ")) for name in sorted(available_timezones())]


class TimezoneForm(forms.Form):
    timezone = forms.ChoiceField(choices=_timezone_choices, label="Time zone")


class LanguageForm(forms.Form):
    language = forms.ChoiceField(choices=list(LANGUAGES.items()), label="Language you write tasks in")
    date_order = forms.ChoiceField(choices=list(DATE_ORDERS.items()), label="Dates like 12/05 are")


class AccessTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, label="Token name", help_text="What will use it, for example “my calendar script”."
    )
