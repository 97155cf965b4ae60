"""Calls at the same moment, each in a thread of its own on its own database connection (as workers are)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def at_once(*calls: Callable[[], Any], timeout: float = 60) -> list[Any]:
    """Start every call together (a barrier), wait for all, and return what each returned, in order; an
    exception in a call is raised here. A call still running after `timeout` fails the test."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            start.wait(timeout)
            results[index] = call()
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n, call)) for n, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), f"a call still runs after {timeout} s"
    if errors:
        raise errors[0]
    return results
