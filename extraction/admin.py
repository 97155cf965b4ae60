from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin import ReadOnlyAdminMixin
from extraction.models import ExtractionLease, ExtractionRun, FetchFailure, ProcessedEmail
from extraction.services import ledger_replay


class RecordAdminMixin(ReadOnlyAdminMixin):
    """A record of what happened: read-only, and kept (deleting one would rewrite history or, for the
    ledger, send mail to the AI again)."""

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ExtractionRun)
class ExtractionRunAdmin(RecordAdminMixin, admin.ModelAdmin[ExtractionRun]):
    list_display = (
        "pk", "user", "trigger", "status", "created_at", "emails_fetched", "emails_sent_to_llm", "tasks_created",
        "llm_calls", "prompt_version", "error_code",
    )  # fmt: skip
    list_filter = ("status", "trigger", "prompt_version", "error_code")
    search_fields = ("user__email", "error_message")
    date_hierarchy = "created_at"
    list_select_related = ("user",)


@admin.register(ProcessedEmail)
class ProcessedEmailAdmin(RecordAdminMixin, admin.ModelAdmin[ProcessedEmail]):
    list_display = ("message_id", "integration", "outcome", "tasks_created", "attempts", "run", "created_at")
    list_filter = ("outcome", "integration__provider")
    search_fields = ("message_id", "integration__account_address", "integration__user__email")
    list_select_related = ("integration", "run")
    actions = ("replay",)

    @admin.action(description="Replay quarantined emails in the next run")
    def replay(self, request: HttpRequest, queryset: QuerySet[ProcessedEmail]) -> None:
        count = ledger_replay(entries=list(queryset))
        self.message_user(request, f"{count} quarantined email(s) will be read again in the next run.", messages.INFO)


@admin.register(FetchFailure)
class FetchFailureAdmin(RecordAdminMixin, admin.ModelAdmin[FetchFailure]):
    list_display = ("message_id", "integration", "attempts", "last_error_code", "updated_at")
    list_filter = ("last_error_code", "integration__provider")
    search_fields = ("message_id", "integration__account_address", "integration__user__email")
    list_select_related = ("integration",)


@admin.register(ExtractionLease)
class ExtractionLeaseAdmin(RecordAdminMixin, admin.ModelAdmin[ExtractionLease]):
    list_display = ("user", "token", "run")
    search_fields = ("user__email",)
    list_select_related = ("user", "run")
