"""What a log line is about: the run in progress, its person (by id, never an address), the mailbox being
read and the Celery job. Set where a run starts and where its mailboxes are read; `LogContextFilter`
(config/logfilters.py) adds them to every record a handler writes, library lines included.

Context variables follow the code that set them, not the thread: a thread pool's workers start without
them, so the run's pools submit through `in_context` to carry them along.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from functools import partial
from typing import Any, TypeVar

FIELDS = ("run_id", "user_id", "integration_id", "task_id")
_vars: dict[str, ContextVar[Any]] = {name: ContextVar(f"tasklift_log_{name}", default=None) for name in FIELDS}

T = TypeVar("T")


@contextmanager
def log_context(**ids: int | str | None) -> Iterator[None]:
    """Within the block, log lines carry these ids (names from FIELDS); outside it, what they carried before."""
    tokens = [(_vars[name], _vars[name].set(value)) for name, value in ids.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def log_context_now() -> dict[str, Any]:
    """The ids set now, without those not set."""
    return {name: value for name, var in _vars.items() if (value := var.get()) is not None}


def in_context(function: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """`function(*args, **kwargs)` to be called in another thread with this thread's log context."""
    return partial(copy_context().run, function, *args, **kwargs)


def log_job_set(task_id: str | None) -> None:
    """The Celery job this process (or thread) works on now; None once it ends (config/celery.py)."""
    _vars["task_id"].set(task_id)
