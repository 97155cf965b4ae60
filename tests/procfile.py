"""The Procfile, read as the one list of processes: the tests that start or compare a process take its command
from here rather than retype it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def procfile_commands(path: Path = ROOT / "Procfile") -> dict[str, str]:
    """`{name: command}` of each `name: command` line; comments and blank lines are not processes."""
    commands: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, command = line.partition(":")
        commands[name.strip()] = command.strip()
    return commands
