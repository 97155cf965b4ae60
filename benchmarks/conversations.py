"""Conversations: a labelled set of email conversations read through real workers, the mail arriving over
days, and the figures that say whether each item ended as it should (issue 22's must-show).

    uv run python benchmarks/conversations.py [--smoke] [--dataset DIR] [--only ID,ID] [--workers 2]
        [--llm-latency-ms 0] [--round-timeout 120] [--kill-every 0] [--seed 1]

The dataset is data (`benchmarks/conversations/*.json`, described in benchmarks/README.md): each conversation
is its messages in order (provider, folder inbox or sent, sender, To and Cc, language, the day and time it
arrives, its text) and its labels: the items it must end with (kind ask, commitment or waiting; open or
closed, and by which message) and the sentences that must never become items (an ask of someone else on
To or Cc, an old ask quoted under a reply's header). It is written to the sandbox Gemini's rules
(sandbox/READER.md), a deterministic stand-in for the model: what is measured is our plumbing (reading
Inbox and Sent, ordering, handing open items to the model, closing, grounding, nothing lost or made twice),
not the model's judgement.

Setup: the sandbox in a process of its own, a fresh database `tasklift_conversations` (dropped at the end),
Redis database 2 with a Celery queue and cache prefix of its own. One person, Dana Holm, with current AI
consent, a Gmail (dana@example.com) and an Outlook mailbox (dana@outlook.example.com) connected as the OAuth
callbacks connect them, and `--workers` real Celery workers on the queue (benchmarks/chaos.py's Workers).

The mail arrives over time: day 0 of the dataset is a Monday 7 to 13 days ago, and the mail of each day is
one round. A round delivers the first half of that day's messages through the sandbox control API (mail to
Dana from others into her inbox, or to both mailboxes; Dana's own mail sent from one of them, so it lands in
Gmail's SENT label or Outlook's sentitems, threaded with what it answers), requests a run (as "Extract now"
does), delivers the rest while that run may be reading, requests another, and waits until no run is left;
beat's reaper runs meanwhile. Each message is dated at its day and time (the Date a reply's due date is
resolved from). With --kill-every, a worker or a pool child is SIGKILLed every few seconds while the runs
read (benchmarks/chaos.py's kills), and started again. After the last round one more run; then every copy of
every message is read back through the providers' own APIs: its folder (Gmail labels, Graph folder), its
thread (threadId, conversationId) and its headers (Message-ID, In-Reply-To, References, To, Cc) must be what
the dataset says. Then the figures, from the database (Task rows by kind, status and conversation, their
TaskEvent history, the ledger) and the sandbox's Gemini request log (calls and prompt tokens).

Human-readable figures first; the last line is one JSON object. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import getaddresses
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up

from benchmarks.chaos import Workers, reap
from benchmarks.common import (
    SandboxProcess,
    connect_sandbox_gmail,
    connect_sandbox_outlook,
    database_create,
    database_drop,
    django_setup,
    git_version,
    postgres_server_url,
    redis_purge,
)

if TYPE_CHECKING:  # imported for real only after django.setup()
    from accounts.models import User
    from sandbox.client import SandboxClient

DATASET = Path(__file__).resolve().with_name("conversations")
CONV_DATABASE = "tasklift_conversations"
CONV_NAME = "tasklift-conversations"  # its Celery queue and cache prefix
READER_NAME = "Dana Holm"
READER = {"gmail": "dana@example.com", "outlook": "dana@outlook.example.com"}
MESSAGE_ID_DOMAIN = "bench.tasklift.test"
KINDS = ("ask", "commitment", "waiting")
NOT_ITEM_REASONS = ("someone_else", "old_quote", "acknowledgement")
TITLE_MATCH = 0.5  # share of words an item's title must have in common with its label to be that item

# What issue 22's must-show asks the set to hold; each conversation says what it covers ("covers").
MUST_COVER = (
    "delivered_by_reply",
    "never_answered",
    "ask_of_someone_else",
    "commitment",
    "waiting_answered",
    "waiting_unanswered",
    "invoice_paid",
    "cancellation",
    "acknowledgement",
    "both_mailboxes",
    "quote:lowercase_original_message",
    "quote:spaced_original_message",
    "quote:french_outlook",
    "quote:danish_oprindelig_besked",
    "quote:wrote_without_a_colon",
    "quote:yandex",
    "quote:russian_outlook",
    "quote:zoho",
    "quote:split_over_three_lines",
    "stranger_reply",
    "delivered_after_sign_off",
)
MUST_LANGUAGES = ("en", "fr", "de", "es", "da")
MIN_CONVERSATIONS = 60


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="only the conversations marked smoke (a minute)")
    parser.add_argument("--dataset", type=Path, default=DATASET, help="the folder of *.json conversation files")
    parser.add_argument("--only", default="", help="comma-separated conversation ids (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=2, help="prefork children per worker (default 2)")
    parser.add_argument("--llm-latency-ms", type=int, default=0, help="sandbox Gemini latency (default 0)")
    parser.add_argument("--round-timeout", type=float, default=120, help="max seconds a round may take (120)")
    parser.add_argument(
        "--kill-every",
        type=float,
        default=0,
        help="SIGKILL a worker or pool child every ~S s while runs read (0: none)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the kills (default 1)")
    args = parser.parse_args()
    if args.workers < 1 or args.concurrency < 1 or args.round_timeout <= 0 or args.kill_every < 0:
        parser.error("--workers and --concurrency >= 1, --round-timeout > 0, --kill-every >= 0")
    return args


# The dataset -------------------------------------------------------------------------------------------------
class DatasetError(ValueError):
    """A conversation file that does not say what the benchmark needs: which file, which field."""


@dataclass(frozen=True)
class Message:
    id: str  # within its conversation: "m1", "m2", ...
    provider: str  # "gmail" | "outlook" | "both" (an incoming email sent to both of Dana's mailboxes)
    folder: str  # "inbox" (to Dana) | "sent" (Dana's own)
    sender: str  # "Name <address>"; Dana's address of `provider` for sent mail
    to: tuple[str, ...]
    cc: tuple[str, ...]
    language: str
    day: int  # days after day 0 (a Monday)
    time: str  # "HH:MM", UTC
    subject: str | None  # None for a reply: "Re: " and what it answers
    text: str
    reply_to: str | None  # the id of the message it answers
    stranger: bool = False  # from someone never on the conversation: it may suggest, never change an item

    def providers(self) -> tuple[str, ...]:
        return ("gmail", "outlook") if self.provider == "both" else (self.provider,)

    def offset(self) -> timedelta:
        hours, minutes = (int(part) for part in self.time.split(":"))
        return timedelta(days=self.day, hours=hours, minutes=minutes)


@dataclass(frozen=True)
class Expected:
    """An item the conversation must end with."""

    kind: str  # "ask" | "commitment" | "waiting"
    source: str  # the message it comes from
    title: str
    status: str  # "open" | "closed"
    closed_by: str | None = None
    due_day: int | None = None  # its due date, in days after day 0
    waiting_on: str | None = None  # the address a waiting item waits on
    updated_by: str | None = None  # the message that moved its due date (an acknowledgement naming a time)


@dataclass(frozen=True)
class NotItem:
    """A sentence that must never become an item."""

    message: str
    sentence: str
    why: str  # "someone_else" | "old_quote" | "acknowledgement"


@dataclass(frozen=True)
class Conversation:
    id: str
    about: str
    covers: tuple[str, ...]
    smoke: bool
    messages: tuple[Message, ...]
    expect: tuple[Expected, ...]
    not_items: tuple[NotItem, ...]

    def message(self, message_id: str) -> Message:
        return next(m for m in self.messages if m.id == message_id)

    def languages(self) -> set[str]:
        return {m.language for m in self.messages}


def load_dataset(directory: Path) -> list[Conversation]:
    """Every conversation of the folder's *.json files, checked; a DatasetError names what is wrong."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise DatasetError(f"{directory}: no *.json conversation files")
    conversations: list[Conversation] = []
    for path in files:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{path.name}: not readable JSON ({exc})") from exc
        for index, spec in enumerate(document.get("conversations") or []):
            where = f"{path.name}, conversation {spec.get('id', index)!r}"
            try:
                conversations.append(_conversation(spec))
            except (KeyError, TypeError, ValueError) as exc:
                raise DatasetError(f"{where}: {exc}") from exc
    seen = Counter(c.id for c in conversations)
    if twice := [cid for cid, n in seen.items() if n > 1]:
        raise DatasetError(f"conversation ids used twice: {', '.join(twice)}")
    return conversations


