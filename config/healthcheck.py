"""`python -m config.healthcheck ROLE`: a container's or a host's health check, exit 0 when healthy, 1 otherwise,
with one line saying why (compose.yaml's healthchecks; docs/deploy.md, "Health").

- `web`: this machine's gunicorn answers `/readyz` with 200 (GUNICORN_BIND or PORT; sent with the Host of the
  first ALLOWED_HOSTS entry, as a proxy would send it).
- `worker`: a Celery worker of this host (its node name ends `@<hostname>`) wrote its heartbeat within
  READYZ_WORKER_SECONDS (config/heartbeat.py).
- `beat`: beat ticked within READYZ_BEAT_SECONDS.
- `imap-idle`: the `imap-idle` process of IMAP_IDLE_SHARD read its list of mailboxes within three of its refreshes.
- `inbound`: the `inbound` process greets an SMTP client (220) on INBOUND_SMTP_PORT of this machine.
- `supervise STATUS_FILE`: every process of `config.supervise --status-file` runs, none given up on.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
from pathlib import Path


def check_web() -> str | None:
    bind = os.environ.get("GUNICORN_BIND", "").strip() or f"0.0.0.0:{os.environ.get('PORT', '8000')}"
    host, _, port = bind.split(",")[0].rpartition(":")
    host = "127.0.0.1" if host in ("", "0.0.0.0", "[::]") else host.strip("[]")  # noqa: S104 — read, not bound
    allowed = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    name = allowed[0].lstrip(".") if allowed else "localhost"
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/readyz", headers={"Host": name})
        answer = connection.getresponse()
        body = answer.read().decode(errors="replace")
    except OSError as error:
        return f"the web did not answer on {host}:{port} ({type(error).__name__})"
    finally:
        connection.close()
    if answer.status != 200:
        try:
            failing = {k: v for k, v in json.loads(body)["checks"].items() if not v.startswith("ok")}
        except (ValueError, KeyError, AttributeError):
            failing = {"answer": body[:200]}
        return f"/readyz answered {answer.status}: {failing}"
    return None


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def check_worker() -> str | None:
    _django()
    from django.conf import settings

    from config.heartbeat import worker_hosts_alive

    here = socket.gethostname()
    hosts = worker_hosts_alive(within_s=settings.READYZ_WORKER_SECONDS)
    if not any(name.rpartition("@")[2] == here for name in hosts):
        return f"no worker of {here} wrote its heartbeat within {settings.READYZ_WORKER_SECONDS} s"
    return None


def check_beat() -> str | None:
    _django()
    from django.conf import settings

    from config.heartbeat import beat_tick_age

    age = beat_tick_age()
    if age is None or age > settings.READYZ_BEAT_SECONDS:
        return f"beat has not ticked within {settings.READYZ_BEAT_SECONDS} s"
    return None


def check_imap_idle() -> str | None:
    _django()
    from django.conf import settings

    from config.heartbeat import imap_idle_tick_age

    within = 3 * settings.IMAP_IDLE_REFRESH_SECONDS
    age = imap_idle_tick_age(settings.IMAP_IDLE_SHARD)
    if age is None or age > within:
        return f"the imap-idle process of shard {settings.IMAP_IDLE_SHARD} has not read its mailboxes within {within} s"
    return None


def check_inbound() -> str | None:
    import smtplib

    port = int(os.environ.get("INBOUND_SMTP_PORT", "2525") or 2525)
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
            code, _ = client.noop()
    except (OSError, smtplib.SMTPException) as error:
        return f"the inbound process did not greet on 127.0.0.1:{port} ({type(error).__name__})"
    return None if code == 250 else f"the inbound process answered NOOP with {code}"


def check_supervise(status_file: str) -> str | None:
    try:
        processes = json.loads(Path(status_file).read_text())["processes"]
    except (OSError, ValueError, KeyError) as error:
        return f"the status file {status_file} cannot be read ({type(error).__name__})"
    wrong = [
        f"{label}: {p['gave_up']}" if p.get("gave_up") else f"{label} is not running"
        for label, p in processes.items()
        if p.get("gave_up") or not p.get("running")
    ]
    return "; ".join(wrong) or None


def main(argv: list[str]) -> int:
    role = argv[0] if argv else ""
    if role == "supervise" and len(argv) == 2:
        problem = check_supervise(argv[1])
    elif role in ("web", "worker", "beat", "imap-idle", "inbound") and len(argv) == 1:
        checks = {
            "web": check_web,
            "worker": check_worker,
            "beat": check_beat,
            "imap-idle": check_imap_idle,
            "inbound": check_inbound,
        }
        problem = checks[role]()
    else:
        print(
            "usage: python -m config.healthcheck web|worker|beat|imap-idle|inbound|supervise STATUS_FILE",
            file=sys.stderr,
        )
        return 2
    print(f"{role}: {problem or 'healthy'}")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
