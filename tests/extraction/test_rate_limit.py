"""At most six "Extract now" a minute per person: the seventh is a 429 with Retry-After, and queues nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests
from django.conf import settings
from django.db import connection
from django.test import Client

from accounts.models import User
from accounts.services import consent_grant
from config.ports import free_port as _free_port
from extraction.models import ExtractionRun
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]


def test_seventh_extract_now_in_a_minute_is_refused(
    client: Client, user: User, broker_queue: Callable[[], int], django_capture_on_commit_callbacks
) -> None:
    consent_grant(user=user)  # no run is started without AI consent
    client.force_login(user)
    for _ in range(6):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/extract", HTTP_HX_REQUEST="true")
        assert response.status_code == 202
        ExtractionRun.objects.filter(user=user).update(status=ExtractionRun.Status.SUCCEEDED)  # as if it ran
    assert ExtractionRun.objects.filter(user=user).count() == 6
    assert broker_queue() == 6

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/extract", HTTP_HX_REQUEST="true")

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "at most 6 extractions a minute" in response.content.decode()
    assert ExtractionRun.objects.filter(user=user).count() == 6
    assert broker_queue() == 6


def test_a_sliding_window_lets_no_second_burst_through_across_a_window_edge(
    client: Client, consenting_user: User, settings, django_capture_on_commit_callbacks
) -> None:
    """Twelve requests, six just before a fixed window's edge and six just after it (django-ratelimit's windows
    let all twelve through): at most six are accepted, whether pressed on the page or asked of the API."""
    settings.RATE_WINDOW_SECONDS = 4  # the "minute", shortened so that the test waits seconds, not a minute
    client.force_login(consenting_user)

    def ask(index: int) -> int:
        with django_capture_on_commit_callbacks(execute=True):
            if index % 2:
                status = client.post("/api/extraction/runs").status_code
            else:
                status = client.post("/extract", HTTP_HX_REQUEST="true").status_code
        ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)  # as if it ran
        return status

    edge = (time.time() // 4 + 1) * 4  # where a fixed window of 4 s would start again
    if edge - time.time() < 1.5:
        edge += 4
    time.sleep(edge - 1.2 - time.time())
    before = [ask(0)]
    first_counted_by = time.time()  # the first request was counted (on Redis's clock, the same) before this
    before += [ask(i) for i in range(1, 6)]
    time.sleep(max(0.0, edge + 0.3 - time.time()))
    after = [ask(i) for i in range(6)]

    assert before == [202] * 6
    assert after == [429] * 6
    assert ExtractionRun.objects.count() == 6
    # A window, not a ban: once the first six are older than it, a request is accepted again.
    time.sleep(max(0.0, first_counted_by + 4.2 - time.time()))
    assert ask(0) == 202


def test_the_limit_is_per_person(client: Client, user: User) -> None:
    consent_grant(user=user)  # no run is started without AI consent
    client.force_login(user)
    for _ in range(7):
        client.post("/extract", HTTP_HX_REQUEST="true")
    other = UserFactory()
    consent_grant(user=other)
    client.force_login(other)
    assert client.post("/extract", HTTP_HX_REQUEST="true").status_code == 202


def test_api_start_is_limited_too(client: Client, user: User) -> None:
    consent_grant(user=user)  # no run is started without AI consent
    client.force_login(user)
    statuses = [client.post("/api/extraction/runs").status_code for _ in range(7)]
    assert statuses == [202] * 6 + [429]
    response = client.post("/api/extraction/runs")
    assert response.json()["code"] == "rate_limited"
    assert int(response["Retry-After"]) >= 1


def test_a_second_press_while_a_run_waits_reuses_it(client: Client, user: User) -> None:
    consent_grant(user=user)  # no run is started without AI consent
    client.force_login(user)
    client.post("/extract", HTTP_HX_REQUEST="true")
    client.post("/extract", HTTP_HX_REQUEST="true")
    assert ExtractionRun.objects.filter(user=user).count() == 1


# Two web processes -------------------------------------------------------------------------------


@pytest.fixture
def two_web_processes(transactional_db: None) -> Iterator[list[str]]:
    """Two gunicorn processes serving the app on the test database and the test Redis."""
    # the same server as ours, but the test database
    database_url = urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{connection.settings_dict['NAME']}"))
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test", "DATABASE_URL": database_url}
    processes, urls = [], []
    for _ in range(2):
        port = _free_port()
        processes.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}"),
                    *("--workers", "1", "--graceful-timeout", "5"),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for url in urls:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if requests.get(f"{url}/login/", timeout=5).status_code == 200:
                        break
                except (requests.ConnectionError, requests.Timeout):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"web process at {url} did not start")
                time.sleep(0.2)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            # Its worker gets the graceful timeout to finish; on a loaded machine (CI: not gone after 10 s) the
            # test is over, whatever the shutdown takes, so one still there is killed.
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_the_limit_holds_across_two_web_processes(two_web_processes: list[str], broker_queue) -> None:
    spread = UserFactory(email="spread@example.com")
    consent_grant(user=spread)  # no run is started without AI consent
    session = requests.Session()
    session.trust_env = False
    first, second = two_web_processes
    login_page = session.get(f"{first}/login/", timeout=5).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page)
    assert token is not None
    logged_in = session.post(
        f"{first}/login/",
        data={"username": "spread@example.com", "password": "correct-horse-battery", "csrfmiddlewaretoken": token[1]},
        headers={"Referer": f"{first}/login/"},
        timeout=5,
        allow_redirects=False,
    )
    assert logged_in.status_code == 302, logged_in.text[-2000:]
    headers = {"X-CSRFToken": session.cookies["csrftoken"], "HX-Request": "true"}

    def press(n: int) -> int:
        base = first if n % 2 == 0 else second
        status = session.post(f"{base}/extract", headers={**headers, "Referer": f"{base}/"}, timeout=10).status_code
        ExtractionRun.objects.update(status=ExtractionRun.Status.SUCCEEDED)  # as if it ran: the next press queues anew
        return status

    statuses = [press(n) for n in range(6)]
    runs, queued = ExtractionRun.objects.count(), broker_queue()
    statuses.append(press(6))

    assert statuses == [202] * 6 + [429]
    assert runs == 6
    assert ExtractionRun.objects.count() == runs
    assert broker_queue() == queued