def _conversation(spec: dict[str, Any]) -> Conversation:
    messages: list[Message] = []
    for raw in spec["messages"]:
        message = _message(raw, messages)
        messages.append(message)
    ids = {m.id for m in messages}
    expect = tuple(_expected(raw, ids) for raw in spec.get("expect", []))
    not_items = []
    for raw in spec.get("not_items", []):
        if raw["message"] not in ids or raw["why"] not in NOT_ITEM_REASONS:
            raise ValueError(f"not_items: unknown message or reason in {raw}")
        if raw["sentence"] not in _by_id(messages, raw["message"]).text:
            raise ValueError(f"not_items: {raw['sentence']!r} is not in {raw['message']}'s text")
        not_items.append(NotItem(raw["message"], raw["sentence"], raw["why"]))
    for item in expect:
        if item.kind in ("commitment", "waiting") and _by_id(messages, item.source).folder != "sent":
            raise ValueError(f"expect: a {item.kind} comes from Dana's sent mail, not {item.source}")
        if item.kind == "ask" and _by_id(messages, item.source).folder != "inbox":
            raise ValueError(f"expect: an ask comes from mail to Dana, not {item.source}")
    return Conversation(
        id=str(spec["id"]),
        about=str(spec.get("about", "")),
        covers=tuple(spec.get("covers", [])),
        smoke=bool(spec.get("smoke", False)),
        messages=tuple(messages),
        expect=expect,
        not_items=tuple(not_items),
    )


def _by_id(messages: list[Message], message_id: str) -> Message:
    return next(m for m in messages if m.id == message_id)


def _message(raw: dict[str, Any], earlier: list[Message]) -> Message:
    folder, provider = raw["folder"], raw["provider"]
    if folder not in ("inbox", "sent") or provider not in ("gmail", "outlook", "both"):
        raise ValueError(f"{raw.get('id')}: folder inbox|sent and provider gmail|outlook|both")
    if folder == "sent" and provider == "both":
        raise ValueError(f"{raw['id']}: Dana sends from one mailbox")
    reply_to = raw.get("reply_to")
    if reply_to is not None:
        parent = next((m for m in earlier if m.id == reply_to), None)
        if parent is None:
            raise ValueError(f"{raw['id']}: reply_to {reply_to!r} is not an earlier message")
        if folder == "sent" and provider not in parent.providers():
            raise ValueError(f"{raw['id']}: Dana answers from a mailbox that holds {reply_to}")
    elif not raw.get("subject"):
        raise ValueError(f"{raw['id']}: the first message of a thread needs a subject")
    if not re.fullmatch(r"\d{2}:\d{2}", raw["time"]) or not 0 <= int(raw["day"]) <= 6:
        raise ValueError(f"{raw['id']}: day 0..6 and time HH:MM")
    message = Message(
        id=str(raw["id"]),
        provider=provider,
        folder=folder,
        sender=raw.get("from") or _reader_address(provider),
        to=tuple(raw["to"]),
        cc=tuple(raw.get("cc", [])),
        language=str(raw["language"]),
        day=int(raw["day"]),
        time=str(raw["time"]),
        subject=raw.get("subject"),
        text="\n".join(raw["text"]) + "\n",
        reply_to=reply_to,
        stranger=bool(raw.get("stranger", False)),
    )
    if message.stranger and _address(message.sender) in {
        _address(a) for m in earlier for a in (m.sender, *m.to, *m.cc)
    }:
        raise ValueError(f"{message.id}: a stranger is someone on none of the earlier messages")
    if earlier and message.offset() < earlier[-1].offset():
        raise ValueError(f"{message.id}: earlier than the message before it")
    return message


def _address(named: str) -> str:
    return getaddresses([named])[0][1].lower()


def _reader_address(provider: str) -> str:
    return f"{READER_NAME} <{READER[provider]}>"


