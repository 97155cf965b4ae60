from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import User
from config.errors import NotFoundError
from tasks.models import Task


def task_list(*, user: User, status: str | None = Task.Status.OPEN) -> QuerySet[Task]:
    """The person's tasks, newest first."""
    tasks = Task.objects.filter(user=user).select_related("integration")
    if status:
        tasks = tasks.filter(status=status)
    return tasks.order_by("-created_at", "-id")


def task_get(*, user: User, task_id: int) -> Task:
    """One of the person's tasks; another person's task is simply not found."""
    task = Task.objects.filter(user=user, pk=task_id).first()
    if task is None:
        raise NotFoundError("There is no such task.", code="task_not_found")
    return task
