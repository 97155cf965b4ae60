"""Chaos: real Celery workers SIGKILLed every few seconds while people's mail is read under faults; then the
figures that say whether any email was lost, any task duplicated, or any run left stuck.

    uv run python benchmarks/chaos.py [--people 5] [--emails 200] [--duration 60] [--kill-every 4] [--seed 1]
        [--poll-seconds 15]

Setup: the sandbox in a process of its own, a fresh database `tasklift_chaos` (dropped at the end), Redis
database 2 with a Celery queue and cache prefix of its own (`tasklift-chaos`). Each person connects a Gmail
and an Outlook mailbox; `--emails` per person are split between the two (the seeded mix of benchmarks/common.py).

A clean reference first: the same mail for clean copies of the people, read in this process without any
fault. Its task set (person, provider, subject, title) is what the chaos must end with.

Runs start as in production, never at the benchmark's request: Tasklift's web server runs (`manage.py
runserver`) and the sandbox's Pub/Sub and Graph ring its webhooks when mail arrives (the doorbells: each
mailbox's push channel is opened by a worker, as at connect); beat's two jobs run here, every 3 s:
`extraction_schedule_job`, the polling safety net, with a poll interval of `--poll-seconds` (production's
EXTRACTION_SCHEDULE_MINUTES, scaled down: it reads what no ring announced, such as mail still to be read after
a fetch failure), and `extraction_reap_job` (runs whose runner died).

The chaos, for `--duration` seconds: `--workers` real `celery -A config worker` processes (prefork,
`--concurrency` each) take the runs; every `--kill-every` s (±50 %) a pool child or a whole worker (its
process group) is SIGKILLed, and a killed worker is started again. The first half of the mail is delivered
just before, its pushes held by the sandbox and let go when the chaos starts; the second half arrives
half-way, ringing as it comes. Faults through the sandbox control API:
- about 20 % of Gemini calls answer 503 or 500 (the sandbox has no probabilistic fault, so `times`-limited
  faults are topped up every half second to a fifth of the calls just seen);
- a transient 404 (times=1) on a few Gmail message reads and a few Graph message reads;
- one message per provider that always fails to fetch (500 on its id, until cleared);
- one email whose content always makes Gemini fail (500 matched on a string in its body);
- one Gmail cursor expired half-way (its history forgotten), just before the second half of the mail arrives;
- old mail moved into the inbox before a resync (one person per provider): an email received three days ago
  into another label (Gmail) or the Archive folder (Outlook), left there by a successful read, then moved into
  the inbox, then the mailbox's cursor expired, before the chaos. Its task must come, like any inbox mail's
  (`moved_in_before_resync_lost`: such emails not read by the end).

Then the chaos stops (no more kills, transient faults cleared, poison faults kept) and beat's jobs go on
until every email is in the ledger (at most `--drain-timeout` s). The figures come from the database. Then
the poison faults are cleared, the quarantined emails replayed (`ledger_replay`) and read again: their tasks
must come back, and the task set must equal the clean one.

A benchmark that tests nothing fails too: a chaos phase that made no Gemini call, read no mail, or had no run
rung by a push is a failed check, as is no SIGKILL when the chaos lasted long enough for one.

Human-readable figures first; the last line is one JSON object. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
import contextlib

from benchmarks.common import (
    ROOT,
    Mail,
    SandboxProcess,
    connect_sandbox_gmail,
    connect_sandbox_outlook,
    database_create,
    database_drop,
    django_setup,
    git_version,
    mail_mix,
    postgres_server_url,
    redis_purge,
)
from benchmarks.push_common import _start, _stop
from config.ports import free_ports

if TYPE_CHECKING:  # imported for real only after django.setup()
    from accounts.models import User
    from sandbox.client import SandboxClient

TaskKey = tuple[int, str, str, str]

CHAOS_DATABASE = "tasklift_chaos"
CHAOS_NAME = "tasklift-chaos"  # its Celery queue and cache prefix
POISON_MARK = "CHAOS-POISON-GEMINI-7F3A"
POISON_TEXT = f"Reference {POISON_MARK} for the archive."
BEAT_EVERY_S = 3.0
GEMINI_FAULT_SHARE = 0.2
MOVED_IN_AGE = timedelta(days=3)
MOVED_IN_CHECK = "moved_in_before_resync_lost == 0"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=5, help="people, each with Gmail and Outlook (default 5)")
    parser.add_argument("--emails", type=int, default=200, help="emails per person, half per mailbox (default 200)")
    parser.add_argument("--duration", type=float, default=60, help="seconds of chaos (default 60)")
    parser.add_argument("--kill-every", type=float, default=4, help="mean seconds between kills (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=2, help="prefork children per worker (default 2)")
    parser.add_argument("--llm-latency-ms", type=int, default=200, help="sandbox Gemini latency (default 200)")
    parser.add_argument("--drain-timeout", type=float, default=240, help="max seconds to finish (default 240)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mail and of the chaos (default 1)")
    parser.add_argument(
        "--poll-seconds", type=float, default=15, help="the polling safety net's interval, scaled down (default 15)"
    )
    args = parser.parse_args()
    if args.people < 4 or args.emails < 20 or args.duration <= 0 or args.kill_every <= 0 or args.workers < 1:
        parser.error("--people >= 4 (the poisons go to different people), --emails >= 20, positive times")
    if args.poll_seconds < BEAT_EVERY_S:
        parser.error(f"--poll-seconds >= {BEAT_EVERY_S:g} (beat's tick)")
    return args


# The mail of a person ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Letter:
    """One email of the mix, as the clean and the chaos copies of a person both receive it."""

    person: int
    provider: str  # "gmail" | "outlook"
    subject: str
    raw: str
    asks: int


def letters(person: int, count: int, seed: int) -> dict[str, list[Letter]]:
    """A person's mail by provider, in delivery order; person 2's Gmail also holds the Gemini poison."""
    out: dict[str, list[Letter]] = {}
    for index, provider in enumerate(("gmail", "outlook")):
        mix: list[Mail] = mail_mix(
            count,
            0.5,
            seed * 1000 + person * 2 + index,
            to=f"person{person}@example.com",
            first_date=datetime.now(UTC) - timedelta(hours=1),
            step=timedelta(seconds=1),
        )
        out[provider] = [Letter(person, provider, _subject(m.raw), m.raw, m.asks) for m in mix]
    if person == 2:
        out["gmail"].insert(3, Letter(person, "gmail", "Project 900", _poison(), 1))
    return out


def _subject(raw: str) -> str:
    return next(line[9:] for line in raw.splitlines() if line.startswith("Subject: "))


def _poison() -> str:
    message = EmailMessage()
    message["From"] = "Alex Colleague <alex@example.com>"
    message["To"] = "Person <person2@example.com>"
    message["Subject"] = "Project 900"
    message["Date"] = format_datetime(datetime.now(UTC) - timedelta(hours=1))
    message["Message-ID"] = "<chaos-poison-900@example.com>"
    message.set_content(f"Hi,\n\n{POISON_TEXT}\nPlease send the report for project 900 by Friday.\n\nAlex\n")
    return message.as_string()


def _moved_in(person: int, provider: str) -> Letter:
    """An email received three days ago outside the inbox, with one ask: to be moved into the inbox."""
    subject = f"Project 901 {provider}"
    message = EmailMessage()
    message["From"] = "Sam Manager <sam@example.org>"
    message["To"] = f"Person <person{person}@example.com>"
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now(UTC) - MOVED_IN_AGE)
    message["Message-ID"] = f"<chaos-moved-in-{person}-{provider}@example.com>"
    message.set_content("Hi,\n\nPlease send the report for project 901 by Friday.\n\nSam\n")
    return Letter(person, provider, subject, message.as_string(), 1)


# People and mailboxes -------------------------------------------------------------------------------------------
@dataclass
class Person:
    index: int
    user: User
    gmail: str  # mailbox addresses
    outlook: str
    letters: dict[str, list[Letter]]
    delivered: dict[str, Letter] = field(default_factory=dict)  # provider message id -> letter


def person_create(
    client: SandboxClient, sandbox: SandboxProcess, *, kind: str, index: int, count: int, seed: int
) -> Person:
    from accounts.services import consent_grant, user_create

    user = user_create(email=f"{kind}{index}@tasklift.test", password="chaos-only-password-never-used")
    consent_grant(user=user)
    gmail, outlook = f"{kind}{index}@example.com", f"{kind}{index}@outlook.example.com"
    connect_sandbox_gmail(client, user, gmail)
    connect_sandbox_outlook(client, user, outlook)
    person = Person(index, user, gmail, outlook, letters(index, count // 2, seed))
    run_now(person.user)  # the first read of the empty mailboxes: Outlook's first deltaLink
    return person


def deliver(client: SandboxClient, person: Person, *, half: int) -> None:
    """The first (0) or second (1) half of each of the person's mailboxes."""
    for provider, mail in person.letters.items():
        middle = len(mail) // 2
        for letter in mail[:middle] if half == 0 else mail[middle:]:
            if provider == "gmail":
                message_id = client.deliver(person.gmail, letter.raw)["id"]
            else:
                message_id = client.deliver_outlook(person.outlook, letter.raw)["id"]
            person.delivered[str(message_id)] = letter