def _expected(raw: dict[str, Any], ids: set[str]) -> Expected:
    item = Expected(
        kind=raw["kind"],
        source=raw["from"],
        title=raw["title"],
        status=raw["status"],
        closed_by=raw.get("closed_by"),
        due_day=raw.get("due_day"),
        waiting_on=raw.get("waiting_on"),
        updated_by=raw.get("updated_by"),
    )
    if item.kind not in KINDS or item.status not in ("open", "closed"):
        raise ValueError(f"expect: kind {'|'.join(KINDS)} and status open|closed in {raw}")
    named = [item.source, item.closed_by, item.updated_by]
    if any(n is not None and n not in ids for n in named) or (item.status == "closed") != (item.closed_by is not None):
        raise ValueError(f"expect: unknown message, or a closed item without closed_by (or the reverse) in {raw}")
    if item.kind == "waiting" and not item.waiting_on:
        raise ValueError(f"expect: a waiting item names whom it waits on in {raw}")
    return item


def coverage(conversations: list[Conversation]) -> dict[str, Any]:
    """What the set holds against what the issue asks it to."""
    covers = Counter(tag for c in conversations for tag in c.covers)
    languages = Counter(lang for c in conversations for lang in c.languages())
    providers = Counter(p for c in conversations for m in c.messages for p in m.providers())
    return {
        "covers": dict(covers),
        "languages": dict(languages),
        "providers": dict(providers),
        "missing": [tag for tag in MUST_COVER if not covers[tag]]
        + [f"language:{lang}" for lang in MUST_LANGUAGES if not languages[lang]]
        + (["conversations>=60"] if len(conversations) < MIN_CONVERSATIONS else []),
    }


# Delivery --------------------------------------------------------------------------------------------------
@dataclass
class Copy:
    provider: str
    mailbox_id: str  # the provider's id of the message in that mailbox
    thread: str  # Gmail threadId or Graph conversationId, as the delivery answered


@dataclass
class Delivered:
    conversation: str
    message: str
    message_id: str  # the Message-ID header, with its brackets
    references: list[str]  # what a reply to it carries as References, itself last
    subject: str
    copies: list[Copy] = field(default_factory=list)

    def copy(self, provider: str) -> Copy | None:
        return next((c for c in self.copies if c.provider == provider), None)


class Mail:
    """Delivers the dataset's messages into the sandbox's mailboxes, and remembers where each one went."""

    def __init__(self, client: SandboxClient, day0: datetime) -> None:
        self.client, self.day0 = client, day0
        self.delivered: dict[tuple[str, str], Delivered] = {}  # (conversation, message) -> where

    def date(self, message: Message) -> datetime:
        return self.day0 + message.offset()

    def deliver(self, conversation: Conversation, message: Message) -> Delivered:
        parent = self.delivered[(conversation.id, message.reply_to)] if message.reply_to else None
        if message.folder == "sent":
            done = self._send(conversation, message, parent)
        else:
            done = self._receive(conversation, message, parent)
        self.delivered[(conversation.id, message.id)] = done
        return done

    def _send(self, conversation: Conversation, message: Message, parent: Delivered | None) -> Delivered:
        provider = message.provider
        answers = parent.copy(provider) if parent else None
        if parent is not None and answers is None:
            raise RuntimeError(f"{conversation.id}/{message.id}: its mailbox does not hold {message.reply_to}")
        send = self.client.send_gmail if provider == "gmail" else self.client.send_outlook
        sent = send(
            READER[provider],
            to=list(message.to),
            cc=list(message.cc) or None,
            subject=message.subject,
            body=message.text,
            in_reply_to=answers.mailbox_id if answers else None,
            sent_at=self.date(message),
        )
        header = sent["messageId"] if provider == "gmail" else sent["internetMessageId"]
        thread = sent["threadId"] if provider == "gmail" else sent["conversationId"]
        return Delivered(
            conversation.id,
            message.id,
            header,
            [*(parent.references if parent else []), header],
            message.subject or _reply_subject(parent),
            [Copy(provider, str(sent["id"]), thread)],
        )

    def _receive(self, conversation: Conversation, message: Message, parent: Delivered | None) -> Delivered:
        from sandbox.compose import Original, compose

        when = self.date(message)
        providers = message.providers()
        single = providers[0] if len(providers) == 1 else None
        answers = parent.copy(single) if parent is not None and single else None
        if parent is not None and answers is not None and single is not None and message.subject is None:
            # A reply in the thread of a message its mailbox holds: the control API writes its headers.
            to = list(message.to) or None
            cc = list(message.cc) or None
            if single == "gmail":
                got = self.client.deliver_gmail_reply(
                    READER["gmail"],
                    answers.mailbox_id,
                    sender=message.sender,
                    body=message.text,
                    to=to,
                    cc=cc,
                    internal_date=when,
                )
                header, thread = got["messageId"], got["threadId"]
            else:
                got = self.client.deliver_outlook_reply(
                    READER["outlook"],
                    answers.mailbox_id,
                    sender=message.sender,
                    body=message.text,
                    to=to,
                    cc=cc,
                    received_at=when,
                )
                header, thread = got["internetMessageId"], got["conversationId"]
            return Delivered(
                conversation.id,
                message.id,
                header,
                [*parent.references, header],
                _reply_subject(parent),
                [Copy(single, str(got["id"]), thread)],
            )
        # A new thread, a reply reaching a mailbox that does not hold what it answers (both of Dana's), or a reply
        # with a subject of its own (a receipt): the same bytes into each mailbox, written as a mail client
        # writes a reply (sandbox/compose.py).
        header = f"<{conversation.id}.{message.id}@{MESSAGE_ID_DOMAIN}>"
        subject = message.subject or _reply_subject(parent)
        original = Original(parent.message_id, parent.references[:-1], parent.subject) if parent else None
        raw = compose(
            sender=message.sender,
            to=list(message.to) or [_reader_address(p) for p in providers],  # as the control API's replies
            cc=list(message.cc),
            subject=subject,
            body=message.text,
            date=when,
            message_id=header,
            answers=original,
        )
        copies = []
        for provider in providers:
            if provider == "gmail":
                got = self.client.deliver(READER["gmail"], raw, internal_date=when)
                copies.append(Copy(provider, str(got["id"]), got["threadId"]))
            else:
                got = self.client.deliver_outlook(READER["outlook"], raw, received_at=when)
                copies.append(Copy(provider, str(got["id"]), got["conversationId"]))
        return Delivered(
            conversation.id, message.id, header, [*(parent.references if parent else []), header], subject, copies
        )


