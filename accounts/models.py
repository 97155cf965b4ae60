from __future__ import annotations

from typing import Any, ClassVar

from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.utils import timezone


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def _create(self, email: str, password: str | None, **extra: Any) -> User:
        if not email:
            raise ValueError("An email address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.update(is_staff=True, is_superuser=True)
        # An operator who makes an admin on the command line vouches for the address.
        extra.setdefault("email_verified_at", timezone.now())
        return self._create(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A Tasklift account. The email address is the login."""

    email = models.EmailField("email address", unique=True)
    name = models.CharField(max_length=150, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)
    # Where "today" is for this person: dates and times on pages, and what is overdue (an IANA name).
    timezone = models.CharField(max_length=64, default="UTC")
    # The language the person writes tasks in, and whether a date is day or month first (accounts/languages.py):
    # quick add reads "Freitag" and "12/05" by them.
    language = models.CharField(max_length=8, default="en", db_default="en")
    date_order = models.CharField(max_length=3, default="MDY", db_default="MDY")
    # Whether newsletters, notifications and other bulk mail are sent to Gemini too (integrations/mail/bulk.py).
    read_bulk_mail = models.BooleanField(default=False)
    # When the person proved they read mail sent to `email` (the confirmation link, or a password reset).
    # Until then the account cannot log in with its password nor connect a mailbox.
    email_verified_at = models.DateTimeField("email address confirmed at", null=True, blank=True)
    # When the person last opened their task list: its run line sums up every run finished since then.
    runs_seen_at = models.DateTimeField("task list last opened at", null=True, blank=True)

    objects: ClassVar[UserManager] = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    class Meta:
        ordering = ("email",)

    def __str__(self) -> str:
        return self.email

    @property
    def email_verified(self) -> bool:
        return self.email_verified_at is not None


class AIConsentQuerySet(models.QuerySet["AIConsent"]):
    def current(self) -> AIConsentQuerySet:
        """Consents in force for the current consent text."""
        from accounts.consent import CONSENT_VERSION

        return self.filter(revoked_at__isnull=True, text_version=CONSENT_VERSION)

    def in_force(self) -> AIConsentQuerySet:
        """Consents in force, for the current text or an earlier one that still covers reading (for what it
        said: accounts/consent.py)."""
        from accounts.consent import VERSIONS_IN_FORCE

        return self.filter(revoked_at__isnull=True, text_version__in=VERSIONS_IN_FORCE)


class AIConsent(models.Model):
    """A person's explicit consent to have their mail read by Gemini, for one version of the consent text.

    Rows are never edited except to set `revoked_at`: the history of grants and revocations stays.
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="ai_consents")
    text_version = models.CharField(max_length=20)
    granted_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = AIConsentQuerySet.as_manager()

    class Meta:
        ordering = ("-granted_at",)
        verbose_name = "AI consent"
        verbose_name_plural = "AI consents"
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(revoked_at__isnull=True), name="one_current_consent_per_user"
            )
        ]

    def __str__(self) -> str:
        state = f"revoked {self.revoked_at:%Y-%m-%d}" if self.revoked_at else "current"
        return f"{self.user} v{self.text_version} ({state})"


class PersonalAccessToken(models.Model):
    """A token a person creates for a program to use the API (`Authorization: Bearer`). Only its SHA-256
    is stored: the token itself is shown once, when it is made."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)  # the first characters, so a person can tell tokens apart
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
