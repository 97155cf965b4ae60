"""Push deliveries, shared by Pub/Sub push (Gmail) and Graph change notifications: an outbox worked by
background threads, the delivery behaviour a test scripts, and the log of every attempt.

A service queues deliveries (`deliveries_queue`); nothing is sent inside a request or under the state lock.
One lane thread per destination (service, URL, kind) sends in due order, so what goes to one endpoint arrives
in the order it happened, unless a behaviour delays, jitters or holds it. Pub/Sub pushes one message per
request; Graph batches: a lane puts every notification due for its URL into one `{"value": [...]}` POST, so
what piles up while a POST is on the wire goes out together.

An answer that does not acknowledge (Pub/Sub: 102, 200, 201, 202, 204, reference §F; Graph: any 2xx, §B.5) is
retried after each delay of the `push_retry_delays_ms` setting, then given up: real Pub/Sub redelivers for
days and Graph for four hours, which no test wants to wait for. The request times out after Pub/Sub's default
ack deadline (10 s) or Graph's 3 s, and a timeout or a refused connection counts as a failed attempt.

A reset bumps the state's epoch: queued deliveries of an older epoch are dropped unsent, and the answer to one
already on the wire is not logged, so nothing from one test lands in the next.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import requests
from flask import Response, request
from pydantic import BaseModel, ConfigDict, Field

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.state import SandboxState

PUSH_SERVICES = ("pubsub", "graph")
PUBSUB_ACK = frozenset({102, 200, 201, 202, 204})
TIMEOUT_S = {"pubsub": 10.0, "graph": 3.0}
_STORE = "push"  # this module's key in the state's data
_OUTBOX = "push_outbox"  # and in what outlives a reset
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def endpoint_problem(url: str) -> str | None:
    """Why `url` cannot receive pushes, or None. Pub/Sub and Graph push only to public https URLs; the sandbox
    also takes plain http on a loopback host (127.0.0.1, localhost), where a test's receiver listens."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an absolute https URL"
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        return "must use https (plain http only on a loopback host: 127.0.0.1 or localhost)"
    return None


@dataclass
class Delivery:
    """One message for one endpoint: a Pub/Sub envelope, or one entry of a Graph notification's "value"."""

    service: str  # "pubsub" | "graph"
    kind: str  # "push" (Pub/Sub); "notification" or "lifecycle" (Graph)
    url: str
    item: dict[str, Any]
    headers: Callable[[], dict[str, str]] = dict  # made for each attempt (a fresh OIDC token each time)
    epoch: int = 0
    seq: int = 0
    due: float = 0.0
    attempt: int = 1
    held: bool = False

    @property
    def lane(self) -> tuple[str, str, str]:
        return (self.service, self.url, self.kind)


@dataclass
class Behaviour:
    """How a push service misbehaves, as a test scripted it (`PUT /_sandbox/notifications/behaviour`)."""

    drop: bool = False
    drop_rate: float = 0.0
    duplicate: int = 0  # extra copies of each delivery
    delay_ms: int = 0
    jitter_ms: int = 0  # a random extra delay of up to this much, which reorders
    hold: bool = False  # keep deliveries until released (`POST /_sandbox/notifications/release`)
    seed: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self.rng.seed(self.seed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "drop": self.drop,
            "drop_rate": self.drop_rate,
            "duplicate": self.duplicate,
            "delay_ms": self.delay_ms,
            "jitter_ms": self.jitter_ms,
            "hold": self.hold,
            "seed": self.seed,
        }


@dataclass
class Attempt:
    """One entry of the delivery log: an HTTP attempt (with its answer), or a delivery dropped unsent."""

    service: str
    kind: str
    url: str
    body: Any
    status: int | None
    error: str | None
    attempt: int
    at: float
    dropped: str | None = None  # why it was never sent: "behaviour" or "gmail_rate_limit"
    gave_up: bool = False  # the last attempt of a delivery that was never acknowledged

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PushData:
    log: list[Attempt] = field(default_factory=list)
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    seq: itertools.count[int] = field(default_factory=itertools.count)


def _data(state: SandboxState) -> PushData:
    data: PushData = state.data.setdefault(_STORE, PushData())
    return data


def _behaviour(state: SandboxState, service: str) -> Behaviour:
    return _data(state).behaviours.setdefault(service, Behaviour())


def attempt_log(state: SandboxState, entry: Attempt) -> None:
    with state.lock:
        _data(state).log.append(entry)


def _acknowledged(service: str, status: int | None) -> bool:
    if status is None:
        return False
    return status in PUBSUB_ACK if service == "pubsub" else 200 <= status < 300