def moved_in_before_resync(client: SandboxClient, person: Person, provider: str) -> tuple[str, Letter]:
    """Old mail moved into the inbox after the last successful read, then the mailbox's cursor expired
    (Gmail history 404, Graph 410): the next run resyncs, and must read that email (issue 20)."""
    letter = _moved_in(person.index, provider)
    received = datetime.now(UTC) - MOVED_IN_AGE
    if provider == "gmail":
        message_id = str(client.deliver(person.gmail, letter.raw, labels=["Label_7"], internal_date=received)["id"])
        run_now(person.user)  # a successful read, which the email, outside the inbox, is no part of
        client.modify_labels(person.gmail, message_id, add=["INBOX"])
        client.expire_history(person.gmail)
    else:
        message_id = str(
            client.deliver_outlook(person.outlook, letter.raw, folder="archive", received_at=received)["id"]
        )
        run_now(person.user)
        client.move_outlook(person.outlook, [message_id], "inbox")
        client.expire_outlook_delta(person.outlook)
    return message_id, letter


def run_now(user: User) -> Any:
    from extraction.models import ExtractionRun
    from extraction.pipeline import extraction_run_execute

    run = extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN))
    if run.status != ExtractionRun.Status.SUCCEEDED:
        raise RuntimeError(f"a run without faults did not succeed: {run.status} {run.error_message}")
    return run


