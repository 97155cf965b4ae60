"""The heartbeats `/readyz` reads: each worker says it is alive, and the beat that holds the lock says it ticked.

Both live in Redis under the cache's key prefix (so a test run, or a second checkout, sees only its own), as
the writer's wall-clock time: the web processes compare it with theirs, which assumes the hosts' clocks agree
to within a few seconds (NTP), far less than READYZ_WORKER_SECONDS or READYZ_BEAT_SECONDS.

A worker beats from a bootstep of its consumer, on the timer of the consumer's event loop (the worker's main
process), not from a thread and not from a job: in a prefork pool the jobs run in child processes, so a
9-minute run leaves the loop free and the worker keeps beating, while a worker whose loop is gone (killed, or
stopped after losing the broker) stops. Celery's own `heartbeat_sent` signal would do the same, but it fires
only while events are on (`--without-heartbeat` silences it) and every 2 s; this step does not depend on them.
With the solo pool a job runs on the loop itself and blocks the beats: use prefork (the default) or threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from functools import lru_cache
from typing import Any

import redis
from celery import bootsteps
from django.conf import settings

logger = logging.getLogger(__name__)

REDIS_TIMEOUT_S = 2  # a readiness answer or a heartbeat never waits longer on Redis than this


@lru_cache(maxsize=1)
def readiness_redis() -> redis.Redis:
    """The Redis client of heartbeats, the beat lock and `/readyz`: short timeouts, one pool per process
    (redis-py makes a fresh pool after a fork)."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )


def readiness_key(name: str) -> str:
    return f"{settings.CACHES['default']['KEY_PREFIX']}:readiness:{name}"


WORKERS_KEY = "workers"  # a sorted set: one member per worker process, scored by its last beat
IMAP_IDLE_TICK_KEY = "imap-idle-tick"
BEAT_TICK_KEY = "beat-tick"  # the time of the lock holder's last tick
BEAT_LOCK_KEY = "beat-lock"  # config/beat.py


def worker_heartbeat_record(*, worker: str) -> None:
    """`worker` was alive now. Members older than ten windows are dropped here, so the set stays as small as
    the number of live workers and `/readyz` only reads it."""
    now = time.time()
    key = readiness_key(WORKERS_KEY)
    pipe = readiness_redis().pipeline(transaction=False)
    pipe.zadd(key, {worker: now})
    pipe.zremrangebyscore(key, "-inf", now - 10 * settings.READYZ_WORKER_SECONDS)
    pipe.expire(key, 10 * settings.READYZ_WORKER_SECONDS)
    pipe.execute()


def worker_heartbeat_remove(*, worker: str) -> None:
    """A worker that stops cleanly stops counting at once, not a window later."""
    readiness_redis().zrem(readiness_key(WORKERS_KEY), worker)


def workers_alive(*, within_s: float) -> list[float]:
    """How long ago (seconds) each worker seen within `within_s` last beat, most recent first."""
    now = time.time()
    seen: Any = readiness_redis().zrevrangebyscore(readiness_key(WORKERS_KEY), "+inf", now - within_s, withscores=True)
    return [max(0.0, now - float(score)) for _, score in seen]


def worker_hosts_alive(*, within_s: float) -> list[str]:
    """The Celery node names (`worker.1@host`) of the workers seen within `within_s`."""
    now = time.time()
    seen: Any = readiness_redis().zrangebyscore(readiness_key(WORKERS_KEY), now - within_s, "+inf")
    return sorted({(m.decode() if isinstance(m, bytes) else str(m)).rpartition(":")[0] for m in seen})


def beat_tick_record() -> None:
    readiness_redis().set(readiness_key(BEAT_TICK_KEY), repr(time.time()), ex=86_400)


def beat_tick_age() -> float | None:
    """Seconds since the lock-holding beat last ticked, or None if none has ticked for a day."""
    value = readiness_redis().get(readiness_key(BEAT_TICK_KEY))
    return None if value is None else max(0.0, time.time() - float(value))


def imap_idle_tick_record(shard: int) -> None:
    """The `imap-idle` process of `shard` is alive and has read its list of mailboxes (integrations/imapidle.py)."""
    readiness_redis().set(readiness_key(f"{IMAP_IDLE_TICK_KEY}:{shard}"), repr(time.time()), ex=86_400)


def imap_idle_tick_age(shard: int) -> float | None:
    value = readiness_redis().get(readiness_key(f"{IMAP_IDLE_TICK_KEY}:{shard}"))
    return None if value is None else max(0.0, time.time() - float(value))


def worker_heartbeat_interval() -> float:
    """Four beats a window: one late or lost beat never makes a live worker look dead."""
    return max(0.25, min(15.0, settings.READYZ_WORKER_SECONDS / 4))


class WorkerHeartbeat(bootsteps.StartStopStep):
    """The consumer's step that writes this worker's heartbeat (config/celery.py adds it)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)  # beats once the worker consumes its queue

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None
        self.failing = False
        self.worker = f"{parent.hostname}:{os.getpid()}"  # two workers of one name still count as two

    def start(self, parent: Any) -> None:
        self._beat()
        self.tref = parent.timer.call_repeatedly(worker_heartbeat_interval(), self._beat)

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            parent.timer.cancel(self.tref)
            self.tref = None
        # Redis gone (often why the consumer stops): the heartbeat ages out by itself.
        with contextlib.suppress(redis.RedisError):
            worker_heartbeat_remove(worker=self.worker)

    shutdown = terminate = stop

    def _beat(self) -> None:
        try:
            worker_heartbeat_record(worker=self.worker)
        except redis.RedisError as error:
            if not self.failing:  # one line per outage, not one per beat
                logger.warning("worker heartbeat not written (Redis: %s); /readyz will call this worker gone", error)
            self.failing = True
        else:
            if self.failing:
                logger.info("worker heartbeat written again")
            self.failing = False
