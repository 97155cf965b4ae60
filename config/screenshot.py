"""`make screenshot`: docs/screenshot.png, the task list of the demo as a newcomer first sees it, made afresh.

Starts Tasklift as `make run` does (`python -m config.run`: embedded PostgreSQL and Redis, the sandbox, the web
server, a worker and beat, the demo account seeded), but as a throwaway instance: its own TASKLIFT_LOCAL_DIR in
a temporary folder, free ports, and none of the Tasklift settings of the calling shell (every variable
`.env.example` names is left out), so the picture shows the demo on the sandbox whatever the machine runs.
Debian's Chromium, driven by Playwright, logs in as the demo person, gives AI consent, connects the demo Gmail
and Outlook mailboxes through the sandbox's consent pages, presses "Extract now", waits for the run to finish,
and photographs the list at 1280 by 800. Then everything it started is stopped and the folder deleted
(`config.embedded clean`, as `make clean` does).

Prints one JSON line last: where the picture is, its size, how the run ended and what its line said, how many
task rows the list showed (`tasks`), and how many of them whole within the first screen (`tasks_above_the_fold`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from config.ports import free_port
from config.run import DEMO_PASSWORD, _tail
from config.supervise import ROOT, die_with_parent

DEMO_ADDRESS = "demo@tasklift.test"
CHROMIUM = "/usr/bin/chromium"  # Debian's: `playwright install` cannot download a browser here
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
WIDTH, HEIGHT = 1280, 800
STARTED_WITHIN_S = 240  # a first start initialises PostgreSQL and migrates it
RUN_WITHIN_MS = 120_000  # the whole demo inbox read by the sandbox Gemini
STOPPED_WITHIN_S = 60
READY_LINE = "Ctrl-C stops every process."  # config.run prints it last, once every process is up
TASK_ROWS = "#task-list > li.task"
FINISHED = re.compile(r"^(succeeded|failed|cancelled|skipped|limited)$")
# Not Tasklift settings, but a caller's (a test run's) Django state, which the instance must not take.
NOT_INHERITED = ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE", "TASKLIFT_TEST_RUN")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "screenshot.png", help="where the PNG goes")
    output = parser.parse_args().output.resolve()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: install Debian's chromium (`make browser`) to take the screenshot")
    local_dir = Path(tempfile.mkdtemp(prefix="tasklift-screenshot-"))
    env = instance_env(local_dir)
    log = local_dir / "make-run.out"
    say(f"Starting a Tasklift of its own under {local_dir} (deleted afterwards)…")
    with log.open("wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "config.run"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, stopped as Ctrl-C stops `make run`
            preexec_fn=die_with_parent,
        )  # fmt: skip
    try:
        wait_for(lambda: READY_LINE in log.read_text(errors="replace"), STARTED_WITHIN_S, "Tasklift to start", run, log)
        say("Tasklift is up; photographing the demo's task list…")
        seen = photograph(f"http://127.0.0.1:{env['PORT']}", sandbox_url=env["SANDBOX_URL"], output=output)
        if seen["run"] != "succeeded":  # the picture is taken all the same; the worker's log says why
            say(f"The run ended {seen['run']}. {_tail(local_dir / 'logs' / 'worker.log', lines=40)}")
    finally:
        stop(run, env, local_dir)
    print(
        json.dumps({"screenshot": str(output), "width": WIDTH, "height": HEIGHT, **seen, "local_dir": str(local_dir)}),
        flush=True,
    )


def instance_env(local_dir: Path) -> dict[str, str]:
    """The environment of a fresh machine's `make run`, with its own data folder and free ports."""
    settings = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    env = {k: v for k, v in os.environ.items() if k not in settings and k not in NOT_INHERITED}
    env.update(
        TASKLIFT_LOCAL_DIR=str(local_dir),
        PORT=str(free_port()),  # SITE_URL follows it (config.run)
        SANDBOX_URL=f"http://127.0.0.1:{free_port()}",
        SANDBOX_TLS_URL=f"https://127.0.0.1:{free_port()}",
        PYTHONUNBUFFERED="1",
    )
    return env


def photograph(url: str, *, sandbox_url: str, output: Path) -> dict[str, Any]:
    """The demo journey in Chromium up to a finished run, then the list's picture; what the list showed."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{url}/login/")
            page.get_by_label("Email address").fill(DEMO_ADDRESS)
            page.get_by_label("Password").fill(DEMO_PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{url}/")

            page.goto(f"{url}/consent/")
            page.get_by_role("button", name=re.compile(r"^I agree")).click()
            expect(page).to_have_url(f"{url}/")

            for provider, allow in (("Gmail", "Allow"), ("Outlook", "Accept")):
                page.goto(f"{url}/mailboxes/")
                page.get_by_role("button", name=f"Connect {provider}").click()
                expect(page).to_have_url(re.compile("^" + re.escape(sandbox_url)))
                page.get_by_label("Account email").fill(DEMO_ADDRESS)
                page.get_by_role("button", name=allow).click()
                expect(page).to_have_url(f"{url}/mailboxes/")

            page.goto(f"{url}/")
            page.get_by_role("button", name="Extract now").click()
            status = page.locator("#run-status")
            expect(status).to_have_attribute("data-status", FINISHED, timeout=RUN_WITHIN_MS)
            outcome, line = status.get_attribute("data-status"), " ".join(status.inner_text().split())

            page.goto(f"{url}/")  # the list as a person opens it, not mid-way through a live update
            rows = page.locator(TASK_ROWS)
            expect(rows.first).to_be_visible()
            page.evaluate("() => document.fonts.ready")
            page.mouse.move(WIDTH - 1, HEIGHT - 1)  # no hover on anything shown
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output), animations="disabled", caret="hide")
            above = page.evaluate(
                "([selector, height]) => [...document.querySelectorAll(selector)].filter(row => {"
                "  const box = row.getBoundingClientRect(); return box.top >= 0 && box.bottom <= height; }).length",
                [TASK_ROWS, HEIGHT],
            )
            return {"run": outcome, "run_line": line, "tasks": rows.count(), "tasks_above_the_fold": above}
        finally:
            browser.close()


def stop(run: subprocess.Popen[bytes], env: dict[str, str], local_dir: Path) -> None:
    """Ctrl-C to the instance's group, then its PostgreSQL and Redis stopped and its folder deleted."""
    say("Stopping the Tasklift it started…")
    if run.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=STOPPED_WITHIN_S)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    cleaned = subprocess.run(
        [sys.executable, "-m", "config.embedded", "clean"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if cleaned.returncode != 0:  # the folder stays: never delete data under a server that still runs
        say(f"{local_dir} could not be cleaned up: {cleaned.stderr or cleaned.stdout}")


def wait_for(condition: Callable[[], bool], timeout: float, what: str, run: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if run.poll() is not None or time.monotonic() > deadline:
            ended = f"it exited with code {run.returncode}" if run.poll() is not None else f"not within {timeout} s"
            raise SystemExit(f"Waited for {what}, but {ended}. {_tail(log)}")
        time.sleep(0.5)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # stdout is the JSON line alone


if __name__ == "__main__":
    main()
