"""SECURITY.md names, for each promise, the tests that hold it: every test it names exists, so that a renamed
or deleted test cannot leave a promise standing on nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `tests/x.py`, `tests/x.py::name`, or `::name` (of the file named last), each in backticks.
REFERENCE = re.compile(r"`((?:tests/[\w/]+\.py)?)((?:::\w+)?)")


def defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.ClassDef)}


def test_every_test_security_md_names_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    current: Path | None = None
    named, missing = 0, []
    for match in REFERENCE.finditer(text):
        file, name = match.group(1), match.group(2).removeprefix("::")
        if file:
            current = ROOT / file
            if not current.exists():
                missing.append(file)
                continue
        if not name:
            named += bool(file)
            continue
        assert current is not None, f"::{name} names no file before it"
        named += 1
        if current.exists() and name not in defined(current):
            missing.append(f"{current.relative_to(ROOT)}::{name}")
    assert named > 50  # it read the references
    assert missing == []
