from django.contrib import admin
from django.http import HttpRequest

from config.pagination import EstimatedCountPaginator
from integrations.models import ForwardSender, InboundMessage, Integration, PushChannel, SyncCursor


class SyncCursorInline(admin.TabularInline[SyncCursor, Integration]):
    """Where sync stands: only the pipeline moves a cursor (DESIGN §1), so an admin never edits one."""

    model = SyncCursor
    extra = 0
    fields = readonly_fields = ("purpose", "value", "filter_hash", "generation", "updated_at")
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Integration | None = None) -> bool:
        return False


class PushChannelInline(admin.TabularInline[PushChannel, Integration]):
    """The mailbox's doorbell (a Gmail watch or a Graph subscription); its clientState is never shown."""

    model = PushChannel
    extra = 0
    fields = readonly_fields = ("external_id", "expires_at", "last_error", "updated_at")
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Integration | None = None) -> bool:
        return False


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin[Integration]):
    """Credentials are encrypted and never shown: the field is excluded, not just read-only."""

    list_display = ("account_address", "provider", "user", "status", "last_success_at", "failure_count")
    list_filter = ("provider", "status")
    # Whole addresses: a mailbox per person, so a list as long as the people; never counted in full.
    search_fields = ("=account_address", "=user__email")
    search_help_text = "The mailbox's address, or its owner's."
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    exclude = ("credentials_encrypted",)
    readonly_fields = (
        "user",
        "provider",
        "account_address",
        "last_success_at",
        "notified_at",
        "polled_at",
        "next_check_at",
        "checked_at",
        "ring_gap_s",
        "push_missed_at",
        "throttle_count",
        "retry_after",
        "created_at",
        "updated_at",
    )
    list_select_related = ("user",)
    inlines = (SyncCursorInline, PushChannelInline)


@admin.register(SyncCursor)
class SyncCursorAdmin(admin.ModelAdmin[SyncCursor]):
    list_display = ("integration", "purpose", "generation", "updated_at")
    list_filter = ("purpose", "integration__provider")
    search_fields = ("=integration__account_address", "=integration__user__email")
    search_help_text = "The mailbox's address, or its owner's."
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_select_related = ("integration",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SyncCursor | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: SyncCursor | None = None) -> bool:
        return False


@admin.register(InboundMessage)
class InboundMessageAdmin(admin.ModelAdmin[InboundMessage]):
    """Forwarded mail stored and not read yet (a run deletes each once handled). Its text is the person's mail:
    never shown; an operator sees only how much waits, for whom and since when."""

    list_display = ("integration", "via", "size", "received_at")
    list_filter = ("via",)
    search_fields = ("=integration__account_address", "=integration__user__email")
    search_help_text = "The forward-to address, or its owner's."
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_select_related = ("integration",)
    fields = readonly_fields = ("integration", "key", "via", "envelope_from", "size", "received_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: InboundMessage | None = None) -> bool:
        return False


@admin.register(ForwardSender)
class ForwardSenderAdmin(admin.ModelAdmin[ForwardSender]):
    """Addresses people added as theirs for their forward-to address; confirmed only by the link sent to each."""

    list_display = ("address", "user", "confirmed_at", "created_at")
    search_fields = ("=address", "=user__email")
    search_help_text = "The address, or its owner's."
    list_select_related = ("user",)
    fields = readonly_fields = ("user", "address", "confirmed_at", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
