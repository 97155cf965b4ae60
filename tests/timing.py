"""What the test run took, printed at its end: the slowest tests (set-up, call and tear-down together) and the
time of each top-level folder of tests/, so that the next slow test is seen the day it comes.

Under pytest-xdist these hooks run in the controlling process, which is told every worker's reports. A folder's
time is the sum of its tests' times: with several workers the run's wall time is less than the sum.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

SLOWEST = 25
_took: dict[str, float] = defaultdict(float)
_tests: dict[str, int] = defaultdict(int)  # schemathesis runs its cases as one node id: a node may be several tests


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _took[report.nodeid] += report.duration
    _tests[report.nodeid] += report.when == "setup"


def _folder(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else f"{parts[0]}/test_*.py"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _took:
        return
    write = terminalreporter.write_line
    terminalreporter.section(f"the {SLOWEST} slowest tests (set-up + call + tear-down)")
    for nodeid, seconds in sorted(_took.items(), key=lambda item: -item[1])[:SLOWEST]:
        write(f"{seconds:8.2f} s  {nodeid}")
    seconds_in: dict[str, float] = defaultdict(float)
    tests_in: dict[str, int] = defaultdict(int)
    for nodeid, seconds in _took.items():
        seconds_in[_folder(nodeid)] += seconds
        tests_in[_folder(nodeid)] += _tests[nodeid]
    terminalreporter.section("time by folder (the sum of its tests)")
    for folder, seconds in sorted(seconds_in.items(), key=lambda item: -item[1]):
        write(f"{seconds:8.1f} s  {tests_in[folder]:5d} tests  {folder}")
    write(f"{sum(_took.values()):8.1f} s  {sum(_tests.values()):5d} tests  in all")
