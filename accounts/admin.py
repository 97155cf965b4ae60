from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import pluralize

from accounts.models import AIConsent, PersonalAccessToken, User
from accounts.services import access_token_revoke, user_email_confirm
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request


class ReadOnlyAdminMixin:
    """A record that is written by the app only: an admin may read it, never add or edit it."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(User)
class UserAdmin(DjangoUserAdmin[User]):
    ordering = ("email",)
    list_display = ("email", "name", "timezone", "email_confirmed", "is_staff", "is_active", "date_joined")
    list_filter = (("email_verified_at", admin.EmptyFieldListFilter), "is_staff", "is_superuser", "is_active")
    search_fields = ("email", "name")
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        ("Profile", {"fields": ("name", "timezone")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("email_verified_at", "last_login", "date_joined")}),
    )
    readonly_fields = ("email_verified_at",)
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
    actions = ("extract_now", "confirm_email")

    @admin.display(boolean=True, description="Email confirmed", ordering="email_verified_at")
    def email_confirmed(self, obj: User) -> bool:
        return obj.email_verified

    @admin.action(description="Mark the email address of the selected people as confirmed")
    def confirm_email(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        people = list(queryset.filter(email_verified_at__isnull=True))
        for user in people:
            user_email_confirm(user=user)
        self.message_user(request, f"{len(people)} address(es) marked as confirmed.", messages.INFO)

    @admin.action(description="Run extraction now for the selected people")
    def extract_now(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        new = sum(extraction_run_request(user=user, trigger=ExtractionRun.Trigger.ADMIN)[1] for user in queryset)
        waiting = queryset.count() - new
        text = f"{new} extraction run{pluralize(new)} queued."
        if waiting:
            people = pluralize(waiting, "person,people")
            text += f" {waiting} {people} already had a run waiting in the queue, which will read their mail."
        self.message_user(request, text, messages.INFO)


@admin.register(AIConsent)
class AIConsentAdmin(admin.ModelAdmin[AIConsent]):
    list_display = ("user", "text_version", "granted_at", "revoked_at")
    list_filter = ("text_version", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("user__email",)
    readonly_fields = ("user", "text_version", "granted_at")
    list_select_related = ("user",)


@admin.register(PersonalAccessToken)
class PersonalAccessTokenAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[PersonalAccessToken]):
    """Tokens are made by their owners; only their hash is stored, and it is never shown."""

    list_display = ("name", "prefix", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix", "user__email")
    exclude = ("token_hash",)
    list_select_related = ("user",)
    actions = ("revoke",)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PersonalAccessToken]) -> None:
        tokens = list(queryset.filter(revoked_at__isnull=True))
        for token in tokens:
            access_token_revoke(user=token.user, token_id=token.pk)
        self.message_user(request, f"{len(tokens)} token{pluralize(len(tokens))} revoked.", messages.INFO)