def _reply_subject(parent: Delivered | None) -> str:
    from sandbox.compose import reply_subject

    return reply_subject(parent.subject) if parent else ""


# Reading back what was delivered ------------------------------------------------------------------------------
def delivery_mismatches(
    sandbox: SandboxProcess, client: SandboxClient, conversations: list[Conversation], mail: Mail
) -> list[str]:
    """Every copy read back through Gmail's and Graph's own APIs: its folder, its thread and its headers must
    be what the dataset says. One line per difference."""
    import requests

    gmail = requests.Session()
    gmail.trust_env = False
    gmail.headers["Authorization"] = f"Bearer {client.issue_token(READER['gmail'])['access_token']}"
    graph = requests.Session()
    graph.trust_env = False
    graph.verify = str(sandbox.cert_file)
    graph.headers["Authorization"] = f"Bearer {client.issue_microsoft_token(READER['outlook'])['access_token']}"
    folders = {m["id"]: m["folder"] for m in client.outlook_messages(READER["outlook"])}
    labels = {m["id"]: m["labelIds"] for m in client.mailbox_messages(READER["gmail"])}
    wrong: list[str] = []
    with gmail, graph:
        for conversation in conversations:
            threads: dict[str, set[str]] = defaultdict(set)
            for message in conversation.messages:
                done = mail.delivered.get((conversation.id, message.id))
                if done is None:
                    continue
                parent = mail.delivered[(conversation.id, message.reply_to)] if message.reply_to else None
                where = f"{conversation.id}/{message.id}"
                for copy in done.copies:
                    if copy.provider == "gmail":
                        got = gmail.get(
                            f"{sandbox.url}/gmail/v1/users/me/messages/{copy.mailbox_id}",
                            params={
                                "format": "metadata",
                                "metadataHeaders": ["Message-ID", "In-Reply-To", "References", "To", "Cc"],
                            },
                            timeout=30,
                        ).json()
                        headers = {h["name"].lower(): h["value"] for h in got["payload"]["headers"]}
                        folder = "sent" if "SENT" in labels.get(copy.mailbox_id, []) else "inbox"
                        if "INBOX" in labels.get(copy.mailbox_id, []) and folder == "sent":
                            folder = "both folders"
                        thread = got["threadId"]
                    else:
                        got = graph.get(
                            f"{sandbox.tls_url}/v1.0/me/messages/{copy.mailbox_id}",
                            params={"$select": "conversationId,internetMessageId,internetMessageHeaders"},
                            headers={"Prefer": 'IdType="ImmutableId"'},
                            timeout=30,
                        ).json()
                        headers = {h["name"].lower(): h["value"] for h in got.get("internetMessageHeaders", [])}
                        folder = {"sentitems": "sent", "inbox": "inbox"}.get(folders.get(copy.mailbox_id, ""), "?")
                        thread = got["conversationId"]
                    threads[copy.provider].add(thread)
                    wrong += _header_differences(where, copy.provider, message, done, parent, headers, folder)
            for provider, seen in threads.items():
                if len(seen) != 1:
                    wrong.append(f"{conversation.id}: {len(seen)} threads in {provider}, not one")
    return wrong


def _header_differences(
    where: str,
    provider: str,
    message: Message,
    done: Delivered,
    parent: Delivered | None,
    headers: dict[str, str],
    folder: str,
) -> list[str]:
    wrong = []
    if folder != message.folder:
        wrong.append(f"{where} in {provider}: folder {folder}, not {message.folder}")
    if headers.get("message-id", "").strip() != done.message_id:
        wrong.append(f"{where} in {provider}: Message-ID {headers.get('message-id')!r}, not {done.message_id!r}")
    want_reply = parent.message_id if parent else ""
    if headers.get("in-reply-to", "").strip() != want_reply:
        wrong.append(f"{where} in {provider}: In-Reply-To {headers.get('in-reply-to')!r}, not {want_reply!r}")
    want_references = " ".join(parent.references) if parent else ""
    if " ".join(headers.get("references", "").split()) != want_references:
        wrong.append(f"{where} in {provider}: References {headers.get('references')!r}, not {want_references!r}")
    for name, wanted in (("to", message.to), ("cc", message.cc)):
        got = {a.lower() for _, a in getaddresses([headers.get(name, "")]) if a}
        want = {a.lower() for _, a in getaddresses(list(wanted)) if a}
        if name == "to" and not want:  # a reply with no To of its own goes to its mailbox's owner
            want = {READER[provider]}
        if got != want:
            wrong.append(f"{where} in {provider}: {name} {sorted(got)}, not {sorted(want)}")
    return wrong


# The rounds ------------------------------------------------------------------------------------------------------
def day_zero(now: datetime) -> datetime:
    """A Monday, 00:00 UTC, 7 to 13 days ago: a week of mail that has all arrived by now."""
    week_ago = (now - timedelta(days=7)).astimezone(UTC)
    monday = week_ago - timedelta(days=week_ago.weekday())
    return monday.replace(hour=0, minute=0, second=0, microsecond=0)


def active_runs(user: User) -> int:
    from extraction.models import ExtractionRun

    return ExtractionRun.objects.filter(
        user=user, status__in=(ExtractionRun.Status.RUNNING, ExtractionRun.Status.QUEUED)
    ).count()


def request_run(user: User) -> None:
    """What "Extract now" does: a run queued for the workers (or the one already waiting)."""
    from django.db import close_old_connections

    from extraction.models import ExtractionRun
    from extraction.services import extraction_run_request

    close_old_connections()
    extraction_run_request(user=user, trigger=ExtractionRun.Trigger.MANUAL)


