"""The tasks API: the signed-in person's tasks."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import ConfigDict, Field

from config.http import request_user
from tasks.models import Task
from tasks.selectors import task_get, task_list
from tasks.services import task_create, task_set_status

router = Router(tags=["tasks"])


class TaskOut(Schema):
    id: int
    title: str
    source: str
    status: str
    priority: str
    due_date: date | None
    notes: str
    email_link: str
    email_sender: str
    email_subject: str
    email_received_at: datetime | None
    created_at: datetime


class TaskIn(Schema):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    notes: str = Field(default="", max_length=5000)
    due_date: date | None = None
    priority: Task.Priority | None = None


class TaskPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    status: Task.Status


@router.get("/tasks", response=list[TaskOut])
def list_tasks(request: HttpRequest, status: Task.Status | None = Task.Status.OPEN) -> list[Task]:
    return list(task_list(user=request_user(request), status=status)[:500])


@router.post("/tasks", response={201: TaskOut})
def create_task(request: HttpRequest, payload: TaskIn) -> Status[Any]:
    task = task_create(
        user=request_user(request),
        title=payload.title,
        notes=payload.notes,
        due_date=payload.due_date,
        priority=payload.priority or "",
    )
    return Status(201, task)


@router.patch("/tasks/{task_id}", response=TaskOut)
def update_task(request: HttpRequest, task_id: int, payload: TaskPatch) -> Task:
    return task_set_status(task=task_get(user=request_user(request), task_id=task_id), status=payload.status)
