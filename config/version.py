"""Tasklift's version, written in one place: pyproject.toml's `[project] version` (CHANGELOG.md, docs/deploy.md).

Read from the file beside this package, not from the installed metadata: the project runs from its folder
(`uv sync` does not install it as a package), and the image copies pyproject.toml with the code. Shown by
`/readyz`, by `/metrics` (`tasklift_build_info`) and in the first log line of every process."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@cache
def version() -> str:
    """`0.2.0`, or `unknown` where pyproject.toml cannot be read (a broken checkout: said, never a crash)."""
    try:
        return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


def log_start(role: str, **facts: str | int) -> None:
    """The first line a process logs: which Tasklift it runs and as what (`web`, `worker`, `beat`), with the
    facts an operator looks for at a start (a worker's name and processes), one JSON object like every line."""
    import logging

    logging.getLogger("tasklift.start").info(
        "Tasklift %s starting: %s", version(), role, extra={"version": version(), "role": role, **facts}
    )