class Killer:
    """With --kill-every, chaos.py's kills while runs read: a pool child or a whole worker SIGKILLed every
    ~`every` s (±50 %), a dead worker started again; a killed run is taken up again by the reaper."""

    def __init__(self, workers: Workers, every: float, seed: int) -> None:
        self.workers, self.every, self.rng = workers, every, random.Random(seed)
        self.next = time.monotonic() + self._pause()

    def _pause(self) -> float:
        return self.rng.uniform(0.5, 1.5) * self.every

    def tick(self) -> None:
        if self.every and time.monotonic() >= self.next:
            self.workers.kill_one(self.rng)
            self.next = time.monotonic() + self._pause()
        self.workers.restart_dead()


def wait_idle(user: User, timeout: float, killer: Killer | None = None) -> bool:
    """Until no run of `user` is queued or running, beat's reaper ticking meanwhile (and the kills, if any)."""
    deadline = time.monotonic() + timeout
    last_reap = 0.0
    while time.monotonic() < deadline:
        if killer is not None:
            killer.tick()
        if time.monotonic() - last_reap > 3:
            reap()
            last_reap = time.monotonic()
        if active_runs(user) == 0:
            return True
        time.sleep(0.2)
    return active_runs(user) == 0


def read_over_days(
    user: User, mail: Mail, conversations: list[Conversation], round_timeout: float, killer: Killer
) -> tuple[int, list[str]]:
    """Each day's mail, one round a day; returns how many rounds and the rounds that did not finish."""
    by_day: dict[int, list[tuple[Conversation, Message]]] = defaultdict(list)
    for conversation in conversations:
        for message in conversation.messages:
            by_day[message.day].append((conversation, message))
    late: list[str] = []
    for day in sorted(by_day):
        todays = sorted(by_day[day], key=lambda pair: (pair[1].time, pair[0].id))
        middle = len(todays) // 2 or len(todays)
        for conversation, message in todays[:middle]:
            mail.deliver(conversation, message)
        request_run(user)
        for conversation, message in todays[middle:]:  # while that run may be reading
            mail.deliver(conversation, message)
        request_run(user)
        finished = wait_idle(user, round_timeout, killer)
        if not finished:
            late.append(f"day {day}")
        print(f"day {day}: {len(todays)} messages delivered, {'read' if finished else 'NOT read in time'}")
    request_run(user)  # one more: whatever the last round's runs left
    if not wait_idle(user, round_timeout, killer):
        late.append("the last run")
    return len(by_day), late


# Scoring ---------------------------------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.replace("\u2019", "'").casefold())


def _similarity(a: str, b: str) -> float:
    left, right = set(_words(a)), set(_words(b))
    return len(left & right) / len(left | right) if left | right else 0.0


def _holds(text: str, part: str) -> bool:
    """Whether `part`'s words stand in `text` in order, whatever the case, punctuation and spacing."""
    words = " ".join(_words(part))
    return bool(words) and f" {words} " in f" {' '.join(_words(text))} "


@dataclass
class Score:
    figures: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def add(self, name: str, problem: str | None = None) -> None:
        self.figures[name] += 1
        if problem:
            self.problems.append(problem)


