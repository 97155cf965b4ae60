"""In-memory state of the sandbox: mailboxes, tokens, faults, the request log and settings.

Every route reads and writes this through one lock, so the threaded server stays consistent. A reset clears
all of it and bumps `epoch`, which background work (a push delivery queued before the reset) checks before it
acts, so nothing from one test lands in the next.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

SERVICES = ("google_oauth", "gmail", "gemini", "microsoft", "graph", "pubsub", "webpush")
DEFAULT_SETTINGS: dict[str, Any] = {
    "gemini_latency_ms": 0,
    "gmail_push_rate_limit": True,  # Gmail's "at most about 1 notification per second per user"
    "push_retry_delays_ms": [50, 100, 200, 400],  # before each redelivery of a push not acknowledged
    "graph_validation_timeout_ms": 10_000,  # how long Graph waits for the answer to its validation request
    "gmail_watch_pushes_every_change": False,  # a watch ignores its labelIds, as reported of live Gmail
    "gemini_sentences": {},  # part of an ask sentence -> the sentence Gemini quotes instead (sandbox/gemini.py)
}


@dataclass
class Fault:
    """A scripted failure: answer `status` with `body` (after `delay_ms`) `times` times.

    `route` is a regular expression searched in "METHOD /path?query" of the request (for Gmail batch
    parts, of the inner request); `match` is a substring searched in the request body, which is how a
    fault targets one email in a Gemini prompt. `times` of None means until cleared. `reason` (Gmail
    only) picks the `errors[].reason` of the default body, e.g. "userRateLimitExceeded".
    """

    id: int
    service: str
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_ms: int = 0
    times: int | None = 1
    route: str | None = None
    match: str | None = None
    reason: str | None = None
    hits: int = 0

    def applies(self, service: str, target: str, body: str) -> bool:
        if self.service != service or (self.times is not None and self.times <= 0):
            return False
        if self.route and not re.search(self.route, target):
            return False
        return not (self.match and self.match not in body)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "service": self.service,
            "status": self.status,
            "body": self.body,
            "headers": self.headers,
            "delay_ms": self.delay_ms,
            "times": self.times,
            "route": self.route,
            "match": self.match,
            "reason": self.reason,
            "hits": self.hits,
        }


@dataclass
class LoggedRequest:
    service: str
    method: str
    path: str
    query: str
    body: str
    status: int | None
    at: float
    batch_part: bool = False  # an inner request of a Gmail batch, not an HTTP request of its own
    headers: dict[str, str] = field(default_factory=dict)  # repeated headers joined by ", "; no Authorization

    def as_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "body": self.body,
            "status": self.status,
            "at": self.at,
            "batch_part": self.batch_part,
            "headers": self.headers,
        }


class SandboxState:
    """Everything the sandbox knows. Service modules keep their own data in `self.data[service]`."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self.faults: list[Fault] = []
        self.log: list[LoggedRequest] = []
        self.settings: dict[str, Any] = copy.deepcopy(DEFAULT_SETTINGS)
        self.data: dict[str, Any] = {}
        self.epoch = 0  # bumped by every reset
        self.keep: dict[str, Any] = {}  # what outlives a reset: the Pub/Sub signing keys, the push outbox

    def next_id(self) -> int:
        return next(self._ids)

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.log.clear()
            self.settings = copy.deepcopy(DEFAULT_SETTINGS)
            self.data.clear()
            self.epoch += 1

    # Faults -------------------------------------------------------------------------------------
    def add_fault(self, **spec: Any) -> Fault:
        with self.lock:
            fault = Fault(id=self.next_id(), **spec)
            self.faults.append(fault)
            return fault

    def take_fault(self, service: str, target: str, body: str) -> Fault | None:
        """Consume one use of the first fault that applies to this request, if any."""
        with self.lock:
            for fault in self.faults:
                if fault.applies(service, target, body):
                    fault.hits += 1
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    def remove_fault(self, fault_id: int) -> bool:
        """Remove one fault, leaving the others in place (and in force) meanwhile; False if there is none."""
        with self.lock:
            kept = [f for f in self.faults if f.id != fault_id]
            removed = len(kept) < len(self.faults)
            self.faults = kept
            return removed

    def clear_faults(self, service: str | None = None) -> None:
        with self.lock:
            self.faults = [f for f in self.faults if service and f.service != service]

    # Request log --------------------------------------------------------------------------------
    def record(
        self, service: str, method: str, path: str, query: str, body: str, *, headers: dict[str, str] | None = None
    ) -> LoggedRequest:
        entry = LoggedRequest(service, method, path, query, body, None, time.time(), headers=headers or {})
        with self.lock:
            self.log.append(entry)
        return entry

    def requests_for(self, service: str | None = None) -> list[LoggedRequest]:
        with self.lock:
            return [e for e in self.log if service is None or e.service == service]
