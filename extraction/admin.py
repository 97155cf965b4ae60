from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from extraction.models import ExtractionLease, ExtractionRun, ProcessedEmail
from extraction.services import ledger_replay


@admin.register(ExtractionRun)
class ExtractionRunAdmin(admin.ModelAdmin[ExtractionRun]):
    list_display = (
        "pk", "user", "trigger", "status", "created_at", "emails_fetched", "emails_sent_to_llm", "tasks_created",
        "llm_calls", "error_code",
    )  # fmt: skip
    list_filter = ("status", "trigger", "error_code")
    search_fields = ("user__email", "error_message")
    date_hierarchy = "created_at"
    list_select_related = ("user",)

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return [f.name for f in ExtractionRun._meta.fields]


@admin.register(ProcessedEmail)
class ProcessedEmailAdmin(admin.ModelAdmin[ProcessedEmail]):
    list_display = ("message_id", "integration", "outcome", "tasks_created", "attempts", "run", "created_at")
    list_filter = ("outcome", "integration__provider")
    search_fields = ("message_id", "integration__account_address", "integration__user__email")
    list_select_related = ("integration", "run")
    readonly_fields = ("integration", "message_id", "run", "created_at", "updated_at")
    actions = ("replay",)

    @admin.action(description="Replay quarantined emails in the next run")
    def replay(self, request: HttpRequest, queryset: QuerySet[ProcessedEmail]) -> None:
        count = ledger_replay(entries=list(queryset))
        self.message_user(request, f"{count} quarantined email(s) will be read again in the next run.", messages.INFO)


@admin.register(ExtractionLease)
class ExtractionLeaseAdmin(admin.ModelAdmin[ExtractionLease]):
    list_display = ("user", "token", "run")
    search_fields = ("user__email",)
    readonly_fields = ("user", "token", "run")