def score(user: User, conversations: list[Conversation], mail: Mail) -> tuple[dict[str, Any], list[str]]:
    """The figures of the end state, from the database, and one line per item that ended wrong."""
    from extraction.models import ProcessedEmail
    from integrations.mail.mime import message_id_key
    from integrations.models import Integration
    from tasks.models import Task, TaskEvent

    integration_of = {i.provider: i.pk for i in Integration.objects.filter(user=user)}
    message_of: dict[tuple[int, str], tuple[str, str]] = {}  # (mailbox, provider id) -> (conversation, message)
    by_header: dict[str, tuple[str, str]] = {}  # Message-ID without brackets -> (conversation, message)
    for (conversation_id, message_id), done in mail.delivered.items():
        by_header[message_id_key(done.message_id)] = (conversation_id, message_id)
        for copy in done.copies:
            message_of[(integration_of[copy.provider], copy.mailbox_id)] = (conversation_id, message_id)

    def named(integration_id: int | None, provider_id: str, header: str = "") -> tuple[str, str] | None:
        """The dataset message a row names: by its mailbox and provider id, else by its Message-ID."""
        found = message_of.get((integration_id or 0, provider_id))
        return found or by_header.get(message_id_key(header or provider_id))

    ledger = set(
        ProcessedEmail.objects.filter(integration__user=user)
        .exclude(outcome=ProcessedEmail.Outcome.QUARANTINED)
        .values_list("integration_id", "message_id")
    )
    lost_emails = [key for key in message_of if key not in ledger]

    tasks = list(Task.objects.filter(user=user, source=Task.Source.EMAIL_AI).prefetch_related("events"))
    by_conversation: dict[str, list[Task]] = defaultdict(list)
    source_of: dict[int, str] = {}
    strays: list[Task] = []
    for task in tasks:
        found = named(task.integration_id, task.source_id, task.email_key)
        if found is None:
            strays.append(task)
            continue
        by_conversation[found[0]].append(task)
        source_of[task.pk] = found[1]

    def event_message(event: TaskEvent) -> str | None:
        found = named(event.integration_id, event.message_id)
        return found[1] if found else None

    s = Score()
    strangers = {(c.id, m.id) for c in conversations for m in c.messages if m.stranger}
    for task in tasks:
        for event in task.events.all():
            if event.by != TaskEvent.By.EMAIL or named(event.integration_id, event.message_id) not in strangers:
                continue
            where = f"{task.kind} {task.title!r}"
            if event.action == TaskEvent.Action.SUGGESTED:
                s.add("stranger_suggestions")
            else:
                s.add("closed_by_stranger", f"{where} was {event.action} by a stranger's email ({event.message_id})")
    for conversation in conversations:
        mine = by_conversation.get(conversation.id, [])
        root = mail.delivered.get((conversation.id, conversation.messages[0].id))
        key = message_id_key(root.message_id) if root else ""
        # Each labelled item takes the task of its kind from its message whose title is most like its label.
        pairs = sorted(
            (
                (_similarity(task.title, item.title), index, task.pk)
                for index, item in enumerate(conversation.expect)
                for task in mine
                if task.kind == item.kind and source_of[task.pk] == item.source
            ),
            reverse=True,
        )
        matched: dict[int, Task] = {}
        taken: set[int] = set()
        for similarity, index, task_pk in pairs:
            if index in matched or task_pk in taken or similarity < TITLE_MATCH:
                continue
            matched[index] = next(t for t in mine if t.pk == task_pk)
            taken.add(task_pk)
        for index, item in enumerate(conversation.expect):
            s.add(f"expected_{item.kind}")
            where = f"{conversation.id}: {item.kind} {item.title!r}"
            found_task = matched.get(index)
            if found_task is None:
                s.add("items_missing", f"{where} was never made")
                continue
            s.add(f"found_{item.kind}")
            _score_item(
                s, where, item, found_task, event_message, folder_of=conversation.message, day0=mail.day0, key=key
            )
        for task in mine:
            if task.pk not in taken:
                _score_unexpected(s, conversation, task, source_of[task.pk], matched)
    for task in strays:
        s.add("unexpected_items", f"a task from no dataset message: {task.kind} {task.title!r}")

    f = s.figures
    closed = {"closed", "done", "dismissed"}
    figures: dict[str, Any] = {
        "conversations": len(conversations),
        "messages": sum(len(c.messages) for c in conversations),
        "mailbox_copies": len(message_of),
        "asks": f["expected_ask"],
        "asks_found": f["found_ask"],
        "commitments": f["expected_commitment"],
        "commitments_found": f["found_commitment"],
        "waiting": f["expected_waiting"],
        "waiting_found": f["found_waiting"],
        "open_at_end": sum(1 for t in tasks if t.status == Task.Status.OPEN),
        "open_expected": sum(1 for c in conversations for e in c.expect if e.status == "open"),
        "closed_expected": sum(1 for c in conversations for e in c.expect if e.status == "closed"),
        "stale_open": f["stale_open"],
        "closed_by_reply": f["closed_by_reply"],
        "closed_by_incoming": f["closed_by_incoming"],
        "closed_wrongly": f["closed_wrongly"],
        "closed_twice": f["closed_twice"],
        "closed_by_stranger": f["closed_by_stranger"],
        "stranger_replies": len(strangers),
        "stranger_suggestions": f["stranger_suggestions"],
        "closed_without_history": f["closed_without_history"],
        "waiting_open": sum(1 for t in tasks if t.kind == Task.Kind.WAITING and t.status == Task.Status.OPEN),
        "waiting_closed": sum(1 for t in tasks if t.kind == Task.Kind.WAITING and t.status in closed),
        "waiting_open_expected": sum(
            1 for c in conversations for e in c.expect if e.kind == "waiting" and e.status == "open"
        ),
        "waiting_closed_expected": sum(
            1 for c in conversations for e in c.expect if e.kind == "waiting" and e.status == "closed"
        ),
        "waiting_on_wrong": f["waiting_on_wrong"],
        "due_dates_wrong": f["due_dates_wrong"],
        "updates_missing": f["updates_missing"],
        "conversation_key_wrong": f["conversation_key_wrong"],
        "asks_of_others_as_tasks": f["asks_of_others_as_tasks"],
        "old_asks_as_new": f["old_asks_as_new"],
        "acknowledgements_as_items": f["acknowledgements_as_items"],
        "unexpected_items": f["unexpected_items"],
        "duplicates": f["duplicates"],
        "items_missing": f["items_missing"],
        "lost_emails": len(lost_emails),
        "lost": len(lost_emails) + f["items_missing"],
        "task_events": TaskEvent.objects.filter(task__user=user).count(),
    }
    for lost_key in lost_emails:
        conversation_id, message_id = message_of[lost_key]
        s.problems.append(f"{conversation_id}/{message_id}: not in the ledger")
    return figures, s.problems


def _score_item(
    s: Score, where: str, item: Expected, task: Any, event_message: Any, *, folder_of: Any, day0: datetime, key: str
) -> None:
    from tasks.models import Task, TaskEvent

    events = [e for e in task.events.all() if e.by == TaskEvent.By.EMAIL and e.undone_at is None]
    closes = [e for e in events if e.action == TaskEvent.Action.CLOSED]
    is_closed = task.status != Task.Status.OPEN
    closer = event_message(closes[-1]) if closes else None
    if len(closes) > 1:
        s.add("closed_twice", f"{where} was closed {len(closes)} times")
    if is_closed and not closes and not any(e.by == TaskEvent.By.PERSON for e in task.events.all()):
        s.add("closed_without_history", f"{where} is {task.status} with no history row saying why")
    if item.status == "closed":
        if not is_closed:
            s.add("stale_open", f"{where} is still open; {item.closed_by} settled it")
        elif closes and closer != item.closed_by:  # closed with no row at all: closed_without_history
            s.add("closed_wrongly", f"{where} was closed by {closer}, not {item.closed_by}")
        elif folder_of(item.closed_by).folder == "sent":
            s.add("closed_by_reply")
        else:
            s.add("closed_by_incoming")
    elif is_closed:
        s.add("closed_wrongly", f"{where} was closed (by {closer}) but nothing in the conversation settles it")
    if item.due_day is not None and task.due_date != (day0 + timedelta(days=item.due_day)).date():
        s.add("due_dates_wrong", f"{where} is due {task.due_date}, not day {item.due_day}")
    if item.waiting_on and item.waiting_on.lower() not in task.waiting_on.lower():
        s.add("waiting_on_wrong", f"{where} waits on {task.waiting_on!r}, not {item.waiting_on}")
    if item.updated_by and not any(
        e.action == TaskEvent.Action.UPDATED and event_message(e) == item.updated_by for e in events
    ):
        s.add("updates_missing", f"{where} has no history row of {item.updated_by} moving its date")
    if task.conversation_key != key:
        s.add("conversation_key_wrong", f"{where} has conversation key {task.conversation_key!r}, not {key!r}")


