from __future__ import annotations

from django.db.models import F, Q, QuerySet

from accounts.models import User
from config.errors import NotFoundError
from tasks.models import Task


def task_list(
    *,
    user: User,
    status: str | None = Task.Status.OPEN,
    query: str = "",
    integration_id: int | None = None,
    source: str = "",
) -> QuerySet[Task]:
    """The person's tasks in the order that matters: by due date (soonest first), then those without one
    by their email's received time (newest first); done and dismissed ones by when they were closed.
    `query` searches the title, notes, sender and subject."""
    tasks = Task.objects.filter(user=user).select_related("integration").prefetch_related("links__integration")
    if status:
        tasks = tasks.filter(status=status)
    if query.strip():
        words = query.strip()[:200]
        tasks = tasks.filter(
            Q(title__icontains=words)
            | Q(notes__icontains=words)
            | Q(email_sender__icontains=words)
            | Q(email_subject__icontains=words)
        )
    if integration_id is not None:
        tasks = tasks.filter(links__integration_id=integration_id).distinct()
    if source:
        tasks = tasks.filter(source=source)
    if status and status != Task.Status.OPEN:
        return tasks.order_by(F("updated_at").desc(), "-id")
    return tasks.order_by(
        F("due_date").asc(nulls_last=True),
        F("email_received_at").desc(nulls_last=True),
        "-created_at",
        "-id",
    )


def task_get(*, user: User, task_id: int) -> Task:
    """One of the person's tasks; another person's task is simply not found."""
    task = Task.objects.filter(user=user, pk=task_id).first()
    if task is None:
        raise NotFoundError("There is no such task.", code="task_not_found")
    return task
