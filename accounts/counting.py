"""Sliding-window counts on the shared Redis, for the login throttle and the account-email limits.

Each counter is a sorted set of the attempts it counted, scored by when (Redis's own clock, so that every web
process agrees). One Lua script checks every counter of a request and, only when none refuses, counts the
request in all of them, atomically: two requests at once cannot both take the last place, and a refused
request counts nowhere. A counter forgets what is older than its window, whenever it is looked at, so there
is no boundary after which a full window's worth is allowed again (django-ratelimit's fixed windows did that).

A counter is either a limit (at most `limit` within the window; Retry-After is when the oldest that must go
leaves) or a slowdown (past `limit`, each attempt waits `delay_ms` after the newest, doubled for each one
beyond, up to `max_delay_ms`).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

_TAKE = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local worst, refused_by = 0, 0
for i, key in ipairs(KEYS) do
  local at = 2 + (i - 1) * 4
  local window, limit = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  local delay, max_delay = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count >= limit then
    local wait
    if delay == 0 then
      local leaving = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
      wait = tonumber(leaving[2]) + window - now
    else
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      wait = tonumber(newest[2]) + math.min(max_delay, delay * 2 ^ math.min(count - limit, 40)) - now
    end
    if wait > worst then worst, refused_by = wait, i end
  end
end
if refused_by > 0 then return {refused_by, worst} end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
  redis.call('PEXPIRE', key, tonumber(ARGV[2 + (i - 1) * 4]))
end
return {0, 0}
"""

_connection: dict[str, Any] = {}
_connection_lock = threading.Lock()


def _redis() -> Any:
    with _connection_lock:
        if _connection.get("url") != settings.REDIS_URL:
            client = redis.Redis.from_url(settings.REDIS_URL)
            _connection.update(url=settings.REDIS_URL, client=client, take=client.register_script(_TAKE))
        return _connection


def counter_key(kind: str, value: str) -> str:
    """A counter's Redis key; the value is hashed (an account name is whatever was typed, of any length)."""
    digest = hashlib.sha256(value.encode()).hexdigest()
    return f"{settings.CACHES['default']['KEY_PREFIX']}:counting:{kind}:{digest}"


@dataclass(frozen=True)
class Counter:
    key: str
    limit: int
    window_s: float
    delay_s: float = 0  # 0: a limit; else a slowdown starting with this wait
    max_delay_s: float = 0


@dataclass(frozen=True)
class Counted:
    """One request counted in `keys`; `entry` takes it out of them again (counted_forget)."""

    keys: tuple[str, ...]
    entry: str


class CountingUnavailable(Exception):
    """Redis cannot be reached: nothing could be counted, so the caller must not let the request through."""


class CountRefused(Exception):
    def __init__(self, counter: Counter, retry_after: int) -> None:
        super().__init__(f"refused by {counter.key}, retry after {retry_after} s")
        self.counter = counter
        self.retry_after = retry_after


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def count_take(*counters: Counter) -> Counted:
    """Count one request in every counter, or in none and raise CountRefused naming the one that makes it
    wait longest, with that wait in whole seconds (at least 1)."""
    entry = uuid.uuid4().hex
    args: list[Any] = [entry]
    for counter in counters:
        args += [_ms(counter.window_s), counter.limit, _ms(counter.delay_s), _ms(counter.max_delay_s)]
    try:
        refused_by, wait_ms = _redis()["take"](keys=[c.key for c in counters], args=args)
    except redis.RedisError as error:
        raise CountingUnavailable(type(error).__name__) from error
    if int(refused_by):
        raise CountRefused(counters[int(refused_by) - 1], max(1, -(-int(wait_ms) // 1000)))
    return Counted(keys=tuple(c.key for c in counters), entry=entry)


def counted_forget(counted: Counted) -> None:
    """Take a counted request out again (a login that succeeded is not a failure). Redis lost meanwhile, it
    stays counted: one failure too many, never a lost one."""
    pipe = _redis()["client"].pipeline(transaction=False)
    for key in counted.keys:
        pipe.zrem(key, counted.entry)
    with contextlib.suppress(redis.RedisError):
        pipe.execute()
