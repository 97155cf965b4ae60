"""What the push benchmarks (freshness.py, webhook_burst.py) share: Tasklift served for real with push on.

The pieces, each a process of its own as in production: the sandbox (`python -m sandbox`, its Pub/Sub and
Graph ringing the site), the web server (`manage.py runserver`, the doorbells at /webhooks/...), a Celery
worker (prefork) and Celery beat (the polling safety net and channel renewal, on their normal schedule).
A database of its own (dropped at the end), Redis database 2 with a queue and cache prefix of its own, all three
named after the benchmark (`tasklift-freshness`, `tasklift_freshness`): the two run side by side in `make test`, and
with one name between them each dropped the other's database and stole its beat lock.

One person with current AI consent, a Gmail and an Outlook mailbox connected the way the OAuth callbacks
connect them; their push channels are opened by the worker (the connect's job), the Pub/Sub push
subscription is configured in the sandbox as an operator configures it in the GCP console.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.common import (
    ROOT,
    SandboxProcess,
    connect_sandbox_gmail,
    database_create,
    database_drop,
    django_setup,
    postgres_server_url,
    redis_purge,
)
from config.ports import free_ports

GMAIL_ADDRESS = "fresh@example.com"
OUTLOOK_ADDRESS = "fresh@outlook.example.com"


@dataclass
class Site:
    """Tasklift served for the benchmark, and the person whose mailboxes ring."""

    sandbox: SandboxProcess
    client: Any  # SandboxClient
    url: str
    user: Any
    gmail: Any  # Integration
    outlook: Any  # Integration


def _start(command: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)


def _connect_outlook(user: Any) -> Any:
    from importlib import import_module

    from django.conf import settings

    from benchmarks.extract_outlook import approve_consent_page
    from integrations.oauth.microsoft import MicrosoftOAuthFlow
    from integrations.providers.outlook import graph_session
    from integrations.services import outlook_connect

    flow = MicrosoftOAuthFlow(import_module(settings.SESSION_ENGINE).SessionStore())
    params = approve_consent_page(
        graph_session(), flow.get_authorization_url(login_hint=OUTLOOK_ADDRESS), OUTLOOK_ADDRESS
    )
    msal_cache, home_account_id, access_token = flow.get_token_cache(params=params)
    return outlook_connect(user=user, msal_cache=msal_cache, home_account_id=home_account_id, access_token=access_token)


@contextlib.contextmanager
def served_site(*, name: str, llm_latency_ms: int, worker_concurrency: int = 2) -> Iterator[Site]:
    """Everything above, up and ready (both channels open, the first runs done); torn down afterwards. `name`, the
    benchmark's, names its queue and cache prefix (`tasklift-NAME`) and its database (`tasklift_NAME`)."""
    queue, database = f"tasklift-{name}", f"tasklift_{name}"
    sandbox = SandboxProcess(require_tls=True)
    log = tempfile.TemporaryFile()  # noqa: SIM115  closed below
    processes: list[subprocess.Popen[bytes]] = []
    created: str | None = None
    django_ready = False
    (web_port,) = free_ports(1)
    url = f"http://127.0.0.1:{web_port}"
    scratch = tempfile.TemporaryDirectory(prefix="tasklift-push-")
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, database)
        created = server_url
        os.environ.update(
            CELERY_QUEUE=queue,
            PUSH_ENABLED="true",
            PUSH_BASE_URL=url,
            SITE_URL=url,
            ALLOWED_HOSTS="127.0.0.1,localhost",
        )
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=queue)
        django_ready = True
        redis_purge(queue)  # its queue and cache keys, from Redis database 2

        from django.conf import settings

        from accounts.models import User
        from accounts.services import consent_grant
        from extraction.models import ExtractionRun
        from integrations.models import PushChannel
        from sandbox.client import SandboxClient

        env = dict(os.environ)
        processes.append(
            _start([sys.executable, "manage.py", "runserver", f"127.0.0.1:{web_port}", "--noreload"], env, log)
        )
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork", "-Q", queue]
        worker += ["--concurrency", str(worker_concurrency), "-n", "push@%h", "--loglevel", "WARNING"]
        worker += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        processes.append(_start(worker, env, log))
        beat = [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "WARNING"]
        beat += ["--schedule", str(Path(scratch.name) / "celerybeat-schedule")]
        processes.append(_start(beat, env, log))

        import requests

        def web_up() -> bool:
            try:
                return requests.get(f"{url}/healthz", timeout=2).status_code in (200, 503)
            except requests.RequestException:
                return False

        wait_until(web_up, 60, "the web server")

        client = SandboxClient(sandbox.url, timeout=60)
        client.reset()
        client.pubsub_subscribe(
            settings.GMAIL_PUSH_TOPIC,
            f"{url}/webhooks/gmail",
            settings.GMAIL_PUSH_SERVICE_ACCOUNT,
            audience=settings.GMAIL_PUSH_AUDIENCE,
        )
        user = User.objects.create_user(email="fresh@tasklift.test", password="x" * 20)
        consent_grant(user=user)
        gmail = connect_sandbox_gmail(client, user, GMAIL_ADDRESS)
        client.create_outlook_mailbox(OUTLOOK_ADDRESS)
        outlook = _connect_outlook(user)
        wait_until(lambda: PushChannel.objects.count() == 2, 60, "both push channels (opened by the worker)")
        # The first run of the Outlook mailbox lists its inbox and receives its first delta link.
        from extraction.services import extraction_run_request

        extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)
        wait_until(
            lambda: not ExtractionRun.objects.exclude(status__in=ExtractionRun.FINISHED).exists(),
            60,
            "the first run",
        )
        client.set_gemini_latency(llm_latency_ms)
        client.clear_notifications()
        yield Site(sandbox=sandbox, client=client, url=url, user=user, gmail=gmail, outlook=outlook)
    except BaseException:
        log.seek(0)
        print(log.read().decode(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        try:
            for process in reversed(processes):
                _stop(process)
            if django_ready:
                from django.db import connections

                redis_purge(queue)
                connections.close_all()
            if created is not None:
                database_drop(created, database)
        finally:
            sandbox.stop()
            log.close()
            scratch.cleanup()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 2)
