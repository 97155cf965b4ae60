"""Waiting in tests: for a condition, with a deadline, never for a fixed time.

A test that sleeps a fixed time is slow where the condition comes early and flaky where it comes late (a
loaded machine); a test that polls the condition with a deadline is as fast as the code and still fails,
saying what it waited for, when the condition never comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    *,
    timeout: float,
    what: str = "the condition",
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """Ask `condition` until it returns something true, and return that. When `timeout` seconds pass first, the
    test fails with `what` (and `detail()`, say the end of a log, read only then)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what}" + (f"\n{detail()}" if detail else ""))
        time.sleep(interval)