# The outbox -------------------------------------------------------------------------------------------
@dataclass
class _Answer:
    body: Any
    status: int | None
    error: str | None


class Outbox:
    """Queued deliveries and the lane threads that send them. It waits on the state's own lock, so a service
    may queue while it holds that lock; the lanes let go of it before they send."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state
        self.ready = threading.Condition(state.lock)
        self.queued: list[Delivery] = []
        self.sending: list[Delivery] = []
        self.lanes: set[tuple[str, str, str]] = set()

    def add(self, delivery: Delivery) -> None:
        with self.ready:
            self.queued.append(delivery)
            self._lane_ensure(delivery.lane)
            self.ready.notify_all()

    def _lane_ensure(self, lane: tuple[str, str, str]) -> None:
        if lane not in self.lanes:
            self.lanes.add(lane)
            threading.Thread(target=self._lane, args=(lane,), name=f"push-{lane[0]}", daemon=True).start()

    def _purge(self) -> None:
        """Forget what was queued before the last reset."""
        epoch = self.state.epoch
        self.queued = [d for d in self.queued if d.epoch == epoch]

    def counts(self) -> tuple[int, int]:
        """(deliveries queued or on the wire, deliveries held) of the current epoch."""
        with self.ready:
            self._purge()
            epoch = self.state.epoch
            held = sum(1 for d in self.queued if d.held)
            busy = sum(1 for d in self.sending if d.epoch == epoch)
            return len(self.queued) - held + busy, held

    def release(self, service: str | None) -> int:
        """Send every held delivery (of `service`) now, newest first: reordering on demand."""
        with self.ready:
            self._purge()
            held = sorted(
                (d for d in self.queued if d.held and service in (None, d.service)), key=lambda d: d.seq, reverse=True
            )
            now = time.time()
            for position, delivery in enumerate(held):
                delivery.held = False
                delivery.due = now + position * 1e-6
                self._lane_ensure(delivery.lane)
            self.ready.notify_all()
            return len(held)

    def _next_batch(self, lane: tuple[str, str, str]) -> list[Delivery] | None:
        """Wait (holding the lock) for the lane's next due delivery; Graph takes all that are due. None when
        the lane has nothing left to send (it ends; the next delivery for it starts a new one)."""
        while True:
            self._purge()
            mine = sorted((d for d in self.queued if d.lane == lane and not d.held), key=lambda d: (d.due, d.seq))
            if not mine:
                return None
            now = time.time()
            if mine[0].due > now:
                self.ready.wait(timeout=mine[0].due - now)
                continue
            batch = [d for d in mine if d.due <= now] if lane[0] == "graph" else mine[:1]
            for delivery in batch:
                self.queued.remove(delivery)
            return batch

    def _lane(self, lane: tuple[str, str, str]) -> None:
        http = requests.Session()
        http.trust_env = False  # an endpoint on loopback must never go through a proxy
        try:
            while True:
                with self.ready:
                    batch = self._next_batch(lane)
                    if batch is None:
                        self.lanes.discard(lane)
                        return
                    self.sending.extend(batch)
                answer = self._send(http, batch)
                with self.ready:
                    for delivery in batch:
                        self.sending.remove(delivery)
                    self._settle(batch, answer)
                    self.ready.notify_all()
        finally:
            http.close()

    def _send(self, http: requests.Session, batch: list[Delivery]) -> _Answer:
        first = batch[0]
        body: Any = first.item if first.service == "pubsub" else {"value": [d.item for d in batch]}
        if first.epoch != self.state.epoch:
            return _Answer(body, None, "reset before sending")
        try:
            headers = {"Content-Type": "application/json; charset=utf-8", **first.headers()}
            response = http.post(first.url, data=json.dumps(body), headers=headers, timeout=TIMEOUT_S[first.service])
        except Exception as exc:  # a refused connection, a timeout; never let a lane die holding deliveries
            return _Answer(body, None, f"{type(exc).__name__}: {exc}")
        return _Answer(body, response.status_code, None)

    def _settle(self, batch: list[Delivery], answer: _Answer) -> None:
        """Log the attempt and queue a retry of what was not acknowledged (lock held)."""
        first = batch[0]
        if first.epoch != self.state.epoch:
            return
        delays = list(self.state.settings.get("push_retry_delays_ms") or [])
        acknowledged = _acknowledged(first.service, answer.status)
        gave_up = False
        now = time.time()
        for delivery in batch:
            if acknowledged:
                continue
            if delivery.attempt > len(delays):
                gave_up = True
                continue
            retry = dataclasses.replace(
                delivery, attempt=delivery.attempt + 1, due=now + delays[delivery.attempt - 1] / 1000, held=False
            )
            self.queued.append(retry)
            self._lane_ensure(retry.lane)
        _data(self.state).log.append(
            Attempt(
                first.service,
                first.kind,
                first.url,
                answer.body,
                answer.status,
                answer.error,
                max(d.attempt for d in batch),
                now,
                gave_up=gave_up,
            )
        )


def _outbox(state: SandboxState) -> Outbox:
    with state.lock:
        if _OUTBOX not in state.keep:
            state.keep[_OUTBOX] = Outbox(state)
        box: Outbox = state.keep[_OUTBOX]
        return box


def deliveries_queue(state: SandboxState, deliveries: list[Delivery]) -> None:
    """Queue deliveries under their service's behaviour: dropped (logged as such), copied, delayed, jittered
    or held. Safe to call with the state lock held; the sending happens in the lane threads."""
    box = _outbox(state)
    with state.lock:
        data = _data(state)
        now = time.time()
        for delivery in deliveries:
            behaviour = _behaviour(state, delivery.service)
            if behaviour.drop or (behaviour.drop_rate and behaviour.rng.random() < behaviour.drop_rate):
                delivery_drop_log(state, delivery, "behaviour")
                continue
            for _ in range(1 + behaviour.duplicate):
                jitter_ms = behaviour.rng.uniform(0, behaviour.jitter_ms) if behaviour.jitter_ms else 0
                box.add(
                    dataclasses.replace(
                        delivery,
                        epoch=state.epoch,
                        seq=next(data.seq),
                        due=now + (behaviour.delay_ms + jitter_ms) / 1000,
                        held=behaviour.hold,
                    )
                )


def delivery_drop_log(state: SandboxState, delivery: Delivery, reason: str) -> None:
    """Log a delivery that is never sent (the log shows what a real service would silently lose)."""
    body = delivery.item if delivery.service == "pubsub" else {"value": [delivery.item]}
    attempt_log(
        state,
        Attempt(delivery.service, delivery.kind, delivery.url, body, None, None, 0, time.time(), dropped=reason),
    )


# Control routes --------------------------------------------------------------------------------------
class BehaviourIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: Literal["pubsub", "graph"]
    drop: bool = False
    drop_rate: float = Field(default=0.0, ge=0, le=1)
    duplicate: int = Field(default=0, ge=0, le=10)
    delay_ms: int = Field(default=0, ge=0, le=60_000)
    jitter_ms: int = Field(default=0, ge=0, le=60_000)
    hold: bool = False
    seed: int = 0


class ReleaseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: Literal["pubsub", "graph"] | None = None


def _service_arg() -> str | None:
    service = request.args.get("service")
    if service is not None and service not in PUSH_SERVICES:
        raise ControlError("invalid_field", f"service: must be one of {', '.join(PUSH_SERVICES)}")
    return service


@control_route("/notifications/behaviour", methods=["PUT"])
def control_notifications_behaviour_set() -> Response:
    """Replace a push service's behaviour (fields left out take their defaults: deliver at once, once)."""
    spec = parse_body(BehaviourIn)
    st = sandbox_state()
    with st.lock:
        behaviour = Behaviour(**spec.model_dump(exclude={"service"}))
        _data(st).behaviours[spec.service] = behaviour
        return json_response({"service": spec.service, **behaviour.as_dict()})


@control_route("/notifications/behaviour", methods=["GET"])
def control_notifications_behaviour_get() -> Response:
    st = sandbox_state()
    with st.lock:
        return json_response({service: _behaviour(st, service).as_dict() for service in PUSH_SERVICES})


@control_route("/notifications/release", methods=["POST"])
def control_notifications_release() -> Response:
    spec = parse_body(ReleaseIn)
    return json_response({"released": _outbox(sandbox_state()).release(spec.service)})


@control_route("/notifications", methods=["GET"])
def control_notifications_log() -> Response:
    service = _service_arg()
    st = sandbox_state()
    with st.lock:
        entries = [e.as_dict() for e in _data(st).log if service in (None, e.service)]
    return json_response({"notifications": entries})


@control_route("/notifications", methods=["DELETE"])
def control_notifications_log_clear() -> Response:
    st = sandbox_state()
    with st.lock:
        _data(st).log.clear()
    return json_response({"ok": True})


@control_route("/notifications/pending", methods=["GET"])
def control_notifications_pending() -> Response:
    pending, held = _outbox(sandbox_state()).counts()
    return json_response({"pending": pending, "held": held})
