from django.contrib import admin

from integrations.models import Integration, SyncCursor


class SyncCursorInline(admin.TabularInline[SyncCursor, Integration]):
    model = SyncCursor
    extra = 0
    readonly_fields = ("purpose", "value", "filter_hash", "generation", "updated_at")
    can_delete = False


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin[Integration]):
    """Credentials are encrypted and never shown: the field is excluded, not just read-only."""

    list_display = ("account_address", "provider", "user", "status", "last_success_at", "failure_count")
    list_filter = ("provider", "status")
    search_fields = ("account_address", "user__email")
    exclude = ("credentials_encrypted",)
    readonly_fields = ("user", "provider", "account_address", "last_success_at", "created_at", "updated_at")
    list_select_related = ("user",)
    inlines = (SyncCursorInline,)


@admin.register(SyncCursor)
class SyncCursorAdmin(admin.ModelAdmin[SyncCursor]):
    list_display = ("integration", "purpose", "generation", "updated_at")
    list_filter = ("purpose", "integration__provider")
    search_fields = ("integration__account_address", "integration__user__email")
    readonly_fields = ("integration", "purpose", "value", "filter_hash", "generation", "updated_at")
    list_select_related = ("integration",)
