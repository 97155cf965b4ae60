"""The README and the docs it sends a newcomer to stay true as the code moves: CI runs the test command the
README names, docs/api.md has a row for every route of the API's own document, and every relative link of
these pages leads to a file (and a heading) that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from config.api import api

ROOT = Path(__file__).resolve().parent.parent
# The README and the pages it moved its reference parts to (docs/deploy.md and docs/scale.md have their own).
PAGES = ("README.md", "docs/using.md", "docs/api.md", "docs/operating.md", "docs/security.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def route(method: str, path: str) -> str:
    """`PATCH /api/tasks/{}`: the page names a path's parameters as it likes ({id}, {event})."""
    return f"{method.upper()} {re.sub(r'[{][^}]*[}]', '{}', path)}"


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+)$", page.read_text(), re.MULTILINE):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def test_ci_runs_the_test_command_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text()
    named = re.findall(r"^(make test)\s+#", readme, re.MULTILINE)
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]

    assert named == ["make test"], "the README's two commands name `make test` as the test command"
    assert shlex.split(ci[-1]) == ["make", "test"], f".ci/run ends with {ci[-1]!r}, not the README's command"


def test_the_api_page_has_a_row_for_every_route_of_the_api_document() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    rows = {route(*row.split(" ", 1)) for row in re.findall(r"^\| `([A-Z]+ /api/[^`]*)`", text, re.MULTILINE)}
    schema = api.get_openapi_schema()
    routes = {route(method, path) for path, operations in schema["paths"].items() for method in operations}

    assert routes - rows == set(), "docs/api.md has no row for these routes"
    assert rows - routes == set(), "docs/api.md lists routes the API does not have"


def test_every_relative_link_of_the_readme_and_its_pages_leads_somewhere() -> None:
    broken = []
    for name in PAGES:
        page = ROOT / name
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{name}: {target} (no such heading)")
    assert broken == []
