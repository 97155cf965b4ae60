"""The guard of tests/slow.py: a test not marked slow cannot start a process, so `make check` stays quick."""

from __future__ import annotations

import ctypes.util
import subprocess

import pytest


def test_a_test_not_marked_slow_is_refused_a_process_and_told_to_mark_itself() -> None:
    with pytest.raises(RuntimeError, match=r"starts a process \(\['true'\]\) but is not marked slow"):
        subprocess.run(["true"], check=True)


def test_a_library_lookup_is_not_a_process_of_ours() -> None:
    assert ctypes.util.find_library("c")


@pytest.fixture
def started_by_a_fixture() -> int:
    return subprocess.run(["true"], check=True).returncode


def test_a_fixture_of_a_test_not_marked_slow_is_refused_too(request: pytest.FixtureRequest) -> None:
    with pytest.raises(RuntimeError, match="is not marked slow"):
        request.getfixturevalue("started_by_a_fixture")


@pytest.mark.slow
def test_a_test_marked_slow_starts_what_it_needs() -> None:
    assert subprocess.run(["true"], check=True).returncode == 0


@pytest.fixture(scope="session")
def shared_process() -> int:
    """Started once for the run, as the template database is (tests/databases.py): outside the rule."""
    return subprocess.run(["true"], check=True).returncode


@pytest.fixture
def asks_for_the_shared_one(request: pytest.FixtureRequest) -> int:
    # The way pytest-django's django_db marker asks for the test database: from inside a function fixture.
    return int(request.getfixturevalue("shared_process"))


def test_a_session_fixture_first_asked_for_by_a_test_not_marked_slow_starts_its_process(
    asks_for_the_shared_one: int,
) -> None:
    assert asks_for_the_shared_one == 0
