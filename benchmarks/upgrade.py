"""Upgrade: the previous release deployed as its runbook says, filled, upgraded to this checkout by the runbook's
steps under `config.supervise` while mail keeps arriving, its settings changed under it, then its database dumped,
restored into a new one and started on, with more mail. Nothing may be lost, duplicated or read twice.

    uv run python benchmarks/upgrade.py [--from v0.1.0] [--people 100] [--tasks-per-person 100] [--emails 2]

Setup (not measured): Debian's `postgresql` and `redis-server` (installed when missing, as benchmarks/production.py
does), each on a free loopback port with its data in a temporary folder; the sandbox over https (the demo
deployment). The previous release is its git tag, cloned from this repository (`git clone --branch TAG`), with
its own virtualenv (`uv sync --frozen --no-dev`, as the runbook's step 3). Its settings are one file, as the
runbook's step 5 writes it (the demo deployment's settings, SANDBOX_CA_BUNDLE its one CA setting).

1. **The previous release, full.** Its runbook's steps (`migrate`, `collectstatic`, `createsuperuser`), its
   processes under its own supervisor (`web=2 worker=2 beat=1`), then, through its own code: `--people` people
   who consent and connect a Gmail and an Outlook mailbox each, `--tasks-per-person` tasks added by hand each
   (due dates, priorities), and mail by push that its workers read: `--emails` letters per mailbox (half ask
   something), one email per person that asks something in a conversation that stays open, and one poison
   (Gemini answers it with no JSON) per ten people, quarantined.
2. **The upgrade, with mail arriving** (`--upgrade-seconds` of steady delivery, including a reply in each open
   conversation that settles it): this checkout's `migrate` on the full database while the old release serves
   (`migrate_s`), `collectstatic`, then the old supervisor stopped and this release's started with
   `--env-file` (0.1.0's supervisor stops on SIGHUP: CHANGELOG 0.2.0's upgrade notes). `downtime_s`: how long
   /healthz answered nothing between the two.
3. **Settings reloaded** (the runbook's key rotation under supervise): a new key put first in
   TASKLIFT_ENCRYPTION_KEYS, SIGHUP, `manage.py rotate_secrets` (every credential re-encrypted with the new key:
   a worker still without it could read no mailbox), mail read; then the old key removed, SIGHUP, mail read.
   `settings_reload_ok`: every process restarted each time and every email of both rounds read.
4. **Backup and restore**: `pg_dump --format=custom` while it runs; more mail read after the dump; the
   supervisor stopped, the dump restored into a new database (`pg_restore`), `migrate`, the settings file's
   DATABASE_URL pointed at it, the supervisor started again, and one more email to every mailbox. The restored
   database must end with every email of every round (`lost_after_restore`), having sent none of the mail it
   already held to Gemini again (`read_twice_after_restore`, from the sandbox's log of Gemini's prompts: each
   email's subject carries a reference of its own), with no task twice.

The last line is one JSON object; exit status 1 when a check fails. Everything it started is stopped at the end and
its temporary folder removed, even on failure. It needs the previous release's tag in this repository (`git tag`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.common import ROOT, git_version
from benchmarks.production import (
    PUSH_RETRY_DELAYS_MS,
    READY_TIMEOUT_S,
    SYSTEM_VARIABLES,
    Deliverer,
    Deployment,
    Mailbox,
    deployment_main,
    runbook_steps,
    servers_start,
    wait_for,
)
from config.supervise import env_file_read

DOWNTIME_MAX_S = 60.0  # the web between the old supervisor's stop and the new one's first answer

# Run by the previous release's Python in its checkout: its own code connects the people and adds their tasks.
FILL = r"""
import json, os, sys, time
from datetime import date, timedelta
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.conf import settings
from benchmarks.production import people_connect
from extraction.models import ExtractionRun
from extraction.services import extraction_run_request
from integrations.models import PushChannel
from sandbox.client import SandboxClient
from tasks.services import task_create
args = json.loads(sys.argv[1])
client = SandboxClient(args["sandbox"], timeout=60)
client.push_settings(retry_delays_ms=args["retry_delays_ms"])
client.pubsub_subscribe(settings.GMAIL_PUSH_TOPIC, f"{settings.PUSH_BASE_URL}/webhooks/gmail",
                        settings.GMAIL_PUSH_SERVICE_ACCOUNT, audience=settings.GMAIL_PUSH_AUDIENCE)
