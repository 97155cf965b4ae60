"""The tasks API: the signed-in person's tasks, listed with the page's filters, read, added, edited, and
closed one by one or many at once."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Field, Path, Query, Router, Schema, Status
from pydantic import ConfigDict

from config.http import request_user
from config.pagination import PageParams, page_of
from tasks.models import Task
from tasks.selectors import task_get, task_list
from tasks.services import MAX_NOTES_CHARS, MAX_TITLE_CHARS, db_text, task_bulk_set_status, task_create, task_update

router = Router(tags=["tasks"])

MAX_ID = 2**63 - 1
MAX_BULK = 500

TaskId = Annotated[int, Path(ge=1, le=MAX_ID, description="The task's id.")]


class TaskLinkOut(Schema):
    """One mailbox the task's email reached, with a link that opens the email there."""

    mailbox_id: int
    provider: str  # "gmail" or "outlook"
    provider_name: str  # "Gmail" or "Outlook", as the page's badge shows it
    address: str
    mailbox_status: str  # "active", "needs_reauth" or "disconnected"
    web_link: str


class TaskOut(Schema):
    id: int
    title: str
    notes: str
    status: Task.Status
    priority: Task.Priority | None
    due_date: date | None
    source: Task.Source
    email_link: str
    email_sender: str
    email_subject: str
    email_received_at: datetime | None
    sentence: str = Field(
        description="The sentence of the email the task came from, verbatim (whitespace on one line), as Tasklift "
        "found it in the email's cleaned text: the evidence for the task, never edited. Empty for tasks added by "
        "hand and for tasks made before sentences were kept."
    )
    links: list[TaskLinkOut]
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    @staticmethod
    def resolve_priority(task: Task) -> str | None:
        return task.priority or None

    @staticmethod
    def resolve_links(task: Task) -> list[dict[str, Any]]:
        return task_links(task)


class TaskPage(Schema):
    items: list[TaskOut]
    next: str | None = Field(description="The URL of the next page, or null on the last one.")


class TaskIn(Schema):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS, pattern=r"\S")
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)
    due_date: date | None = None
    priority: Task.Priority | None = None


class TaskPatch(Schema):
    """Only the fields sent change. `due_date: null` clears the due date, `priority: null` the priority.
    Setting `status` is how a task is done (`done`), dismissed (`dismissed`) or opened again (`open`)."""

    model_config = ConfigDict(extra="forbid")

    # A default of None on a non-nullable type: a field left out is None here and then not passed on,
    # while an explicit null is refused by validation.
    title: str = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS, pattern=r"\S")  # type: ignore[assignment]
    notes: str = Field(default=None, max_length=MAX_NOTES_CHARS)  # type: ignore[assignment]
    due_date: date | None = None
    priority: Task.Priority | None = None
    status: Task.Status = Field(default=None)  # type: ignore[assignment]


class TaskBulkStatusIn(Schema):
    model_config = ConfigDict(extra="forbid")

    ids: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(min_length=1, max_length=MAX_BULK)
    status: Task.Status


class TaskBulkStatusOut(Schema):
    updated: int = Field(description="How many of the given tasks are yours and were set (others are ignored).")


class TaskFilters(Schema):
    status: Literal["open", "done", "dismissed", "all"] = Field("open", description="Which tasks; `all` for every one.")
    q: str = Field("", max_length=200, description="Words to find in the title, notes, sender or subject.")
    # Defaults of None on non-nullable types: a query parameter is left out, never null.
    mailbox: int = Field(None, ge=1, le=MAX_ID, description="Only tasks whose email reached this mailbox.")  # type: ignore[assignment]
    source: Task.Source = Field(None, description="Only tasks from email (`email_ai`) or added by hand.")  # type: ignore[assignment]


def task_links(task: Task) -> list[dict[str, Any]]:
    links = [
        {
            "mailbox_id": link.integration_id,
            "provider": link.integration.provider,
            "provider_name": link.integration.get_provider_display(),
            "address": link.integration.account_address,
            "mailbox_status": link.integration.status,
            "web_link": link.web_link,
        }
        for link in task.links.all()
    ]
    if not links and task.integration is not None:  # a task made before links were recorded
        integration = task.integration
        links.append(
            {
                "mailbox_id": integration.pk,
                "provider": integration.provider,
                "provider_name": integration.get_provider_display(),
                "address": integration.account_address,
                "mailbox_status": integration.status,
                "web_link": task.email_link,
            }
        )
    return links


@router.get("/tasks", response=TaskPage, summary="List your tasks (a page)")
def list_tasks(request: HttpRequest, filters: Query[TaskFilters], page: Query[PageParams]) -> dict[str, Any]:
    """Open tasks by due date (soonest first), then by the email's received time (newest first); done and
    dismissed ones by when they were closed."""
    tasks = task_list(
        user=request_user(request),
        status=None if filters.status == "all" else filters.status,
        query=db_text(filters.q),
        integration_id=filters.mailbox,
        source=filters.source or "",
    )
    return page_of(request, tasks, page)


@router.post("/tasks", response={201: TaskOut}, summary="Add a task by hand")
def create_task(request: HttpRequest, payload: TaskIn) -> Status[Any]:
    task = task_create(
        user=request_user(request),
        title=payload.title,
        notes=payload.notes,
        due_date=payload.due_date,
        priority=payload.priority or "",
    )
    return Status(201, task)


@router.post("/tasks/bulk-status", response=TaskBulkStatusOut, summary="Set the status of many tasks")
def bulk_set_status(request: HttpRequest, payload: TaskBulkStatusIn) -> dict[str, int]:
    updated = task_bulk_set_status(user=request_user(request), task_ids=payload.ids, status=payload.status)
    return {"updated": updated}


@router.get("/tasks/{int:task_id}", response=TaskOut, summary="Read one task")
def get_task(request: HttpRequest, task_id: TaskId) -> Task:
    return task_get(user=request_user(request), task_id=task_id)


@router.patch("/tasks/{int:task_id}", response=TaskOut, summary="Change a task (its status too)")
def update_task(request: HttpRequest, task_id: TaskId, payload: TaskPatch) -> Task:
    task = task_get(user=request_user(request), task_id=task_id)
    changes = payload.model_dump(exclude_unset=True)
    if "priority" in changes:
        changes["priority"] = changes["priority"] or ""
    return task_update(task=task, **changes)
