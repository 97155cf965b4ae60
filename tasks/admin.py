from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from config.pagination import EstimatedCountPaginator
from tasks.models import Task, TaskLink
from tasks.selectors import task_admin_search


class TaskLinkInline(admin.TabularInline[TaskLink, Task]):
    """The mailboxes the task's email reached (one task per email across Gmail and Outlook)."""

    model = TaskLink
    extra = 0
    fields = readonly_fields = ("integration", "message_id", "web_link", "created_at")
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin[Task]):
    """Every person's tasks: a large table. The list never counts all of it (EstimatedCountPaginator, no
    full count), reads its newest first by an index, and searches through indexes (`task_admin_search`).
    No date hierarchy: its list of years and months is a scan of the table; the date filter is not."""

    list_display = ("title", "user", "source", "status", "priority", "due_date", "email_sender", "created_at")
    list_filter = ("status", "source", "priority", "integration__provider", "created_at")
    search_fields = ("title", "email_subject", "email_sender", "user__email", "source_id")  # see get_search_results
    search_help_text = (
        "Words of the title, subject or sender (or their beginnings), a person's email address, or a message id."
    )
    list_select_related = ("user",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    readonly_fields = (
        "user", "source", "source_id", "title_key", "sentence", "integration", "run", "created_at", "updated_at",
    )  # fmt: skip
    inlines = (TaskLinkInline,)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Task], search_term: str
    ) -> tuple[QuerySet[Task], bool]:
        if not search_term.strip():
            return queryset, False
        return task_admin_search(tasks=queryset, text=search_term), False
