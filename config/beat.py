"""One beat at a time: celery beat's scheduler, sending only while it holds a lock (CELERY_BEAT_SCHEDULER).

Every beat started runs this scheduler; the one that holds the lock sends the schedule, the others wait and try
again every BEAT_LOCK_SECONDS / 3. The holder renews the lock on each tick (ticks come at least that often:
the scheduler never sleeps longer), so a beat killed outright (kill -9, its host gone) is replaced within
BEAT_LOCK_SECONDS plus one try, and one stopped cleanly hands over at the next try.

The lock is a Redis key with an expiry (redis-py's Lock, with a token of its own), not a PostgreSQL advisory
lock. Beat needs Redis anyway (it is the broker: with Redis down, no beat can send anything) but not
PostgreSQL, and an expiry frees the lock of a beat whose host vanished without closing its connection, where a
session lock would wait for PostgreSQL's TCP keepalive (hours by default). What an expiry costs: a beat
paused longer than BEAT_LOCK_SECONDS (a stopped VM), or a Redis restarted without persistence, lets a second
beat take the lock while the first still thinks it holds it, until the first's next tick finds its token gone
(LockNotOwnedError) and it waits. For that moment two beats send. That is harmless here: every scheduled job
is idempotent (the scan only requests runs, a doorbell that a waiting run absorbs; the reaper re-reads what is
stale; push maintenance renews what is due), so a job sent twice does the work once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from typing import Any

import redis
from celery.beat import PersistentScheduler
from django.conf import settings
from redis.exceptions import LockNotOwnedError

from config.heartbeat import BEAT_LOCK_KEY, beat_tick_record, readiness_key, readiness_redis

logger = logging.getLogger(__name__)


class LockedScheduler(PersistentScheduler):
    """celery's PersistentScheduler (the schedule file, --schedule), sending only while this beat holds the
    lock; the holder's ticks are the heartbeat `/readyz` reads (config/heartbeat.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lock_seconds = float(settings.BEAT_LOCK_SECONDS)
        self.retry_seconds = self.lock_seconds / 3
        self.holding = False
        self.waiting_logged = False
        self.redis_failing = False
        # Whose lock it is, for the waiting beats' log line; unique, as a lock token must be.
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lock = readiness_redis().lock(
            readiness_key(BEAT_LOCK_KEY), timeout=self.lock_seconds, blocking=False, thread_local=False
        )
        super().__init__(*args, **kwargs)
        # celery sleeps up to max_interval between ticks (beat_max_loop_interval, 5 minutes by default): the
        # lock must be renewed well within its expiry.
        self.max_interval: float = min(float(self.max_interval), self.retry_seconds)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self._hold_lock():
            return self.retry_seconds
        with contextlib.suppress(redis.RedisError):  # a lost write only makes /readyz see an older tick
            beat_tick_record()
        return float(min(super().tick(*args, **kwargs), self.retry_seconds))

    def _hold_lock(self) -> bool:
        """Renew the lock if this beat holds it, else try to take it. False: send nothing this tick."""
        try:
            held = self._renew_or_take()
        except redis.RedisError as error:
            if not self.redis_failing:  # one line per outage
                logger.warning("beat cannot reach Redis for its lock (%s); sending nothing until it can", error)
            self.redis_failing = True
            return False
        if self.redis_failing:
            logger.info("beat reaches Redis again")
            self.redis_failing = False
        return held

    def _renew_or_take(self) -> bool:
        if self.holding:
            try:
                self.lock.extend(self.lock_seconds, replace_ttl=True)
                return True
            except LockNotOwnedError:
                self.holding = False
                logger.warning(
                    "beat %s lost its lock (Redis restarted, or this beat stalled for over %s s): "
                    "it sends nothing until it holds the lock again",
                    self.token,
                    int(self.lock_seconds),
                )
        if self.lock.acquire(token=self.token):
            self.holding = True
            logger.log(
                logging.WARNING if self.waiting_logged else logging.INFO,
                "beat %s %s the lock: this beat sends the schedule",
                self.token,
                "took over" if self.waiting_logged else "holds",
            )
            self.waiting_logged = False
            return True
        if not self.waiting_logged:  # once per wait, not once per try
            holder = readiness_redis().get(readiness_key(BEAT_LOCK_KEY))
            logger.warning(
                "beat %s is waiting for the lock held by beat %s: it sends nothing while that one runs, "
                "and takes over within %s s of its end",
                self.token,
                holder.decode() if isinstance(holder, bytes) else "(just freed)",
                int(self.lock_seconds + self.retry_seconds) + 1,
            )
            self.waiting_logged = True
        return False

    def close(self) -> None:
        """A clean stop frees the lock, so a waiting beat takes over at its next try rather than at expiry."""
        try:
            super().close()
        finally:
            if self.holding:
                self.holding = False
                with contextlib.suppress(redis.RedisError):  # expired, or Redis gone: nothing to free
                    self.lock.release()
