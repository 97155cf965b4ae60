"""Which tests are slow, and a guard that keeps it so: `make check` runs every test not marked slow, and a slow
test is one that drives a browser (everything under tests/e2e/), runs a benchmark, or starts a process (Tasklift's
own through manage.py, gunicorn, celery, make or supervise; Redis; a forking helper).

A test not marked slow that starts a process, itself or through a fixture of its own, is refused the process
with an error that says to mark it: the inner loop stays quick the day a new process test comes. Session and
module fixtures (the embedded servers, the template database) start theirs once, outside that rule.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

E2E = Path(__file__).resolve().parent / "e2e"
_LIBRARY_LOOKUP = {"ldconfig"}  # ctypes.util.find_library runs it: a lookup, not a process of ours
_starting = {"test": ""}  # the node id of a test not marked slow, while its own code or fixtures run


# The longest tests, a deployment of processes each (one to three minutes): sent out first, so that none of them
# starts last and runs alone at the end of `make test` (xdist hands tests out in collection order, and these files
# sort late). Only these: every slow test first was tried and dropped (every process test at once on two cores).
FIRST = ("test_benchmark_upgrade.py", "test_benchmark_production.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("e2e") or item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the rest keep their order


def _refuse_processes(event: str, args: tuple[Any, ...]) -> None:
    if not _starting["test"] or event not in {"subprocess.Popen", "os.fork", "os.posix_spawn"}:
        return
    if event == "subprocess.Popen" and Path(str(args[0])).name in _LIBRARY_LOOKUP:
        return
    command = args[1] if event == "subprocess.Popen" else event
    raise RuntimeError(
        f"{_starting['test']} starts a process ({command!r}) but is not marked slow: "
        "mark it @pytest.mark.slow (tests/slow.py), or `make check` is no longer the quick loop"
    )


sys.addaudithook(_refuse_processes)


@contextlib.contextmanager
def _watching(node: pytest.Item | None) -> Iterator[None]:
    """While a test's own code or function fixtures run: `node`'s id if it is not marked slow (None: a session
    or module fixture, never watched)."""
    before = _starting["test"]
    _starting["test"] = node.nodeid if node is not None and not node.get_closest_marker("slow") else ""
    try:
        yield
    finally:
        _starting["test"] = before


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    with _watching(request.node if fixturedef.scope == "function" else None):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _watching(item):
        return (yield)
