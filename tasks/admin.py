from django.contrib import admin
from django.http import HttpRequest

from tasks.models import Task, TaskLink


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
    list_display = ("title", "user", "source", "status", "priority", "due_date", "email_sender", "created_at")
    list_filter = ("status", "source", "priority", "integration__provider")
    search_fields = ("title", "user__email", "email_subject", "email_sender", "source_id")
    date_hierarchy = "created_at"
    list_select_related = ("user",)
    readonly_fields = ("user", "source", "source_id", "title_key", "integration", "run", "created_at", "updated_at")
    inlines = (TaskLinkInline,)