users, mailboxes = people_connect(client, args["people"])
for user in users:
    for n in range(args["tasks"]):
        task_create(user=user, title=f"Filed task {n}", priority=("", "high", "low")[n % 3],
                    due_date=date.today() + timedelta(days=n % 40) if n % 4 else None)
deadline = time.monotonic() + 300
while PushChannel.objects.count() < len(mailboxes) and time.monotonic() < deadline:
    time.sleep(0.5)
for user in users:  # the first read of each mailbox (Outlook's first delta link), as production.py does
    extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)
print(json.dumps({"mailboxes": [[m.person, m.provider, m.address, m.user_id] for m in mailboxes]}))
"""

SENDERS = ["Alex Morgan <alex@example.org>", "Sam Lee <sam@example.org>", "Chris Doe <chris@example.org>"]
POISON = "SANDBOX-ECHO-TEXT: not json"  # the sandbox's Gemini answers a batch holding it with no JSON


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="previous", default="v0.1.0", help="the previous release's tag (v0.1.0)")
    parser.add_argument("--people", type=int, default=100, help="people, each with Gmail and Outlook (100)")
    parser.add_argument("--tasks-per-person", type=int, default=100, help="tasks added by hand each (100)")
    parser.add_argument("--emails", type=int, default=2, help="letters per mailbox before the upgrade (2)")
    parser.add_argument("--upgrade-seconds", type=float, default=60, help="delivery during the upgrade (60)")
    parser.add_argument("--llm-latency-ms", type=int, default=100, help="sandbox Gemini latency (100)")
    parser.add_argument("--drain-timeout", type=float, default=600, help="max seconds for a round's mail (600)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mail (1)")
    parser.add_argument("--log", type=Path, help="keep every process's output in this file (default: removed)")
    args = parser.parse_args()
    if args.people < 1 or args.tasks_per_person < 0 or args.emails < 1 or args.upgrade_seconds <= 0:
        parser.error("positive sizes and times")
    return args


# The mail: each email's subject carries a reference of its own ----------------------------------------------
@dataclass(frozen=True)
class Letter:
    mailbox: Mailbox
    raw: str
    asks: int  # tasks it must give
    reference: str  # in its subject, so in the prompt that sends it to Gemini
    poison: bool = False
    conversation: str = ""  # the Message-ID of a conversation's ask (the ask itself and the reply settling it)


def _message(
    reference: str, to: str, subject: str, body: str, *, sender: str, message_id: str, replying_to: str = ""
) -> str:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"Upgrade Person <{to}>"
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = message_id
    if replying_to:
        message["In-Reply-To"] = message["References"] = replying_to
    message.set_content(body)
    return message.as_string()


def letters(mailboxes: Iterable[Mailbox], count: int, rng: random.Random, round_name: str) -> list[Letter]:
    """`count` letters to each mailbox, round robin; about half ask one thing."""
    out = []
    boxes = list(mailboxes)
    for n in range(count):
        for box in boxes:
            reference = f"ref-{round_name}-{box.person}-{box.provider}-{n}"
            asks = int(rng.random() < 0.5)
            lines = [f"The figures for {reference} are in the shared folder."]
            if asks:
                lines.append(f"Could you review the budget for {reference} by Friday?")
            body = "Hi,\n\n" + "\n".join(lines) + "\n\nThanks,\nAlex\n"
            message_id = f"<{reference}@example.org>"
            raw = _message(
                reference, box.address, f"Budget {reference}", body, sender=rng.choice(SENDERS), message_id=message_id
            )
            out.append(Letter(box, raw, asks, reference))
    return out


def conversation_asks(gmail: list[Mailbox]) -> list[Letter]:
    """One ask in a conversation per Gmail mailbox, left open until `conversation_replies` settles it."""
    out = []
    for box in gmail:
        reference = f"ref-ask-{box.person}"
        message_id = f"<{reference}@example.org>"
        body = f"Hi,\n\nCould you send the deck for {reference} by Friday?\n\nThanks,\nSam\n"
        raw = _message(reference, box.address, f"The deck {reference}", body, sender=SENDERS[1], message_id=message_id)
        out.append(Letter(box, raw, 1, reference, conversation=message_id))
    return out


def conversation_replies(asks: list[Letter]) -> list[Letter]:
    """Its asker's reply in each conversation: it settles the open item ("never mind") and asks nothing."""
    out = []
    for ask in asks:
        reference = f"{ask.reference}-reply"
        body = "Hi,\n\nNever mind, we found the deck.\n\nSam\n"
        raw = _message(
            reference,
            ask.mailbox.address,
            f"Re: The deck {ask.reference}",
            body,
            sender=SENDERS[1],
            message_id=f"<{reference}@example.org>",
            replying_to=ask.conversation,
        )
        out.append(Letter(ask.mailbox, raw, 0, reference, conversation=ask.conversation))
    return out


