"""The forward-to door under load: forwarded emails from many people over SMTP to the `inbound` process (killed
twice meanwhile) and through the webhook, a share of them from strangers, then read by runs.

    uv run python benchmarks/inbound.py [--people 100] [--emails 2000] [--webhook 500] [--strangers 0.1]
                                        [--senders 4] [--seed 1]

Setup, not timed: the sandbox (Gemini, and the DNS that DKIM, SPF and DMARC are checked against) in a process of
its own, a fresh database `tasklift_bench_inbound`, Redis database 2; `--people` people with AI consent, spread
over ten mail domains that publish SPF (127.0.0.1) and DMARC, each with a forward-to address.

Measured, in order:
1. **SMTP**: `--emails` forwarded emails (Gmail, Outlook and attached forwards, one ask each, DKIM-signed by the
   sandbox for the person's domain) sent by `--senders` threads to `python -m config.inbound` as sending servers
   do: a 250 is done, a 4xx or a dropped connection is sent again later (the same bytes). `--strangers` of them
   come from strangers: half signed by their own domain, half spoofing the person's address unsigned from a host
   their SPF does not name. The process is killed twice by itself (kill -9 at crash points: once between the
   commit and the 250, once inside the store's transaction) and started again by the benchmark, as a supervisor
   would. `smtp_p95_ms` is the time of a whole SMTP session that was answered.
2. **Webhook**: `--webhook` more, half of its strangers' share too, POSTed to /webhooks/inbound (signed), each
   answered 200 after its commit.
3. **Reading**: every run the door asked for is executed (as a worker would), and again while mail is stored.

`lost`: a person's email taken (250/200) whose ledger row is missing; `duplicates`: tasks beyond one per email
taken; `refused_wrongly`: a person's own email refused for good (5xx or 4xx to the end); `accepted_from_strangers`:
a stranger's email taken; `storage_left`: stored messages left once the runs are done. The last line printed is one
JSON object; the exit status is 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import smtplib
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
from benchmarks.common import ROOT, Benchmark, SandboxProcess, git_version, main

BENCH_DATABASE = "tasklift_bench_inbound"
DOMAINS = 10
KILLS = ("inbound_committed", "inbound_stored_tx")  # where the process dies, once each
STRANGER_DOMAIN = "strangers.example"


def parse(doc: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=100)
    parser.add_argument("--emails", type=int, default=2000, help="forwarded emails sent over SMTP")
    parser.add_argument("--webhook", type=int, default=500, help="forwarded emails posted to the webhook")
    parser.add_argument("--strangers", type=float, default=0.1, help="the share of emails from strangers")
    parser.add_argument("--senders", type=int, default=4, help="sending servers at once (threads)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.people < 1 or args.emails < 20 or args.webhook < 1 or not 0 <= args.strangers < 1 or args.senders < 1:
        parser.error("--people, --webhook and --senders must be >= 1, --emails >= 20, --strangers in [0, 1)")
    args.tasks_ratio, args.llm_latency_ms, args.concurrency = 1.0, 0, None  # what common's frame prints
    return args


@dataclass
class Mail:
    n: int
    to: str
    mail_from: str
    raw: bytes  # with CRLF line ends, as a sending server sends it
    stranger: bool
    outcome: str = ""  # "taken", "refused" (5xx), or "" while it is still to be sent
    code: int = 0
    tries: int = 0
    dropped: int = 0  # sessions the server ended before it answered (killed, or starting again)
    deferred: list[int] = field(default_factory=list)  # 4xx answers


@dataclass
class Door:
    """The inbound process, started again after it dies (as systemd or config.supervise would)."""

    port: int
    env: dict[str, str]
    kills_left: list[str] = field(default_factory=lambda: list(KILLS))
    process: subprocess.Popen[bytes] | None = None
    deaths: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, crash_after: int) -> None:
        env = dict(self.env)
        if self.kills_left:
            env["EXTRACTION_CRASH_POINT"] = f"{self.kills_left.pop(0)}:{crash_after}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.inbound"], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with smtplib.SMTP("127.0.0.1", self.port, timeout=5) as client:
                    client.noop()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the inbound process did not start")

    def ensure(self, crash_after: int) -> None:
        """Start it again if it died (once: the first sender to see it)."""
        with self.lock:
            if self.process is not None and self.process.poll() is not None:
                self.deaths += int(self.process.returncode == -signal.SIGKILL)
                self.start(crash_after)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


def send(door: Door, mail: Mail, rng: random.Random) -> float | None:
    """One SMTP session for `mail`; its seconds when the server answered DATA (None: dropped or never answered)."""
    started = time.perf_counter()
    mail.tries += 1
    try:
        with smtplib.SMTP("127.0.0.1", door.port, local_hostname="mx.sender.example", timeout=30) as client:
            try:
                client.sendmail(mail.mail_from, [mail.to], mail.raw)
                mail.code = 250
            except smtplib.SMTPRecipientsRefused as refused:
                mail.code = refused.recipients[mail.to][0]
            except smtplib.SMTPResponseException as error:
                mail.code = error.smtp_code
    except (OSError, smtplib.SMTPServerDisconnected):
        mail.dropped += 1
        door.ensure(crash_after=rng.randint(20, 60))
        time.sleep(0.5)  # a sending server waits before it tries again (minutes, in truth)
        return None
    if mail.code == 250:
        mail.outcome = "taken"
    elif mail.code >= 500:
        mail.outcome = "refused"
    else:
        mail.deferred.append(mail.code)
    return time.perf_counter() - started


def bench(args: argparse.Namespace, sandbox: SandboxProcess) -> dict[str, Any]:
    from django.conf import settings
    from django.test import Client

    from accounts.services import consent_grant, user_create
    from config.ports import free_port
    from extraction.models import ExtractionRun, ProcessedEmail
    from extraction.pipeline import extraction_run_execute
    from integrations.inbound.accept import message_key
    from integrations.inbound.addresses import forward_address
    from integrations.models import InboundMessage
    from integrations.webhooks import inbound_signature
    from sandbox.client import SandboxClient
    from tasks.models import Task
    from tests.forwards import attached_forward, gmail_forward, outlook_forward

    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    dns = f"127.0.0.1:{sandbox.url.rpartition(':')[2]}"
    settings.INBOUND_DNS_SERVER = dns
    settings.INBOUND_WEBHOOK_SECRET = secret = "bench-inbound-secret"
    rng = random.Random(args.seed)
    domains = [f"people{d}.bench.example" for d in range(DOMAINS)]
    for domain in [*domains, STRANGER_DOMAIN]:
        client.mail_domain(domain)
    people = []
    for n in range(args.people):
        user = user_create(email=f"person{n}@{domains[n % DOMAINS]}", password="bench-only-password-never-used")
        consent_grant(user=user)
        people.append((user, forward_address(user=user).account_address))
    builders = (gmail_forward, outlook_forward, attached_forward)

    def mail(n: int) -> Mail:
        made = _mail(n)
        made.raw = made.raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        return made

    def _mail(n: int) -> Mail:
        user, to = people[rng.randrange(len(people))]
        ask = f"Could you send the report for account {n} by Friday?"
        if rng.random() >= args.strangers:
            domain = user.email.rpartition("@")[2]
            raw = client.dkim_sign(builders[n % 3](user.email, ask, subject=f"Account {n}"), domain)
            return Mail(n, to, user.email, raw, False)
        if n % 2:  # a stranger who signs as themselves
            sender = f"someone{n}@{STRANGER_DOMAIN}"
            raw = client.dkim_sign(gmail_forward(sender, ask, subject=f"Account {n}"), STRANGER_DOMAIN)
            return Mail(n, to, sender, raw, True)
        # a stranger spoofing the person: unsigned, from a host the person's SPF does not name
        return Mail(n, to, f"bounce@{STRANGER_DOMAIN}", gmail_forward(user.email, ask, subject=f"Account {n}"), True)

    smtp_mails = [mail(n) for n in range(args.emails)]
    hook_mails = [mail(args.emails + n) for n in range(args.webhook)]

    # 1. SMTP ---------------------------------------------------------------------------------------------
    port = free_port()
    env = {
        **os.environ, "INBOUND_SMTP_HOST": "127.0.0.1", "INBOUND_SMTP_PORT": str(port),
        "INBOUND_DNS_SERVER": dns, "LOG_LEVEL": "WARNING",
    }  # fmt: skip
    door = Door(port=port, env=env)
    door.start(crash_after=rng.randint(args.emails // 10, args.emails // 4))
    queue = list(smtp_mails)
    queue_lock = threading.Lock()
    answered: list[float] = []
    started = time.perf_counter()

    def sender(seed: int) -> None:
        own = random.Random(seed)
        while True:
            with queue_lock:
                if not queue:
                    return
                item = queue.pop(0)
            seconds = send(door, item, own)
            if seconds is not None:
                answered.append(seconds)
            if not item.outcome and item.tries < 20:  # 4xx or dropped: sent again later
                with queue_lock:
                    queue.append(item)

    threads = [threading.Thread(target=sender, args=(args.seed * 100 + i,)) for i in range(args.senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    smtp_wall = time.perf_counter() - started
    door.ensure(crash_after=1)  # a death at the very end is counted too
    door.stop()

    # 2. Webhook ------------------------------------------------------------------------------------------
    web = Client()
    hook_started = time.perf_counter()
    for item in hook_mails:
        timestamp = str(int(time.time()))
        answer = web.post(
            "/webhooks/inbound", data=item.raw, content_type="message/rfc822", secure=True,
            headers={
                "X-Tasklift-Timestamp": timestamp,
                "X-Tasklift-Signature": inbound_signature(secret, timestamp, item.raw),
                "X-Tasklift-Recipient": item.to, "X-Tasklift-Mail-From": item.mail_from,
                "X-Tasklift-Client-IP": "127.0.0.1", "X-Tasklift-Helo": "mx.provider.example",
            },
        )  # fmt: skip
        item.tries, item.code = 1, answer.status_code
        item.outcome = "taken" if answer.status_code == 200 else "refused" if answer.status_code < 500 else ""
    hook_wall = time.perf_counter() - hook_started

    # 3. Reading ------------------------------------------------------------------------------------------
    read_started = time.perf_counter()
    for _ in range(5):
        queued = list(ExtractionRun.objects.filter(status=ExtractionRun.Status.QUEUED))
        for run in queued:
            extraction_run_execute(run=run)
        waiting = set(InboundMessage.objects.values_list("integration__user_id", flat=True).distinct())
        if not waiting:
            break
        for user, _ in people:
            if user.pk in waiting:
                extraction_run_execute(run=ExtractionRun.objects.create(user=user, trigger=ExtractionRun.Trigger.ADMIN))
    read_wall = time.perf_counter() - read_started

    every = smtp_mails + hook_mails
    own = [m for m in every if not m.stranger]
    taken = [m for m in own if m.outcome == "taken"]
    ledger = set(ProcessedEmail.objects.filter(purpose="forwarded").values_list("message_id", flat=True))
    tasks = Task.objects.filter(integration__provider="forward").count()
    distinct_taken = {message_key(m.raw) for m in taken}
    runs = ExtractionRun.objects.filter(status=ExtractionRun.Status.SUCCEEDED)
    answered.sort()
    figures: dict[str, Any] = {
        "people": args.people,
        "emails_smtp": args.emails,
        "emails_webhook": args.webhook,
        "strangers": sum(m.stranger for m in every),
        "accepted": sum(m.outcome == "taken" for m in every),
        "refused": sum(m.outcome == "refused" for m in every),
        "refused_by_code": dict(sorted(Counter(str(m.code) for m in every if m.outcome == "refused").items())),
        "refused_wrongly": sum(m.outcome != "taken" for m in own),
        "accepted_from_strangers": sum(m.outcome == "taken" for m in every if m.stranger),
        "inbound_killed": door.deaths,
        "smtp_retries": sum(max(m.tries - 1, 0) for m in smtp_mails),
        "smtp_dropped": sum(m.dropped for m in smtp_mails),
        "smtp_deferred": dict(sorted(Counter(str(c) for m in smtp_mails for c in m.deferred).items())),
        "smtp_p50_ms": round(1000 * answered[len(answered) // 2], 1) if answered else None,
        "smtp_p95_ms": round(1000 * answered[int(len(answered) * 0.95)], 1) if answered else None,
        "smtp_per_s": round(len(smtp_mails) / smtp_wall, 1),
        "webhook_per_s": round(len(hook_mails) / hook_wall, 1),
        "read_wall_s": round(read_wall, 1),
        "runs": runs.count(),
        "lost": len(distinct_taken - ledger),
        "duplicates": max(tasks - len(distinct_taken), 0),
        "tasks": tasks,
        "gemini_calls": sum(runs.values_list("llm_calls", flat=True)),
        "storage_left": InboundMessage.objects.count(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "git": git_version(),
    }
    checks = {
        "every own email taken (refused_wrongly == 0)": figures["refused_wrongly"] == 0,
        "accepted_from_strangers == 0": figures["accepted_from_strangers"] == 0,
        "the inbound process died twice": figures["inbound_killed"] == len(KILLS),
        "lost == 0": figures["lost"] == 0,
        "duplicates == 0": figures["duplicates"] == 0,
        "one task per email taken": tasks == len(distinct_taken),
        "storage_left == 0": figures["storage_left"] == 0,
    }
    figures["checks_failed"] = [name for name, ok in checks.items() if not ok]
    return figures


def report(f: dict[str, Any]) -> None:
    print(
        f"SMTP: {f['emails_smtp']} emails ({f['smtp_per_s']}/s, session p50 {f['smtp_p50_ms']} ms, p95 "
        f"{f['smtp_p95_ms']} ms), the process killed {f['inbound_killed']} times, {f['smtp_retries']} retries "
        f"({f['smtp_dropped']} dropped sessions, deferred {f['smtp_deferred']}); "
        f"webhook: {f['emails_webhook']} ({f['webhook_per_s']}/s)"
    )
    print(
        f"taken {f['accepted']}, refused {f['refused']} {f['refused_by_code']} of {f['strangers']} from strangers; "
        f"refused wrongly {f['refused_wrongly']}, strangers taken {f['accepted_from_strangers']}"
    )
    print(
        f"read by {f['runs']} runs in {f['read_wall_s']} s: {f['tasks']} tasks, {f['gemini_calls']} Gemini calls; "
        f"lost {f['lost']}, duplicates {f['duplicates']}, left stored {f['storage_left']}"
    )
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


if __name__ == "__main__":
    sys.exit(
        main(
            Benchmark(
                name="inbound",
                database=BENCH_DATABASE,
                cache_prefix="tasklift-bench-inbound",
                bench=bench,
                report=report,
            ),
            parse(__doc__),
        )
    )
