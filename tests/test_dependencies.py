"""The security-sensitive dependencies have floors above their known advisories, and the lock honours them.

When a new advisory is published: add it below, raise the floor in pyproject.toml, `uv lock`, and run
pip-audit as docs/security.md says ("Auditing the dependencies").
"""

from __future__ import annotations

import tomllib

from django.conf import settings
from packaging.requirements import Requirement
from packaging.version import Version

# package -> (advisory, first fixed version) of the advisories each floor must clear.
ADVISORIES = {
    "django": [("CVE-2025-64459", "5.2.8"), ("CVE-2026-25673, CVE-2026-25674", "5.2.12"), ("CVE-2026-33034", "5.2.13")],
    "cryptography": [("CVE-2024-12797", "44.0.1"), ("CVE-2026-26007", "46.0.5")],
    "oauthlib": [("CVE-2022-36087", "3.2.1")],
    "requests": [("CVE-2024-47081", "2.32.4"), ("CVE-2026-25645", "2.33.0")],
}


def _floors() -> dict[str, Version]:
    project = tomllib.loads((settings.BASE_DIR / "pyproject.toml").read_text())["project"]
    floors = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        for specifier in requirement.specifier:
            if specifier.operator == ">=":
                floors[requirement.name.lower()] = Version(specifier.version)
    return floors


def _locked() -> dict[str, Version]:
    lock = tomllib.loads((settings.BASE_DIR / "uv.lock").read_text())
    return {package["name"]: Version(package["version"]) for package in lock["package"] if "version" in package}


def test_security_sensitive_dependencies_have_floors_above_their_advisories() -> None:
    floors = _floors()
    for package, advisories in ADVISORIES.items():
        assert package in floors, f"{package} has no minimum version in pyproject.toml"
        for advisory, fixed in advisories:
            assert floors[package] >= Version(fixed), f"{package}>={floors[package]} admits {advisory} (<{fixed})"


def test_the_lock_satisfies_every_floor() -> None:
    locked = _locked()
    for package, floor in _floors().items():
        assert locked[package] >= floor, (package, str(locked[package]), str(floor))