def poisons(gmail: list[Mailbox]) -> list[Letter]:
    """One email per ten people that Gemini cannot answer: set aside (quarantined), never lost."""
    out = []
    for box in gmail[::10]:
        reference = f"ref-poison-{box.person}"
        body = f"Hi,\n\nPlease look at {reference}.\n{POISON}\n"
        raw = _message(
            reference,
            box.address,
            f"Odd one {reference}",
            body,
            sender=SENDERS[2],
            message_id=f"<{reference}@example.org>",
        )
        out.append(Letter(box, raw, 0, reference, poison=True))
    return out


@dataclass
class Mail:
    """Every email delivered, by its provider message id."""

    letters: dict[str, Letter] = field(default_factory=dict)
    rounds: dict[str, set[str]] = field(default_factory=dict)

    def add(self, round_name: str, delivered: dict[str, Letter]) -> None:
        self.letters.update(delivered)
        self.rounds.setdefault(round_name, set()).update(delivered)


def deliver_all(client: Any, batch: list[Letter]) -> dict[str, Letter]:
    out = {}
    for letter in batch:
        if letter.mailbox.provider == "gmail":
            out[str(client.deliver(letter.mailbox.address, letter.raw)["id"])] = letter
        else:
            out[str(client.deliver_outlook(letter.mailbox.address, letter.raw)["id"])] = letter
    return out


# The database, read with SQL alone (the schema of either release) ---------------------------------------------
class Database:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=10) as connection:
            return list(connection.execute(sql, params).fetchall())

    def ledger(self, ids: Iterable[str]) -> dict[str, str]:
        """message id: outcome, of these emails that are in the ledger."""
        rows = self.query(
            "SELECT message_id, outcome FROM extraction_processedemail WHERE message_id = ANY(%s)", list(ids)
        )
        return {str(m): str(o) for m, o in rows}

    def tasks(self, ids: Iterable[str]) -> Counter[str]:
        """How many tasks each of these emails gave."""
        rows = self.query("SELECT source_id FROM tasks_task WHERE source_id = ANY(%s)", list(ids))
        return Counter(str(r[0]) for r in rows)

    def open_tasks(self, ids: Iterable[str]) -> int:
        rows = self.query("SELECT count(*) FROM tasks_task WHERE source_id = ANY(%s) AND status = 'open'", list(ids))
        return int(rows[0][0])

    def count(self, table: str) -> int:
        return int(self.query(f"SELECT count(*) FROM {table}")[0][0])

    def active_runs(self) -> int:
        return int(
            self.query("SELECT count(*) FROM extraction_extractionrun WHERE status IN ('queued', 'running')")[0][0]
        )


def drained(database: Database, ids: set[str], timeout: float, what: str) -> bool:
    """Until every one of `ids` is in the ledger and no run is queued or running; False when not in time."""
    try:
        wait_for(lambda: len(database.ledger(ids)) == len(ids) and not database.active_runs(), timeout, what)
    except RuntimeError as error:
        print(f"NOT DRAINED: {error}", flush=True)
        return False
    return True


def mail_figures(database: Database, mail: Mail, ids: set[str]) -> dict[str, Any]:
    """Lost (not in the ledger, or fewer tasks than it asks), duplicated tasks, and what was set aside."""
    ledger = database.ledger(ids)
    tasks = database.tasks(ids)
    lost = {m for m in ids if m not in ledger or tasks[m] < mail.letters[m].asks}
    poisoned = {m for m in ids if mail.letters[m].poison}
    return {
        "emails": len(ids),
        "lost": len(lost),
        "lost_first": sorted(mail.letters[m].reference for m in lost)[:5],
        "duplicates": sum(max(0, tasks[m] - mail.letters[m].asks) for m in ids),
        "quarantined": sum(1 for m in poisoned if ledger.get(m) == "quarantined"),
    }


