"""Production mode for real, as docs/deploy.md runs it: `collectstatic`, `createsuperuser --noinput`, then the
Procfile's `web` command (gunicorn, two processes) behind what a TLS proxy would send, on this test session's
database, Redis and sandbox (a demo deployment, TASKLIFT_DEMO=true, with the sandbox over https)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from cryptography.fernet import Fernet
from django.conf import settings

from config.ports import free_port as _free_port
from sandbox.server import SandboxServer
from tests.processes import ROOT, process_env
from tests.procfile import procfile_commands
from tests.waiting import wait_for

# gunicorn's processes read what this test commits; slow: gunicorn and a worker (tests/slow.py)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HOST = "tasklift.test"  # the public name the proxy forwards as Host
ADMIN_EMAIL = "admin@tasklift.test"
ADMIN_PASSWORD = secrets.token_urlsafe(16)
METRICS_TOKEN = secrets.token_urlsafe(24)


def release() -> str:
    """The version pyproject.toml names, read here as an operator would."""
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def production_env(static_root: Path, **extra: str) -> dict[str, str]:
    """A production demo's environment, every setting as docs/deploy.md names it; the database, Redis, queue and
    sandbox are this test session's."""
    env = process_env(
        DJANGO_SETTINGS_MODULE="config.settings",  # the real settings, not the test ones
        TASKLIFT_MODE="production",
        TASKLIFT_DEMO="true",
        SECRET_KEY=secrets.token_urlsafe(60),
        TASKLIFT_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        ALLOWED_HOSTS=HOST,
        CSRF_TRUSTED_ORIGINS=f"https://{HOST}",
        SITE_URL=f"https://{HOST}",
        PUSH_BASE_URL=f"https://{HOST}",
        EMAIL_HOST="smtp.invalid",  # required; nothing here sends mail
        RATELIMIT_IP_META_KEY="HTTP_X_REAL_IP",
        REDIS_URL=settings.REDIS_URL,
        STATIC_ROOT=str(static_root),
        # A production demo reaches the sandbox over https only: its TLS listener serves every route, and the
        # clients trust the certificate it wrote (the file the test session's sandbox writes).
        SANDBOX_URL=settings.SANDBOX_TLS_URL,
        SANDBOX_TLS_URL=settings.SANDBOX_TLS_URL,
        SANDBOX_CA_BUNDLE=settings.MICROSOFT_CA_BUNDLE,
        METRICS_TOKEN=METRICS_TOKEN,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # the Procfile's promise
        DJANGO_SUPERUSER_EMAIL=ADMIN_EMAIL,
        DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
        **extra,
    )
    # What the test settings add for the development sandbox and for the rest of the suite is not production's.
    for name in ("OAUTHLIB_INSECURE_TRANSPORT", "PUSH_ENABLED", "DEBUG"):
        env.pop(name, None)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


class ProxiedClient:
    """HTTP as the site's TLS proxy passes it on: Host, `X-Forwarded-Proto: https` and the client's address in
    `X-Real-IP`. The browser spoke https, so the cookies it keeps are the secure ones and it sends them back; a
    requests cookie jar would hold them back from the proxy's plain-http hop, so the Cookie header is sent here."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies: dict[str, Any] = {}  # name -> the http.cookiejar.Cookie the site set
        self.http = requests.Session()
        self.http.trust_env = False

    def request(self, method: str, path: str, *, proxied: bool = True, **kwargs: Any) -> requests.Response:
        headers = {"Host": HOST, **kwargs.pop("headers", {})}
        if proxied:
            headers.update({"X-Forwarded-Proto": "https", "X-Real-IP": "203.0.113.7"})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{c.name}={c.value}" for c in self.cookies.values())
        kwargs.setdefault("timeout", 30)
        response = self.http.request(method, self.base_url + path, headers=headers, allow_redirects=False, **kwargs)
        for cookie in response.cookies:
            self.cookies[cookie.name] = cookie
        self.http.cookies.clear()
        return response

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, data: dict[str, str]) -> requests.Response:
        return self.request("POST", path, data=data, headers={"Origin": f"https://{HOST}"})

    def log_in(self, email: str, password: str) -> requests.Response:
        page = self.get("/login/")
        assert page.status_code == 200, page.text[-2000:]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[-2000:]
        return self.post("/login/", {"csrfmiddlewaretoken": token[1], "username": email, "password": password})


@dataclass
class Web:
    """The Procfile's web command (gunicorn), once for this module's tests: none of them stops or reconfigures it."""

    base_url: str
    log: Path
    pid: int  # gunicorn's master
    env: dict[str, str]


@dataclass
class Production:
    client: ProxiedClient
    web: Web
    log_start: int  # where this test's lines begin in the web's log

    @property
    def env(self) -> dict[str, str]:
        return self.web.env

    def log(self) -> str:
        """The web's log since this test began."""
        with self.web.log.open("rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")


