"""One Gemini quota for every worker: requests and tokens per minute, per model, counted on the shared Redis.

Every Gemini call takes its turn here first (`gemini_quota_take`): within the configured requests per minute
(GEMINI_REQUESTS_PER_MINUTE) and tokens per minute (GEMINI_TOKENS_PER_MINUTE) of all workers together it
goes at once; over them it waits for the next minute instead of collecting 429s. A 429 from Gemini that
names a retry delay pauses every worker's calls for that long (`gemini_quota_pause`). A wait longer than
GEMINI_MAX_RETRY_WAIT_S is not waited out: the caller ends its run (the person's next run comes after it).

The counting is one Lua script (atomic in Redis): fixed one-minute windows, keys that expire with them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
from django.conf import settings

_TAKE = """
local now = tonumber(ARGV[1])
local paused = tonumber(redis.call('GET', KEYS[3]) or '0')
if paused > now then return paused - now end
local window_end = (math.floor(now / 60000) + 1) * 60000
local rpm, tpm, tokens = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local requests = tonumber(redis.call('GET', KEYS[1]) or '0')
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if (rpm > 0 and requests + 1 > rpm) or (tpm > 0 and used > 0 and used + tokens > tpm) then
  return window_end - now
end
redis.call('INCR', KEYS[1])
redis.call('INCRBY', KEYS[2], tokens)
redis.call('PEXPIREAT', KEYS[1], window_end + 1000)
redis.call('PEXPIREAT', KEYS[2], window_end + 1000)
return 0
"""

_PAUSE = """
local until_ms = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ms > current then redis.call('SET', KEYS[1], until_ms, 'PXAT', until_ms + 1000) end
return 0
"""

_connection: dict[str, Any] = {}
_connection_lock = threading.Lock()


class QuotaExhausted(Exception):
    """The shared quota would make this call wait longer than GEMINI_MAX_RETRY_WAIT_S. `wait` is in seconds."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"the Gemini quota is used up for {wait:.0f} s")
        self.wait = wait


def _redis() -> Any:
    with _connection_lock:
        client = _connection.get(settings.REDIS_URL)
        if client is None:
            client = redis.Redis.from_url(settings.REDIS_URL)
            _connection.clear()
            _connection[settings.REDIS_URL] = client
            _connection["take"] = client.register_script(_TAKE)
            _connection["pause"] = client.register_script(_PAUSE)
        return _connection


def _keys(model: str) -> list[str]:
    prefix = f"{settings.CACHES['default']['KEY_PREFIX']}:gemini-quota:{model}"
    window = int(time.time() // 60)
    return [f"{prefix}:requests:{window}", f"{prefix}:tokens:{window}", f"{prefix}:paused-until"]


def gemini_quota_take(*, model: str, tokens: int) -> float:
    """Wait for this call's turn under the shared quota; return how long it waited (seconds). Raises
    QuotaExhausted when the turn is further away than GEMINI_MAX_RETRY_WAIT_S."""
    rpm, tpm = settings.GEMINI_REQUESTS_PER_MINUTE, settings.GEMINI_TOKENS_PER_MINUTE  # 0: no limit
    waited = 0.0
    while True:
        wait_ms = int(_redis()["take"](keys=_keys(model), args=[int(time.time() * 1000), rpm, tpm, max(tokens, 1)]))
        if wait_ms <= 0:
            return waited
        wait = wait_ms / 1000
        if waited + wait > settings.GEMINI_MAX_RETRY_WAIT_S:
            raise QuotaExhausted(wait)
        time.sleep(wait)
        waited += wait


def gemini_quota_pause(*, model: str, seconds: float) -> None:
    """Gemini asked to wait `seconds` (a 429 with a retry delay): every worker's calls wait that long."""
    until_ms = int((time.time() + seconds) * 1000)
    _redis()["pause"](keys=[_keys(model)[2]], args=[until_ms])