# The deployment's settings file and processes ---------------------------------------------------------------
def settings_write(path: Path, settings: dict[str, str]) -> None:
    """The settings file as the runbook's step 5 writes it: NAME=value lines, for `sh` to read."""
    partial = path.with_suffix(".partial")
    partial.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in sorted(settings.items())))
    partial.chmod(0o640)
    partial.rename(path)  # whole or not at all: the supervisor may read it at any moment


def process_env(settings_file: Path, venv_bin: Path) -> dict[str, str]:
    """What deploy/env.sh gives a command: the system's variables, the settings file, the virtualenv first."""
    system = {k: v for k, v in os.environ.items() if k in SYSTEM_VARIABLES or k.startswith("LC_")}
    return {**system, **env_file_read(settings_file), "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}


def release_checkout(release: str, folder: Path, log: IO[bytes]) -> tuple[Path, str]:
    """The release `release` (its tag, or its commit) cloned from this repository into `folder`, with its own
    virtualenv (runbook step 3): the folder and its Python."""
    known = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{release}^{{commit}}"], cwd=ROOT, check=False, capture_output=True
    )
    if known.returncode:
        raise RuntimeError(f"no {release} in this repository (git tag): the previous release cannot be built")
    for command in (["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(folder)],
                    ["git", "-C", str(folder), "checkout", "--quiet", known.stdout.decode().strip()]):  # fmt: skip
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, timeout=300)
    found = os.environ.get("UV") or shutil.which("uv")  # `uv run` names itself in UV
    uv = [found] if found else ["python3", "-m", "uv"]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    subprocess.run(
        [*uv, "sync", "--frozen", "--no-dev", "--quiet"],
        cwd=folder,
        env=env,
        check=True,
        stdout=log,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    return folder, str(folder / ".venv" / "bin" / "python")


def project_version(folder: Path) -> str:
    return str(tomllib.loads((folder / "pyproject.toml").read_text())["project"]["version"])


class WebProbe(threading.Thread):
    """/healthz every 0.1 s: (time, answered 200) of each try."""

    def __init__(self, site: str) -> None:
        super().__init__(daemon=True)
        self.site = site
        self.samples: list[tuple[float, bool]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        import requests

        while not self.stop.wait(0.1):
            try:
                ok = requests.get(f"{self.site}/healthz", headers={"X-Forwarded-Proto": "https"}, timeout=2).ok
            except requests.RequestException:
                ok = False
            self.samples.append((time.monotonic(), ok))

    def downtime(self) -> float:
        """The seconds from each failed answer to the next good one, summed."""
        total, failed_at = 0.0, None
        for at, ok in list(self.samples):
            if not ok and failed_at is None:
                failed_at = at
            elif ok and failed_at is not None:
                total += at - failed_at
                failed_at = None
        if failed_at is not None:
            total += self.samples[-1][0] - failed_at
        return total


def reload_settings(deployment: Deployment, settings_file: Path, settings: dict[str, str], timeout: float) -> bool:
    """Write the settings, SIGHUP the supervisor; True once every process runs again under a new pid."""
    before = {entry["label"]: entry["pid"] for entry in deployment.processes()}
    settings_write(settings_file, settings)
    assert deployment.supervisor is not None
    os.kill(deployment.supervisor.pid, signal.SIGHUP)

    def restarted() -> bool:
        now = {entry["label"]: entry["pid"] for entry in deployment.processes() if entry.get("running", True)}
        return now.keys() == before.keys() and not set(now.values()) & set(before.values())

    try:
        wait_for(restarted, timeout, "every process restarted by SIGHUP")
    except RuntimeError as error:
        print(f"NOT RELOADED: {error}", flush=True)
        return False
    return True


# The benchmark ------------------------------------------------------------------------------------------------
def bench(args: argparse.Namespace, stack: contextlib.ExitStack) -> dict[str, Any]:
    started = time.perf_counter()
    rng = random.Random(args.seed)
    servers = servers_start("upgrade", args.log, stack)
    scratch, log, bin_dir, postgres, sandbox = (
        servers.scratch,
        servers.log,
        servers.bin_dir,
        servers.postgres,
        servers.sandbox,
    )
    env, metrics_token, web_port = servers.env, servers.metrics_token, servers.web_port
    old_app, old_python = release_checkout(args.previous, scratch / "previous", log)
    from_version, to_version = project_version(old_app), project_version(ROOT)
    settings = {k: v for k, v in env.items() if k != "PATH" and k not in SYSTEM_VARIABLES and not k.startswith("LC_")}
    settings_file = scratch / "tasklift.env"
    settings_write(settings_file, settings)
    old_env = process_env(settings_file, Path(old_python).parent)
    new_env = process_env(settings_file, Path(sys.executable).parent)
    site = f"http://127.0.0.1:{web_port}"
    status_file = scratch / "supervise.json"
    print(
        f"setup: {args.previous} ({from_version}) in {old_app}, this checkout {to_version}; PostgreSQL "
        f"{bin_dir.parent.name} on port {postgres.port}, redis-server on port {servers.redis.port}",
        flush=True,
    )

    # 1. The previous release, full ---------------------------------------------------------------------------
    runbook_steps(old_env, log, app=old_app, python=old_python)
    old = Deployment(old_env, site, status_file, metrics_token, log, app=old_app, python=old_python)
    old.start()
    stack.callback(old.stop)
    wait_for(lambda: old.get("/readyz")[0] == 200, READY_TIMEOUT_S, "the previous release's /readyz 200")
    from sandbox.client import SandboxClient

    client = SandboxClient(sandbox.url, timeout=60)
    filled = subprocess.run(
        [
            old_python,
            "-c",
            FILL,
            json.dumps(
                {
                    "sandbox": sandbox.url,
                    "people": args.people,
                    "tasks": args.tasks_per_person,
                    "retry_delays_ms": PUSH_RETRY_DELAYS_MS,
                }
            ),
        ],
        cwd=old_app,
        env={**old_env, "LOG_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if filled.returncode:
        raise RuntimeError(f"filling the previous release failed:\n{filled.stdout[-2000:]}\n{filled.stderr[-4000:]}")
    mailboxes = [
        Mailbox(p, provider, address, u)
        for p, provider, address, u in json.loads(filled.stdout.strip().splitlines()[-1])["mailboxes"]
    ]
    gmail = [m for m in mailboxes if m.provider == "gmail"]
    database = Database(postgres.url)
    wait_for(lambda: not database.active_runs(), 300, "the first runs")
    client.set_gemini_latency(args.llm_latency_ms)
    mail = Mail()
    asks = conversation_asks(gmail)
    mail.add("before", deliver_all(client, [*letters(mailboxes, args.emails, rng, "A"), *asks, *poisons(gmail)]))
    ok_before = drained(database, mail.rounds["before"], args.drain_timeout, "the mail before the upgrade")
    tasks_before = database.count("tasks_task")
    open_conversations = database.open_tasks(m for m, letter in mail.letters.items() if letter.conversation)
    print(
        f"full:  {args.previous}: {len(mailboxes) // 2} people, {tasks_before} tasks, {len(mail.letters)} emails "
        f"read ({open_conversations} open conversations) in {time.perf_counter() - started:.0f} s",
        flush=True,
    )

    # 2. The upgrade, with mail arriving ----------------------------------------------------------------------
    during = [*letters(mailboxes, 1, rng, "B"), *conversation_replies(asks)]
    rng.shuffle(during)
    deliverer = Deliverer(
        client, [(letter.mailbox, letter.raw, letter.asks) for letter in during], args.upgrade_seconds
    )
    stack.callback(deliverer.stop.set)
    probe = WebProbe(site)
    stack.callback(probe.stop.set)
    deliverer.start()
    probe.start()
    steps = runbook_steps(new_env, log, steps=(("migrate", "--noinput"), ("collectstatic", "--noinput")))
    old.stop()  # 0.1.0's supervisor stops on SIGHUP: stopped, and this release's started (CHANGELOG 0.2.0)
    new = Deployment(
        new_env, site, status_file, metrics_token, log, options=("--env-file", str(settings_file), "--metrics-clear")
    )
    new.start()
    stack.callback(new.stop)
    wait_for(lambda: new.get("/readyz")[0] == 200, READY_TIMEOUT_S, "this release's /readyz 200")
    probe.stop.set()
    readyz = json.loads(new.get("/readyz")[1] or "{}")
    deliverer.join(timeout=args.upgrade_seconds + 120)
    if deliverer.error is not None:
        raise RuntimeError(f"delivering mail failed: {deliverer.error!r}")
    with deliverer.lock:  # delivered in the plan's order
        mail.add("during", {m: during[n] for n, m in enumerate(deliverer.delivered)})
    ok_during = drained(database, mail.rounds["during"], args.drain_timeout, "the mail during the upgrade")
    settled = open_conversations - database.open_tasks(m for m, letter in mail.letters.items() if letter.conversation)

    # 3. Settings reloaded: a key added, then the old one removed -----------------------------------------------
    from cryptography.fernet import Fernet

    old_key = settings["TASKLIFT_ENCRYPTION_KEYS"]
    new_key = Fernet.generate_key().decode()
    reloads = [
        reload_settings(
            new, settings_file, {**settings, "TASKLIFT_ENCRYPTION_KEYS": f"{new_key},{old_key}"}, READY_TIMEOUT_S
        )
    ]
    runbook_steps(process_env(settings_file, Path(sys.executable).parent), log, steps=(("rotate_secrets",),))
    mail.add("key added", deliver_all(client, letters(mailboxes, 1, rng, "C")))
    rounds_read = [drained(database, mail.rounds["key added"], args.drain_timeout, "the mail after a key was added")]
    settings["TASKLIFT_ENCRYPTION_KEYS"] = new_key
    reloads.append(reload_settings(new, settings_file, settings, READY_TIMEOUT_S))
    mail.add("key removed", deliver_all(client, letters(mailboxes, 1, rng, "D")))
    rounds_read.append(drained(database, mail.rounds["key removed"], args.drain_timeout, "the mail, old key gone"))
    settings_reload_ok = all(reloads) and all(rounds_read)
    upgraded = mail_figures(database, mail, set(mail.letters))
    tasks_after = database.count("tasks_task")

    # 4. Backup and restore -------------------------------------------------------------------------------------
    dump = scratch / "tasklift.dump"
    dump_started = time.monotonic()
    with dump.open("wb") as out:
        subprocess.run(
            [str(bin_dir / "pg_dump"), "--format=custom", "--dbname", postgres.url], stdout=out, check=True, timeout=900
        )
    dump_s = time.monotonic() - dump_started
    mail.add("after the dump", deliver_all(client, letters(gmail, 1, rng, "E")))
    drained(database, mail.rounds["after the dump"], args.drain_timeout, "the mail after the dump")
    new.stop()
    restored_url = postgres.url.rsplit("/", 1)[0] + "/tasklift_restored"
    import psycopg

    with psycopg.connect(postgres.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        connection.execute('CREATE DATABASE "tasklift_restored"')
    restore_started = time.monotonic()
    subprocess.run(
        [str(bin_dir / "pg_restore"), "--no-owner", "--dbname", restored_url, str(dump)],
        check=True,
        stdout=log,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    settings["DATABASE_URL"] = restored_url
    settings_write(settings_file, settings)
    restored_env = process_env(settings_file, Path(sys.executable).parent)
    runbook_steps(restored_env, log, steps=(("migrate", "--noinput"),))
    restore_s = time.monotonic() - restore_started
    restored = Database(restored_url)
    in_dump = set(restored.ledger(mail.letters))
    client.clear_requests()
    again = Deployment(
        restored_env,
        site,
        status_file,
        metrics_token,
        log,
        options=("--env-file", str(settings_file), "--metrics-clear"),
    )
    again.start()
    stack.callback(again.stop)
    wait_for(lambda: again.get("/readyz")[0] == 200, READY_TIMEOUT_S, "/readyz 200 on the restored database")
    mail.add("after the restore", deliver_all(client, letters(mailboxes, 1, rng, "F")))
    ok_restore = drained(restored, set(mail.letters), args.drain_timeout, "every email in the restored database")
    prompts = " ".join(r.get("body") or "" for r in client.requests("gemini") if r["method"] == "POST")
    sent_again = set(re.findall(r"ref-[A-Za-z]+-[\w-]+", prompts))
    read_twice = sorted(mail.letters[m].reference for m in in_dump if mail.letters[m].reference in sent_again)
    # The measure itself: the mail the restored database had not seen must be in the log it is read from.
    unseen = {mail.letters[m].reference for m in mail.letters.keys() - in_dump if not mail.letters[m].poison}
    gemini_log_complete = unseen <= sent_again
    after_restore = mail_figures(restored, mail, set(mail.letters))

    figures: dict[str, Any] = {
        "benchmark": "upgrade",
        "version": git_version(),
        "from_version": from_version,
        "to_version": to_version,
        "readyz_version": readyz.get("version"),
        "people": len(mailboxes) // 2,
        "mailboxes": len(mailboxes),
        "tasks_before": tasks_before,
        "tasks_after": tasks_after,
        "migrate_s": round(steps["migrate"], 1),
        "collectstatic_s": round(steps["collectstatic"], 1),
        "downtime_s": round(probe.downtime(), 1),
        "emails": upgraded["emails"],
        "emails_during_upgrade": len(mail.rounds["during"]),
        "lost": upgraded["lost"],
        "lost_first": upgraded["lost_first"],
        "duplicates": upgraded["duplicates"],
        "quarantined": upgraded["quarantined"],
        "poisons": sum(1 for letter in mail.letters.values() if letter.poison),
        "open_conversations": open_conversations,
        "conversations_settled_after_upgrade": settled,
        "settings_reload_ok": settings_reload_ok,
        "settings_reloads": reloads,
        "dump_s": round(dump_s, 1),
        "restore_s": round(restore_s, 1),
        "emails_in_dump": len(in_dump),
        "emails_after_dump": len(mail.rounds["after the dump"]) + len(mail.rounds["after the restore"]),
        "read_twice_after_restore": len(read_twice),
        "read_twice_first": read_twice[:5],
        "lost_after_restore": after_restore["lost"],
        "duplicates_after_restore": after_restore["duplicates"],
        "quarantined_after_restore": after_restore["quarantined"],
        "drained": ok_before and ok_during and ok_restore,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    checks = {
        "lost == 0": figures["lost"] == 0,
        "duplicates == 0": figures["duplicates"] == 0,
        "every round's mail read in time": figures["drained"],
        "the poisons quarantined": figures["quarantined"] == figures["poisons"],
        "every open conversation settled by its reply": settled == open_conversations == len(gmail),
        "tasks_after >= tasks_before": tasks_after >= tasks_before,
        "readyz names this release": figures["readyz_version"] == to_version,
        f"downtime_s <= {DOWNTIME_MAX_S:g}": figures["downtime_s"] <= DOWNTIME_MAX_S,
        "settings_reload_ok": settings_reload_ok,
        "read_twice_after_restore == 0": not read_twice,
        "the Gemini log names the mail read after the restore (read_twice can be seen)": gemini_log_complete,
        "lost_after_restore == 0": figures["lost_after_restore"] == 0,
        "duplicates_after_restore == 0": figures["duplicates_after_restore"] == 0,
        "quarantined mail restored": figures["quarantined_after_restore"] == figures["poisons"],
    }
    figures["checks_failed"] = [name for name, ok in checks.items() if not ok]
    return figures


def report(f: dict[str, Any]) -> None:
    print(
        f"upgrade: {f['from_version']} -> {f['to_version']} (/readyz says {f['readyz_version']}); migrate "
        f"{f['migrate_s']} s on {f['tasks_before']} tasks, the web down {f['downtime_s']} s"
    )
    print(
        f"mail:  {f['emails']} emails ({f['emails_during_upgrade']} during the upgrade): {f['lost']} lost, "
        f"{f['duplicates']} duplicates, {f['quarantined']} of {f['poisons']} poisons set aside; "
        f"{f['conversations_settled_after_upgrade']} of {f['open_conversations']} open conversations settled"
    )
    print(f"settings: reloaded {f['settings_reloads']}, mail read after each: {f['settings_reload_ok']}")
    print(
        f"restore: dump {f['dump_s']} s, restore and migrate {f['restore_s']} s; {f['emails_in_dump']} emails in "
        f"the dump, {f['emails_after_dump']} after it: {f['read_twice_after_restore']} read twice, "
        f"{f['lost_after_restore']} lost, {f['duplicates_after_restore']} duplicates"
    )
    print(f"time:  {f['wall_s']} s in all")
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    args = parse_args()
    banner = (
        f"benchmark upgrade: {args.previous} -> this checkout; {args.people} people, "
        f"{args.tasks_per_person} tasks each, {args.emails} letters per mailbox before"
    )
    return deployment_main(banner, args, bench, report)


if __name__ == "__main__":
    sys.exit(main())