@pytest.fixture(scope="module")
def static_root(sandbox_server: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`manage.py collectstatic --noinput` in production mode (the runbook's step after `migrate`)."""
    root = tmp_path_factory.mktemp("static")
    collected = manage(production_env(root), "collectstatic", "--noinput")
    assert collected.returncode == 0, collected.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def web(django_db_setup: None, static_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    port = _free_port()
    env = production_env(static_root, WEB_CONCURRENCY="2", GUNICORN_BIND=f"127.0.0.1:{port}")
    log = tmp_path_factory.mktemp("web") / "web.log"
    probe = ProxiedClient(f"http://127.0.0.1:{port}")

    def healthy() -> bool:
        assert process.poll() is None, f"gunicorn exited {process.returncode}:\n{log.read_text()[-3000:]}"
        try:
            return probe.get("/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    with procfile_process("web", env, log) as process:
        # A few seconds alone; far longer on a machine busy with other work (each process imports the app).
        wait_for(healthy, timeout=120, what="gunicorn answers /healthz", detail=lambda: log.read_text()[-3000:])
        yield Web(base_url=probe.base_url, log=log, pid=process.pid, env=env)


@pytest.fixture
def production(web: Web) -> Production:
    """`createsuperuser --noinput` (each test's database starts empty), and a browser of its own."""
    made = manage(web.env, "createsuperuser", "--noinput")
    assert made.returncode == 0, made.stderr[-3000:]
    return Production(client=ProxiedClient(web.base_url), web=web, log_start=web.log.stat().st_size)


@contextlib.contextmanager
def procfile_process(name: str, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The Procfile's `name` command, as its supervisor runs it, until the block ends."""
    with log.open("w") as output:
        process = subprocess.Popen(
            shlex.split(procfile_commands()[name]),
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole, with the processes it forks
        )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def readiness(client: ProxiedClient, *, until: Callable[[requests.Response], bool], log: Path) -> requests.Response:
    """/readyz, asked until `until` holds (two minutes at most: a busy machine starts a worker slowly)."""
    deadline = time.monotonic() + 120
    while True:
        answer = client.get("/readyz", proxied=False)  # a probe asks gunicorn directly, over plain http
        if until(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def test_production_serves_pages_static_files_and_the_api_docs_through_gunicorn(production: Production) -> None:
    client = production.client
    assert len(psutil.Process(production.web.pid).children()) == 2, production.log()  # WEB_CONCURRENCY

    # Plain http that did not come through the TLS proxy is sent to https, as production promises.
    direct = client.get("/login/", proxied=False)
    assert direct.status_code == 301
    assert direct.headers["Location"] == f"https://{HOST}/login/"

    login = client.get("/login/")
    assert login.status_code == 200, login.text[-2000:]
    stylesheet = re.search(r'<link rel="stylesheet" href="([^"]+)"', login.text)
    assert stylesheet and re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", stylesheet[1]), login.text[:2000]
    css = client.get(stylesheet[1])
    assert css.status_code == 200
    assert css.headers["Content-Type"].startswith("text/css")
    assert "immutable" in css.headers["Cache-Control"]  # a hashed name is cached for good

    logged_in = client.log_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    assert logged_in.status_code == 302, logged_in.text[-2000:]
    assert logged_in.headers["Location"] == "/"
    [device] = [name for name in client.cookies if name.startswith("tasklift_device_")]  # accounts/throttle.py
    for name in ("sessionid", "csrftoken", device):
        assert client.cookies[name].secure, name  # a browser sends them over https only
    assert client.cookies[device].has_nonstandard_attr("HttpOnly")

    tasks = client.get("/")
    assert tasks.status_code == 200, tasks.text[-2000:]
    assert "Log in" not in tasks.text

    docs = client.get("/api/docs")  # the superuser is staff; API_DOCS is "staff" in production
    assert docs.status_code == 200, docs.text[-2000:]
    for asset in re.findall(r'(?:href|src)="(/static/[^"]+)"', docs.text):
        assert client.get(asset).status_code == 200, asset  # Swagger UI's stylesheet and scripts
    assert client.get("/api/openapi.json").status_code == 200

    admin = client.get("/admin/")
    assert admin.status_code == 200, admin.text[-2000:]

    # /metrics wants its bearer token; production answers it over plain http (a scraper beside gunicorn).
    assert client.get("/metrics", proxied=False).status_code == 401
    assert client.get("/metrics", proxied=False, headers={"Authorization": "Bearer wrong"}).status_code == 401
    scraped = client.get("/metrics", proxied=False, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200, scraped.text[-2000:]
    assert "tasklift_queue_length" in scraped.text


def test_productions_access_log_keeps_no_token_of_a_refused_request_and_no_reset_link(production: Production) -> None:
    """Issue 21's request: a program's token put in the query is refused with 401, and logged without it, as a
    password-reset link is (JSON lines, gunicorn's two processes, behind the proxy's headers)."""
    token = "tl_" + secrets.token_urlsafe(32)
    assert production.client.get(f"/api/tasks?token={token}").status_code == 401
    assert production.client.get("/password-reset/MQ/c4n6ax-0123456789abcdef0123456789abcdef/").status_code == 400
    # Each access line is written once its answer is sent.
    wait_for(
        lambda: "GET /password-reset/" in production.log(), timeout=10, what="the access lines", detail=production.log
    )
    text = production.log()
    assert "GET /api/tasks?token=[redacted] HTTP/1.1" in text
    assert "GET /password-reset/[redacted]/[redacted]/ HTTP/1.1" in text
    assert token[3:] not in text and "c4n6ax" not in text


def test_production_is_ready_only_once_a_worker_runs_and_every_process_logs_json_from_its_release_on(
    production: Production, tmp_path: Path
) -> None:
    """/readyz in production: 503 naming the worker while beat runs alone, 200 once the Procfile's worker runs;
    it names the release, as `/metrics` does. Every line web, worker and beat write is one JSON object (Celery's
    banner was 27 lines of text), and the first says which release the process runs (issue 35)."""
    env = {**production.env, "TASKLIFT_LOCAL_DIR": str(tmp_path)}  # beat's schedule file: this test's own
    with procfile_process("beat", env, tmp_path / "beat.log"):
        alone = readiness(
            production.client, until=lambda r: r.json()["checks"]["beat"].startswith("ok"), log=tmp_path / "beat.log"
        )
        assert alone.status_code == 503, alone.text
        failing = sorted(name for name, check in alone.json()["checks"].items() if not check.startswith("ok"))
        assert failing == ["worker"], alone.text
        with procfile_process("worker", env, tmp_path / "worker.log"):
            ready = readiness(production.client, until=lambda r: r.status_code == 200, log=tmp_path / "worker.log")
            assert ready.status_code == 200, f"{ready.text}\n{(tmp_path / 'worker.log').read_text()[-3000:]}"
            assert ready.json()["status"] == "ok"
            assert ready.json()["version"] == release() != "unknown"
    scrape = production.client.get("/metrics", proxied=False, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert f'tasklift_build_info{{version="{release()}"}} 1.0' in scrape.text, scrape.text[:2000]
    logs = {"web": production.web.log, "beat": tmp_path / "beat.log", "worker": tmp_path / "worker.log"}
    for role, log in logs.items():
        text = log.read_text().splitlines()
        assert not [line for line in text if not line.startswith("{")], (role, text[:40])  # each a JSON object
        lines = [json.loads(line) for line in text]
        assert (lines[0]["logger"], lines[0]["role"], lines[0]["version"]) == ("tasklift.start", role, release())
    assert "hostname" in lines[0] and lines[0]["concurrency"] >= 1  # what the banner said of the worker


def test_every_static_file_a_template_names_is_in_the_manifest(static_root: Path) -> None:
    """collectstatic's post-processing already refused a stylesheet or script naming a file that is not shipped
    (the swagger-ui.css.map of issue 19); a template naming one would be a 500 on its page alone."""
    from django.apps import apps

    manifest = json.loads((static_root / "staticfiles.json").read_text())["paths"]
    # Ours and those of the installed apps (the admin's): any of them may be rendered in production.
    folders = [ROOT / "templates", *(Path(config.path) / "templates" for config in apps.get_app_configs())]
    named = {
        match
        for folder in folders
        for template in folder.rglob("*.html")
        for match in re.findall(r"""\{%\s*static\s+['"]([^'"]+)['"]""", template.read_text())
    }
    assert {"css/app.css", "admin/css/base.css"} <= named
    assert sorted(named - manifest.keys()) == []
