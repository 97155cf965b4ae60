from __future__ import annotations

from django.db.models import Count, F, Max, Q, QuerySet

from accounts.models import User
from config.errors import NotFoundError
from tasks.models import Task
from tasks.services import db_text


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
        words = db_text(query.strip())[:200]  # PostgreSQL refuses NUL characters
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


def task_list_version(*, user: User) -> str:
    """A short token that changes whenever any of the person's tasks does (one query): every write to a
    task moves its updated_at, the pipeline's inserts included."""
    stats = Task.objects.filter(user=user).aggregate(latest=Max("updated_at"), n=Count("id"))
    latest = stats["latest"]
    return f"{stats['n']}.{int(latest.timestamp() * 1_000_000) if latest else 0}"
