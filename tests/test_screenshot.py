"""`make screenshot` (config/screenshot.py): the README's picture of the task list can be made again by anyone,
from the demo, and the script leaves nothing running behind it."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.slow  # a Tasklift of its own and a browser (tests/slow.py)

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header chunk (IHDR, right after the signature)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def processes_naming(folder: str) -> list[str]:
    """Processes whose command line or environment names `folder` (as every process of that instance does)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            named = folder in " ".join(process.info["cmdline"] or [])
            if named or process.environ().get("TASKLIFT_LOCAL_DIR") == folder:
                found.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])}")
        except psutil.Error:
            continue
    return found


def test_make_screenshot_photographs_the_demo_list_at_1280_by_800_and_stops_what_it_started(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (`make browser`)")
    output = tmp_path / "list.png"

    done = subprocess.run(
        [sys.executable, "-m", "config.screenshot", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["screenshot"] == str(output)
    assert seen["run"] == "succeeded", f"the picture would show: {seen['run_line']}\n{done.stderr[-4000:]}"
    assert seen["tasks"] > 0  # the list it photographed held the demo mail's tasks
    assert png_size(output) == (1280, 800)
    assert not Path(seen["local_dir"]).exists()
    wait_for(  # a moment for the kernel to reap what was told to stop
        lambda: processes_naming(seen["local_dir"]) == [],
        timeout=10,
        what="every process of the screenshot's Tasklift gone",
        detail=lambda: "\n".join(processes_naming(seen["local_dir"])),
    )
