from zoneinfo import available_timezones

from django import forms
from django.contrib.auth.forms import AuthenticationForm, BaseUserCreationForm

from accounts.models import User


class SignupForm(BaseUserCreationForm[User]):
    # Filled from the browser by static/js/app.js; without JavaScript the person starts on UTC and can
    # change it under Settings.
    timezone = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput(attrs={"data-browser-tz": ""}))

    class Meta:
        model = User
        fields = ("email", "name")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip().lower()
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email address already exists. Log in instead.")
        return str(email)


class LoginForm(AuthenticationForm):
    username = forms.EmailField(
        label="Email address", widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "username"})
    )


def _timezone_choices() -> list[tuple[str, str]]:
    return [(name, name.replace("_", " ")) for name in sorted(available_timezones())]


class TimezoneForm(forms.Form):
    timezone = forms.ChoiceField(choices=_timezone_choices, label="Time zone")


class AccessTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, label="Token name", help_text="What will use it, for example “my calendar script”."
    )
