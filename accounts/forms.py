from django import forms
from django.contrib.auth.forms import AuthenticationForm, BaseUserCreationForm

from accounts.models import User


class SignupForm(BaseUserCreationForm[User]):
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
