from django.contrib import admin

from tasks.models import Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin[Task]):
    list_display = ("title", "user", "source", "status", "priority", "due_date", "email_sender", "created_at")
    list_filter = ("status", "source", "priority", "integration__provider")
    search_fields = ("title", "user__email", "email_subject", "email_sender", "source_id")
    date_hierarchy = "created_at"
    list_select_related = ("user",)
    readonly_fields = ("user", "source", "source_id", "title_key", "integration", "run", "created_at", "updated_at")