def _score_unexpected(s: Score, conversation: Conversation, task: Any, source: str, matched: dict[int, Any]) -> None:
    """A task no label asked for: which mistake it is."""
    where = f"{conversation.id}/{source}: {task.kind} {task.title!r}"
    names = {"someone_else": "asks_of_others_as_tasks", "old_quote": "old_asks_as_new"}
    for not_item in conversation.not_items:
        if not_item.message == source and (
            _holds(not_item.sentence, task.title) or _holds(task.sentence or "", not_item.sentence)
        ):
            s.add(names.get(not_item.why, "acknowledgements_as_items"), f"{where} ({not_item.why})")
            return
    # Beyond the labels: a sentence that stands in an earlier message of the conversation is never new.
    order = [m.id for m in conversation.messages]
    earlier = conversation.messages[: order.index(source)]
    if task.sentence and any(_holds(m.text, task.sentence) for m in earlier):
        s.add("old_asks_as_new", f"{where} (its sentence stands in an earlier message)")
        return
    for index, task_of_item in matched.items():
        item = conversation.expect[index]
        if item.kind == task.kind and _similarity(task.title, item.title) >= TITLE_MATCH:
            s.add("duplicates", f"{where} (again: {task_of_item.title!r})")
            return
    s.add("unexpected_items", f"{where} (no label)")


# Gemini, from the sandbox's request log ---------------------------------------------------------------------
def gemini_figures(client: SandboxClient) -> dict[str, int]:
    """Calls and prompt tokens of every generateContent request since the log was cleared, counted as the
    sandbox counts them (sandbox/READER.md: a token is 4 characters of the contents and the instruction)."""
    calls = [r for r in client.requests("gemini") if r["method"] == "POST" and "generateContent" in r["path"]]
    tokens = 0
    for request in calls:
        try:
            body = json.loads(request["body"] or "{}")
        except ValueError:
            continue
        instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
        texts = [
            part.get("text", "")
            for content in [*(body.get("contents") or []), instruction]
            if isinstance(content, dict)
            for part in content.get("parts") or []
            if isinstance(part, dict)
        ]
        tokens += math.ceil(sum(len(t) for t in texts if isinstance(t, str)) / 4)
    return {"gemini_calls": len(calls), "prompt_tokens": tokens}


# The benchmark ---------------------------------------------------------------------------------------------------
def bench(args: argparse.Namespace, sandbox: SandboxProcess, conversations: list[Conversation], log: IO[bytes]) -> Any:
    from django.db.models import Sum

    from accounts.services import consent_grant, user_create
    from extraction.models import ExtractionRun
    from sandbox.client import SandboxClient

    setup_started = time.monotonic()
    client = SandboxClient(sandbox.url, timeout=60)
    client.reset()
    user = user_create(email="dana@tasklift.test", password="conversations-only-password-never-used")
    consent_grant(user=user)
    connect_sandbox_gmail(client, user, READER["gmail"])
    connect_sandbox_outlook(client, user, READER["outlook"])
    workers = Workers(args.workers, args.concurrency, dict(os.environ), log, queue=CONV_NAME)
    try:
        deadline = time.monotonic() + 120
        while not workers.ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the Celery workers did not start within 120 s")
            time.sleep(0.5)
        request_run(user)  # the first read of the empty mailboxes: Outlook's first deltaLinks
        if not wait_idle(user, args.round_timeout):
            raise RuntimeError("the first run over the empty mailboxes did not finish")
        client.clear_requests()
        client.set_gemini_latency(args.llm_latency_ms)
        first_run = ExtractionRun.objects.filter(user=user).order_by("-pk").values_list("pk", flat=True).first() or 0
        setup_s = time.monotonic() - setup_started

        started = time.monotonic()
        mail = Mail(client, day_zero(datetime.now(UTC)))
        killer = Killer(workers, args.kill_every, args.seed)
        rounds, late = read_over_days(user, mail, conversations, args.round_timeout, killer)
        killer.every = 0  # no kills while the end is read
        if not wait_idle(user, args.round_timeout, killer):
            late.append("after the kills")
        read_s = time.monotonic() - started
        mismatches = delivery_mismatches(sandbox, client, conversations, mail)
        gemini = gemini_figures(client)
        figures, problems = score(user, conversations, mail)
    finally:
        workers.stop()
    runs = ExtractionRun.objects.filter(user=user, pk__gt=first_run)
    emails = len({done.message_id for done in mail.delivered.values()})
    totals = runs.aggregate(sent=Sum("emails_sent_to_llm"), ungrounded=Sum("tasks_ungrounded"))
    figures.update(
        gemini,
        prompt_tokens_per_email=round(gemini["prompt_tokens"] / emails, 1) if emails else None,
        emails=emails,
        emails_sent_to_llm=totals["sent"] or 0,
        ungrounded=_ungrounded(runs),
        runs=runs.count(),
        runs_by_status=dict(Counter(runs.values_list("status", flat=True))),
        stuck_runs=active_runs(user),
        rounds=rounds,
        rounds_late=late,
        delivery_mismatches=len(mismatches),
        delivery_mismatches_first=mismatches[:20],
        kills=sum(workers.kills.values()),
        setup_s=round(setup_s, 1),
        read_s=round(read_s, 1),
        day0=mail.day0.date().isoformat(),
    )
    return figures, mismatches + problems


def _ungrounded(runs: Any) -> int:
    """Items not kept because their sentence is not in their email: every counter of the run record that says
    so (tasks today; the automatic changes' own when they have one)."""
    from django.db.models import IntegerField, Sum

    from extraction.models import ExtractionRun

    names = [
        f.name
        for f in ExtractionRun._meta.get_fields()
        if "ungrounded" in f.name and isinstance(f, IntegerField)  # PositiveIntegerField is one
    ]
    totals = runs.aggregate(**{name: Sum(name) for name in names})
    return sum(value or 0 for value in totals.values())


