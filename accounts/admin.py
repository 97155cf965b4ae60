from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin

from accounts.models import AIConsent, User


@admin.register(User)
class UserAdmin(DjangoUserAdmin[User]):
    ordering = ("email",)
    list_display = ("email", "name", "is_staff", "is_active", "date_joined")
    list_filter = ("is_staff", "is_superuser", "is_active")
    search_fields = ("email", "name")
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        ("Profile", {"fields": ("name",)}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)


@admin.register(AIConsent)
class AIConsentAdmin(admin.ModelAdmin[AIConsent]):
    list_display = ("user", "text_version", "granted_at", "revoked_at")
    list_filter = ("text_version", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("user__email",)
    readonly_fields = ("user", "text_version", "granted_at")
    list_select_related = ("user",)