def task_keys(users: list[User], *, leave_out: frozenset[tuple[int, str, str]] = frozenset()) -> Counter[TaskKey]:
    """(person, provider, email subject, title) of every task of `users` (person = position in `users`), but
    those of the emails `leave_out` names (person, provider, subject)."""
    from tasks.models import Task

    position = {u.pk: i for i, u in enumerate(users)}
    rows = Task.objects.filter(user__in=users).values_list("user_id", "integration__provider", "email_subject", "title")
    keys = ((position[u], p, s, t) for u, p, s, t in rows)
    return Counter(k for k in keys if k[:3] not in leave_out)


# The workers ----------------------------------------------------------------------------------------------------
class Workers:
    """`--workers` real Celery workers on the chaos queue (or another benchmark's `queue`), each in a process
    group of its own."""

    def __init__(
        self, count: int, concurrency: int, env: dict[str, str], log: IO[bytes], *, queue: str = CHAOS_NAME
    ) -> None:
        self.concurrency, self.env, self.log, self.queue = concurrency, env, log, queue
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * count
        self.kills = Counter[str]()
        for slot in range(count):
            self.start(slot)

    def start(self, slot: int) -> None:
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork"]
        command += ["--concurrency", str(self.concurrency), "-Q", self.queue, "-n", f"{self.queue}{slot}@%h"]
        command += ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"]
        self.processes[slot] = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def children(self, slot: int) -> list[int]:
        process = self.processes[slot]
        if process is None or process.poll() is not None:
            return []
        try:
            return [int(p) for p in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
        except OSError:
            return []

    def ready(self) -> bool:
        return all(len(self.children(slot)) >= self.concurrency for slot in range(len(self.processes)))

    def kill_one(self, rng: random.Random) -> str:
        """SIGKILL a random pool child (two times in three) or a whole worker, which is started again."""
        slot = rng.randrange(len(self.processes))
        children = self.children(slot)
        if children and rng.random() < 2 / 3:
            _kill(rng.choice(children))
            self.kills["pool_child"] += 1
            return "pool child"
        self._kill_group(slot)
        self.kills["worker"] += 1
        self.start(slot)
        return "worker"

    def _kill_group(self, slot: int) -> None:
        process = self.processes[slot]
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the worker and its pool, as when its machine dies
        process.wait(timeout=30)
        self.processes[slot] = None

    def restart_dead(self) -> None:
        for slot, process in enumerate(self.processes):
            if process is None or process.poll() is not None:
                self._kill_group(slot)
                self.start(slot)

    def stop(self) -> None:
        for slot in range(len(self.processes)):
            self._kill_group(slot)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# Faults -----------------------------------------------------------------------------------------------------------
class GeminiFaults:
    """About a fifth of Gemini calls fail: after each look at the request log, a `times`-limited 5xx fault for a
    fifth of the calls just seen (the sandbox has no probabilistic fault)."""

    def __init__(self, client: SandboxClient, rng: random.Random) -> None:
        self.client, self.rng = client, rng
        self.calls = 0
        self.faulted = 0
        self.injected = 0  # the `times` of the faults set here (the poison's 5xx are not among them)
        self.carry = 0.0

    def tick(self) -> None:
        posts = [r for r in self.client.requests("gemini") if r["method"] == "POST"]
        self.client.clear_requests()
        self.calls += len(posts)
        self.faulted += sum(1 for r in posts if (r["status"] or 0) >= 500)
        self.carry += GEMINI_FAULT_SHARE * len(posts)
        times = int(self.carry)
        if times:
            self.carry -= times
            self.injected += times
            self.client.fault("gemini", self.rng.choice((500, 503)), times=times)


# Beat -------------------------------------------------------------------------------------------------------------
def beat() -> None:
    """What beat sends, every few seconds here: the reaper and the polling safety net (whose poll interval
    main() scales down to --poll-seconds)."""
    from django.db import close_old_connections

    from extraction.jobs import extraction_reap_job, extraction_schedule_job

    close_old_connections()
    extraction_reap_job()
    extraction_schedule_job()


def reap() -> None:
    from django.db import close_old_connections

    from extraction.jobs import extraction_reap_job

    close_old_connections()
    extraction_reap_job()


def ledger(people: list[Person]) -> dict[str, str]:
    """Outcome of every delivered email of `people` in the ledger, by message id."""
    from extraction.models import ProcessedEmail

    users = [p.user for p in people]
    return dict(ProcessedEmail.objects.filter(integration__user__in=users).values_list("message_id", "outcome"))


def active_runs() -> int:
    from extraction.models import ExtractionRun

    return ExtractionRun.objects.filter(status__in=(ExtractionRun.Status.RUNNING, ExtractionRun.Status.QUEUED)).count()


def wait_until(condition: Callable[[], bool], timeout: float, *, tick: Callable[[], None] = beat) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tick()
        if condition():
            return True
        time.sleep(BEAT_EVERY_S)
    return condition()


# The benchmark ------------------------------------------------------------------------------------------------------
def bench(args: argparse.Namespace, sandbox: SandboxProcess, worker_log: IO[bytes], site_url: str) -> dict[str, Any]:
    from django.conf import settings

    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.services import extraction_run_request, ledger_replay
    from integrations.models import PushChannel
    from sandbox.client import SandboxClient

    rng = random.Random(args.seed)
    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    # Gmail's topic pushed to our webhook, as an operator sets up the push subscription in the GCP console.
    client.pubsub_subscribe(
        settings.GMAIL_PUSH_TOPIC,
        f"{site_url}/webhooks/gmail",
        settings.GMAIL_PUSH_SERVICE_ACCOUNT,
        audience=settings.GMAIL_PUSH_AUDIENCE,
    )

    # The clean reference --------------------------------------------------------------------------------------
    started = time.perf_counter()
    clean = [
        person_create(client, sandbox, kind="clean", index=i, count=args.emails, seed=args.seed)
        for i in range(args.people)
    ]
    for person in clean:
        deliver(client, person, half=0)
        deliver(client, person, half=1)
        run_now(person.user)
    expected = task_keys([p.user for p in clean])
    for person in clean:
        person.user.delete()  # out of the schedule's way (their channels' jobs, still queued, find nothing)
    clean_s = time.perf_counter() - started
    print(f"clean: {sum(expected.values())} tasks from {args.people * args.emails + 1} emails, in {clean_s:.1f} s")

    people = [
        person_create(client, sandbox, kind="chaos", index=i, count=args.emails, seed=args.seed)
        for i in range(args.people)
    ]
    users = [p.user for p in people]
    # Before any worker runs, so that no read comes between the move and the expiry.
    moved_in = dict(
        [
            moved_in_before_resync(client, people[1], "gmail"),
            moved_in_before_resync(client, people[2], "outlook"),
        ]
    )
    moved_keys = frozenset((letter.person, letter.provider, letter.subject) for letter in moved_in.values())

    workers = Workers(args.workers, args.concurrency, dict(os.environ), worker_log)
    try:
        deadline = time.monotonic() + 120
        while not workers.ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the Celery workers did not start within 120 s")
            time.sleep(0.5)
        # Each mailbox's push channel, opened by a worker (the job its connect queued), Graph's through the
        # validation handshake with our web server.
        channels = 2 * len(people)

        def opened() -> bool:
            return PushChannel.objects.filter(integration__user__in=users).count() == channels

        if not wait_until(opened, 120, tick=lambda: None):  # no beat yet: no run may start before the faults
            raise RuntimeError("the push channels were not opened within 120 s")

        # The first half of the mail, its pushes held until the chaos starts: the faults need its ids first.
        for service in ("pubsub", "graph"):
            client.push_behaviour(service, hold=True)
        for person in people:
            deliver(client, person, half=0)
        client.clear_requests()
        client.set_gemini_latency(args.llm_latency_ms)

        # The faults --------------------------------------------------------------------------------------------
        def first_half(person: Person, provider: str) -> list[str]:
            return [m for m, letter in person.delivered.items() if letter.provider == provider]

        fetch_poison = {
            "gmail": rng.choice(first_half(people[0], "gmail")),
            "outlook": rng.choice(first_half(people[1], "outlook")),
        }
        gemini_poison = next(m for m, letter in people[2].delivered.items() if letter.subject == "Project 900")
        poison_spec: dict[str, tuple[str, dict[str, str]]] = {  # message id -> (service, what the fault matches)
            fetch_poison["gmail"]: ("gmail", {"route": f"messages/{re.escape(fetch_poison['gmail'])}"}),
            fetch_poison["outlook"]: ("graph", {"route": f"messages/{re.escape(fetch_poison['outlook'])}"}),
            gemini_poison: ("gemini", {"match": POISON_MARK}),
        }
        poison_faults = {
            m: client.fault(service, 500, times=None, **spec)["id"] for m, (service, spec) in poison_spec.items()
        }
        transient: dict[str, int] = {}  # message id -> fault id
        for person in people[3:]:
            for provider, service in (("gmail", "gmail"), ("outlook", "graph")):
                for message_id in rng.sample(first_half(person, provider), 2):
                    route = f"messages/{re.escape(message_id)}"
                    transient[message_id] = client.fault(service, 404, route=route, times=1)["id"]
        expired = people[3].gmail

        # The chaos -------------------------------------------------------------------------------------------
        print(f"chaos: {args.workers} workers x {args.concurrency} pool children ready; {args.duration:.0f} s of kills")
        gemini = GeminiFaults(client, rng)
        chaos_started = time.monotonic()
        for service in ("pubsub", "graph"):
            client.push_behaviour(service)  # deliver as usual from now on
        held_pushes = client.push_release()
        next_kill = chaos_started + rng.uniform(0.5, 1.5) * args.kill_every
        next_beat = chaos_started + BEAT_EVERY_S  # the held pushes ring first, as they would have on arrival
        second_half = False
        while (now := time.monotonic()) < chaos_started + args.duration:
            gemini.tick()
            if now >= next_beat:
                beat()
                next_beat = now + BEAT_EVERY_S
            if now >= next_kill:
                workers.kill_one(rng)
                next_kill = now + rng.uniform(0.5, 1.5) * args.kill_every
            if not second_half and now >= chaos_started + args.duration / 2:
                client.expire_history(expired)  # one cursor expired half-way, with mail still to come
                for person in people:
                    deliver(client, person, half=1)
                second_half = True
            workers.restart_dead()
            time.sleep(0.5)
        chaos_s = time.monotonic() - chaos_started

        # Stop the chaos and let the system finish on its own ---------------------------------------------------
        gemini.tick()
        read_in_chaos = len(ledger(people).keys() - moved_in.keys())
        hits = {f["id"]: f["hits"] for f in client.call("GET", "/faults")["faults"]}
        transient_hits = sum(hits.get(fid, 0) for fid in transient.values())
        # The transient faults go one by one; the poison ones stay in force throughout (clearing all and setting
        # the poison again left a moment in which a worker could read a poison email).
        for fault_id in hits.keys() - set(poison_faults.values()):
            client.remove_fault(fault_id)
        client.set_gemini_latency(0)
        workers.restart_dead()
        every_email = {m for p in people for m in p.delivered}
        poison = set(poison_faults)

        def poison_taking_effect() -> set[str]:
            hits = {f["id"]: f["hits"] for f in client.call("GET", "/faults")["faults"]}
            return {m for m, fid in poison_faults.items() if hits.get(fid, 0) > 0}

        def drained() -> bool:  # every email in the ledger, but a poison one whose fault was never met
            return every_email - (poison - poison_taking_effect()) <= ledger(people).keys()

        drain_started = time.monotonic()
        finished = wait_until(drained, args.drain_timeout)
        drain_s = time.monotonic() - drain_started
        poison_hit = poison_taking_effect()
        wait_until(lambda: active_runs() == 0, 60, tick=reap)  # no new runs now: those left must end

        # The figures, from the database -----------------------------------------------------------------------
        held = {m: outcome for m, outcome in ledger(people).items() if m not in moved_in}
        quarantined = {m for m, outcome in held.items() if outcome == ProcessedEmail.Outcome.QUARANTINED}
        got = task_keys(users, leave_out=moved_keys)
        letter_of = {m: letter for p in people for m, letter in p.delivered.items()}

        def email_key(message_id: str) -> tuple[int, str, str]:
            letter = letter_of[message_id]
            return letter.person, letter.provider, letter.subject

        set_aside = {email_key(m) for m in quarantined}
        reasons = dict(
            ProcessedEmail.objects.filter(message_id__in=quarantined).values_list("message_id", "last_error")
        )
        wanted = Counter({k: n for k, n in expected.items() if k[:3] not in set_aside})
        missing = wanted - got
        short = {k[:3] for k in missing}  # emails with fewer tasks than the clean run gave them
        lost = {m for m in every_email - poison if m not in held} | {
            m for m in held.keys() - quarantined if email_key(m) in short
        }
        duplicates = sum((got - expected).values())
        runs = Counter(ExtractionRun.objects.values_list("status", flat=True))
        triggers = Counter(ExtractionRun.objects.filter(user__in=users).values_list("trigger", flat=True))
        rang = [n for n in client.notifications() if n["kind"] in ("push", "notification") and not n["dropped"]]
        figures: dict[str, Any] = {
            "emails": len(every_email),
            "expected_tasks": sum(expected.values()),
            "tasks": sum(got.values()),
            "tasks_wanted": sum(wanted.values()),
            "duplicates": duplicates,
            "lost": len(lost),
            "quarantined": len(quarantined),
            "poison": len(poison_hit),
            "quarantined_is_poison": quarantined == poison_hit,
            # When they differ, what each odd email was and what the ledger says of it.
            "quarantined_not_poison": [
                f"{email_key(m)[1]} {email_key(m)[2]!r}: {reasons.get(m, '')}" for m in sorted(quarantined - poison_hit)
            ],
            "poison_not_quarantined": [
                f"{poison_spec[m][0]} poison: {held.get(m, 'not in the ledger')}"
                for m in sorted(poison_hit - quarantined)
            ],
            "stuck_runs": active_runs(),
            "runs": sum(runs.values()),
            "runs_by_status": dict(runs),
            "runs_by_trigger": dict(triggers),
            "pushes": len(rang),
            "pushes_held_until_the_chaos": held_pushes,
            "kills": sum(workers.kills.values()),
            "kills_pool_children": workers.kills["pool_child"],
            "kills_workers": workers.kills["worker"],
            "gemini_calls": gemini.calls,
            "gemini_5xx": gemini.faulted,
            "gemini_5xx_set": gemini.injected,
            "read_in_chaos": read_in_chaos,
            "transient_404_faults": len(transient),
            "transient_404_hits": transient_hits,
            "poison_never_hit": sorted(poison_spec[m][0] for m in poison - poison_hit),
            "cursor_expired": expired,
            "drained": finished,
            "missing_tasks": sum(missing.values()),
            "chaos_s": round(chaos_s, 1),
            "drain_s": round(drain_s, 1),
        }

        # Replay the quarantined emails once their fault is gone -----------------------------------------------
        client.clear_faults()
        client.set_gemini_latency(0)
        replayed = ledger_replay(entries=list(ProcessedEmail.objects.filter(message_id__in=quarantined)))
        owners = {p.user.pk: p.user for p in people for m in quarantined if m in p.delivered}
        for user in owners.values():
            extraction_run_request(user=user, trigger=ExtractionRun.Trigger.ADMIN)

        def replay_done() -> bool:
            held = ledger(people)
            return all(held.get(m) not in (None, ProcessedEmail.Outcome.QUARANTINED) for m in quarantined)

        wait_until(replay_done, 120, tick=reap)
        wait_until(lambda: active_runs() == 0, 60, tick=reap)
        after = task_keys(users, leave_out=moved_keys)
        figures.update(
            replayed=replayed,
            tasks_after_replay=sum(after.values()),
            replayed_tasks_back=replay_done() and after == expected,
            moved_in_before_resync=len(moved_in),
            moved_in_before_resync_lost=moved_in_lost(people, moved_in),
        )
    finally:
        workers.stop()
    checks = {
        "the chaos phase made Gemini calls": figures["gemini_calls"] > 0,
        "the chaos phase read mail": figures["read_in_chaos"] > 0,
        "pushes rang runs (webhook runs > 0)": figures["runs_by_trigger"].get(ExtractionRun.Trigger.WEBHOOK, 0) > 0,
        "duplicates == 0": figures["duplicates"] == 0,
        "lost == 0": figures["lost"] == 0,
        "quarantined == the poison emails": figures["quarantined_is_poison"],
        "stuck_runs == 0": figures["stuck_runs"] == 0,
        "every email handled before the drain timeout": figures["drained"],
        "final tasks == clean minus the quarantined emails' tasks": figures["missing_tasks"] == 0 and duplicates == 0,
        "replayed tasks came back": figures["replayed_tasks_back"],
        MOVED_IN_CHECK: figures["moved_in_before_resync_lost"] == 0,
    }
    if 1.5 * args.kill_every < args.duration:  # a kill was due whatever the draw
        checks["the chaos phase killed workers"] = figures["kills"] > 0
    figures["checks_failed"] = [name for name, ok in checks.items() if not ok]
    return figures


def moved_in_lost(people: list[Person], moved_in: dict[str, Letter]) -> int:
    """The emails moved into the inbox before a resync that are not read: not in the ledger, or without
    their task."""
    from tasks.models import Task

    held = ledger(people)
    lost = 0
    for message_id, letter in moved_in.items():
        user = people[letter.person].user
        tasks = Task.objects.filter(user=user, integration__provider=letter.provider, email_subject=letter.subject)
        if message_id not in held or tasks.count() < letter.asks:
            lost += 1
    return lost


def report(f: dict[str, Any]) -> None:
    print(
        f"chaos: {f['chaos_s']} s, {f['kills']} SIGKILLs ({f['kills_pool_children']} pool children, "
        f"{f['kills_workers']} whole workers); {f['gemini_5xx']} of {f['gemini_calls']} Gemini calls answered 5xx "
        f"({f['gemini_5xx_set']} set at random, the rest the poison's); "
        f"{f['transient_404_hits']} transient 404s of {f['transient_404_faults']} set; cursor of {f['cursor_expired']} "
        "expired half-way"
    )
    print(
        f"drain: {'every email handled' if f['drained'] else 'NOT every email handled'} after {f['drain_s']} s; "
        f"{f['runs']} runs {f['runs_by_status']}, {f['stuck_runs']} still queued or running"
    )
    print(
        f"mail:  {f['emails']} emails; {f['tasks']} tasks of {f['expected_tasks']} in the clean run "
        f"({f['tasks_wanted']} without the quarantined emails'); {f['duplicates']} duplicates, {f['lost']} lost, "
        f"{f['missing_tasks']} tasks missing"
    )
    print(
        f"push:  {f['pushes']} pushes and Graph notifications reached the site ({f['pushes_held_until_the_chaos']} "
        f"held until the chaos started); runs by trigger {f['runs_by_trigger']}; {f['read_in_chaos']} emails read "
        "during the chaos"
    )
    never = f" (never hit: {', '.join(f['poison_never_hit'])})" if f["poison_never_hit"] else ""
    print(
        f"poison: {f['quarantined']} quarantined for {f['poison']} poison emails whose fault took effect{never}; "
        f"replayed {f['replayed']}: their tasks {'came back' if f['replayed_tasks_back'] else 'did NOT come back'} "
        f"({f['tasks_after_replay']} tasks after the replay)"
    )
    print(
        f"moved in before a resync: {f['moved_in_before_resync_lost']} of {f['moved_in_before_resync']} emails "
        "not read (old mail moved into the inbox, then the cursor expired)"
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def redis_cleanup() -> None:
    """Remove this benchmark's queue, its unacknowledged messages and its cache keys from Redis database 2."""
    connection = redis_purge(CHAOS_NAME)
    for tag, value in connection.hgetall("unacked").items():  # kombu's, shared by every queue of the database
        try:
            routing_key = json.loads(value)[2]
        except (ValueError, IndexError, TypeError):
            continue
        if routing_key == CHAOS_NAME:
            connection.hdel("unacked", tag)
            connection.zrem("unacked_index", tag)


def web_wait(url: str) -> None:
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/healthz", timeout=2).status_code in (200, 503):
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError("the web server did not answer within 60 s")


def main() -> int:
    args = parse_args()
    print(
        f"benchmark chaos: {args.people} people x {args.emails} emails (Gmail and Outlook), {args.duration:.0f} s of "
        f"kills every ~{args.kill_every:g} s, {args.workers} workers x {args.concurrency}, seed {args.seed}"
    )
    started = time.perf_counter()
    sandbox = SandboxProcess(require_tls=True)
    worker_log = tempfile.TemporaryFile()  # noqa: SIM115  closed in the finally below
    created: str | None = None
    django_ready = False
    web: subprocess.Popen[bytes] | None = None
    (web_port,) = free_ports(1)
    site_url = f"http://127.0.0.1:{web_port}"
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, CHAOS_DATABASE)
        created = server_url
        os.environ.update(
            CELERY_QUEUE=CHAOS_NAME,
            PUSH_ENABLED="true",  # the doorbells: the sandbox rings our webhooks
            PUSH_BASE_URL=site_url,
            SITE_URL=site_url,
            ALLOWED_HOSTS="127.0.0.1,localhost",
        )
        os.environ.setdefault("GEMINI_RETRY_INITIAL_DELAY_S", "0.25")  # the 5xx retries, shorter than production's
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=CHAOS_NAME)
        django_ready = True
        from django.conf import settings

        # Beat's scan, run here: production's poll interval (minutes) and scan interval, scaled down alike.
        settings.EXTRACTION_SCHEDULE_MINUTES = args.poll_seconds / 60
        settings.EXTRACTION_SCAN_SECONDS = BEAT_EVERY_S
        redis_cleanup()  # what an earlier run killed before its own cleanup left behind
        web = _start(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{web_port}", "--noreload"],
            dict(os.environ),
            worker_log,
        )
        web_wait(site_url)
        print(
            f"setup: sandbox at {sandbox.url} and {sandbox.tls_url}, database {CHAOS_DATABASE}, queue {CHAOS_NAME}, "
            f"site at {site_url}"
        )
        figures = bench(args, sandbox, worker_log, site_url)
    except BaseException:
        worker_log.seek(0)
        print(worker_log.read().decode(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        try:
            if web is not None:
                _stop(web)
            if django_ready:
                from django.db import connections

                redis_cleanup()
                connections.close_all()
            if created is not None:
                database_drop(created, CHAOS_DATABASE)
        finally:
            sandbox.stop()
            worker_log.close()
    figures.update(
        wall_s=round(time.perf_counter() - started, 1),
        people=args.people,
        emails_per_person=args.emails,
        seed=args.seed,
        git=git_version(),
    )
    report(figures)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
