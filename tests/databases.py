"""One migrated database to copy from: the test run's databases (one per pytest-xdist worker) and the benchmarks'
smoke forms are made with `CREATE DATABASE … TEMPLATE` from a database that `migrate` built once for this
checkout's migrations, instead of each migrating an empty one (about 25 s of CPU each on two cores).

The template is named by a digest of every migration file and of uv.lock (the installed apps' own migrations),
so a changed migration builds a new one and the old ones are dropped. It is built under a name of its own and
renamed only once migrated, so a build that died leaves nothing that looks finished. It is never connected to
once built: PostgreSQL copies only a database nobody is connected to.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from django.conf import settings
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "tasklift_template_"
_LOCK = 0x7A5C_1F7  # pg_advisory_lock key: the workers of one run (and runs side by side) build it once


def with_database(url: str, name: str) -> str:
    """`url` (same server, user, options) for the database `name`."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _digest() -> str:
    digest = hashlib.sha256()
    for path in sorted([*ROOT.glob("*/migrations/*.py"), ROOT / "uv.lock"]):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def template_database() -> str:
    """The name of the migrated template on the server of settings.DATABASE_URL, built now if need be."""
    name = PREFIX + _digest()
    maintenance = with_database(settings.DATABASE_URL, "postgres")
    with psycopg.connect(maintenance, autocommit=True) as connection:
        connection.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
        try:
            databases = [row[0] for row in connection.execute("SELECT datname FROM pg_database")]
            if name not in databases:
                _build(connection, name)
                for stale in (d for d in databases if d.startswith(PREFIX)):  # other migrations than these
                    with contextlib.suppress(psycopg.errors.ObjectInUse):  # being copied by another run: kept
                        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(stale)))
        finally:
            connection.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))
    return name


def _build(connection: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    building = f"{name}_building"
    connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
    connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "DATABASE_URL": with_database(settings.DATABASE_URL, building),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert migrated.returncode == 0, f"migrating the template database failed:\n{migrated.stderr[-4000:]}"
    connection.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))


def end_other_sessions(name: str) -> int:
    """End every session on database `name` but the caller's: what threads of a test left connected (a thread's
    connection is its own; Django closes the main thread's only), so that the database can be dropped."""
    with psycopg.connect(with_database(settings.DATABASE_URL, "postgres"), autocommit=True) as connection:
        ended = connection.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        ).fetchone()
    return int(ended[0]) if ended else 0