def checks_of(figures: dict[str, Any], dataset: dict[str, Any] | None) -> dict[str, bool]:
    f = figures
    checks = {
        "every dataset message reached its mailboxes as intended (folder, thread, headers)": (
            f["delivery_mismatches"] == 0
        ),
        "the runs made Gemini calls": f["gemini_calls"] > 0,
        "every round finished": not f["rounds_late"],
        "stuck_runs == 0": f["stuck_runs"] == 0,
        "lost == 0 (every email in the ledger, every labelled item made)": f["lost"] == 0,
        "duplicates == 0": f["duplicates"] == 0,
        "stale_open == 0 (nothing answered is still open)": f["stale_open"] == 0,
        "closed_wrongly == 0": f["closed_wrongly"] == 0,
        "closed_twice == 0": f["closed_twice"] == 0,
        "closed_by_stranger == 0 (a stranger's email changed no item)": f["closed_by_stranger"] == 0,
        "stranger_suggestions == stranger_replies": f["stranger_suggestions"] == f["stranger_replies"],
        "closed_without_history == 0": f["closed_without_history"] == 0,
        "asks_of_others_as_tasks == 0": f["asks_of_others_as_tasks"] == 0,
        "old_asks_as_new == 0": f["old_asks_as_new"] == 0,
        "acknowledgements_as_items == 0": f["acknowledgements_as_items"] == 0,
        "unexpected_items == 0": f["unexpected_items"] == 0,
        "asks_found == asks": f["asks_found"] == f["asks"],
        "commitments_found == commitments": f["commitments_found"] == f["commitments"],
        "waiting_open == waiting_open_expected": f["waiting_open"] == f["waiting_open_expected"],
        "waiting_closed == waiting_closed_expected": f["waiting_closed"] == f["waiting_closed_expected"],
        "open_at_end == open_expected": f["open_at_end"] == f["open_expected"],
        "waiting_on_wrong == 0": f["waiting_on_wrong"] == 0,
        "due_dates_wrong == 0": f["due_dates_wrong"] == 0,
        "updates_missing == 0": f["updates_missing"] == 0,
        "conversation_key_wrong == 0": f["conversation_key_wrong"] == 0,
        "ungrounded == 0": f["ungrounded"] == 0,
    }
    if dataset is not None:  # the whole set, not a part of it
        checks["the dataset holds what issue 22 asks (" + ", ".join(dataset["missing"]) + ")"] = not dataset["missing"]
    return checks


def report(f: dict[str, Any], problems: list[str]) -> None:
    print(
        f"mail:  {f['conversations']} conversations, {f['messages']} messages ({f['mailbox_copies']} mailbox "
        f"copies) over {f['rounds']} days from {f['day0']}; {f['runs']} runs {f['runs_by_status']} in {f['read_s']} s, "
        f"{f['kills']} SIGKILLs"
    )
    print(
        f"items: asks {f['asks_found']}/{f['asks']}, commitments {f['commitments_found']}/{f['commitments']}, "
        f"waiting {f['waiting_found']}/{f['waiting']}; open at the end {f['open_at_end']} "
        f"(expected {f['open_expected']}), waiting open {f['waiting_open']}/{f['waiting_open_expected']}, "
        f"waiting closed {f['waiting_closed']}/{f['waiting_closed_expected']}"
    )
    print(
        f"closes: {f['closed_by_reply']} by Dana's reply, {f['closed_by_incoming']} by an incoming email, of "
        f"{f['closed_expected']} due; {f['stale_open']} still open, {f['closed_wrongly']} closed wrongly, "
        f"{f['closed_twice']} twice, {f['closed_without_history']} without history; {f['task_events']} history rows"
    )
    print(
        f"wrong: {f['asks_of_others_as_tasks']} asks of others as tasks, {f['old_asks_as_new']} old asks as new, "
        f"{f['acknowledgements_as_items']} acknowledgements as items, {f['unexpected_items']} unexpected, "
        f"{f['duplicates']} duplicates, {f['lost']} lost ({f['lost_emails']} emails, {f['items_missing']} items), "
        f"{f['ungrounded']} ungrounded, {f['due_dates_wrong']} due dates wrong"
    )
    print(
        f"llm:   {f['gemini_calls']} Gemini calls, {f['prompt_tokens']} prompt tokens, "
        f"{f['prompt_tokens_per_email']} per email ({f['emails']} emails)"
    )
    for line in problems[:100]:
        print(f"  - {line}")
    if len(problems) > 100:
        print(f"  … and {len(problems) - 100} more")
    for name in f["checks_failed"]:
        print(f"CHECK FAILED: {name}")


def main() -> int:
    args = parse_args()
    try:
        everything = load_dataset(args.dataset)
    except DatasetError as exc:
        print(f"benchmark conversations: the dataset is not usable: {exc}", file=sys.stderr)
        return 2
    chosen = everything
    if args.smoke:
        chosen = [c for c in chosen if c.smoke]
    if args.only:
        wanted = {name.strip() for name in args.only.split(",") if name.strip()}
        if unknown := wanted - {c.id for c in everything}:
            print(f"benchmark conversations: no conversation {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        chosen = [c for c in chosen if c.id in wanted]
    whole = coverage(everything)
    print(
        f"benchmark conversations: {len(chosen)} of {len(everything)} conversations "
        f"(languages {whole['languages']}, mailbox copies by provider {whole['providers']}), "
        f"{args.workers} workers x {args.concurrency}"
    )
    started = time.perf_counter()
    sandbox = SandboxProcess(require_tls=True)
    log = tempfile.TemporaryFile()  # noqa: SIM115  closed in the finally below
    created: str | None = None
    django_ready = False
    try:
        sandbox.wait_ready()
        server_url = postgres_server_url()
        database_url = database_create(server_url, CONV_DATABASE)
        created = server_url
        os.environ["CELERY_QUEUE"] = CONV_NAME
        # Day 0 is up to 13 days ago: the first cursors must reach back that far (Outlook's delta filter).
        os.environ["MAIL_BACKFILL_DAYS"] = "15"
        django_setup(sandbox=sandbox, database_url=database_url, cache_prefix=CONV_NAME)
        django_ready = True
        redis_purge(CONV_NAME)  # what an earlier run killed before its own cleanup left behind
        figures, problems = bench(args, sandbox, chosen, log)
    except BaseException:
        log.seek(0)
        print(log.read().decode(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        try:
            if django_ready:
                from django.db import connections

                redis_purge(CONV_NAME)
                connections.close_all()
            if created is not None:
                database_drop(created, CONV_DATABASE)
        finally:
            sandbox.stop()
            log.close()
    full = not args.smoke and not args.only
    checks = checks_of(figures, whole if full else None)
    figures.update(
        benchmark="conversations",
        smoke=args.smoke,
        dataset_missing=whole["missing"],
        wall_s=round(time.perf_counter() - started, 1),
        checks_failed=[name for name, ok in checks.items() if not ok],
        version=git_version(),
    )
    report(figures, problems)
    print(json.dumps(figures))
    return 1 if figures["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
