"""The Redis transport of Celery's broker, with one fix: a worker outlives a restart of its Redis.

kombu 5.7.0 (the newest release, as is celery 5.7.0) made a worker exit for good, `Unrecoverable error:
AttributeError("'NoneType' object has no attribute 'hostname'")`, when its Redis went away while a job was
unacknowledged (running, or prefetched) and a BRPOP was waiting for the next one: the usual state of a
busy worker. What happens, read in celery/worker/consumer/consumer.py (`on_connection_error_after_connected`)
and kombu/connection.py, kombu/transport/redis.py:

1. The consumer first `collect()`s the broken connection. Closing its channel fails at the first step (the
   pending BRPOP's reply cannot be read: a connection error, swallowed), so the channel stays open, and
   `collect()` then detaches the transport from its connection (`transport.client = None`).
2. The consumer then `close()`s the same connection. The channel's close now goes on to give back its
   unacknowledged messages, which needs a new connection pool; the pool's parameters are read from
   `transport.client`, which is None: an AttributeError, which nothing treats as a broker error, so it ends
   the worker (exit code 1). An acknowledgement sent through that channel later (a job finishing, or the
   worker's shutdown) meets the same AttributeError.

No setting avoids it (giving messages back at close is not configurable for Redis), so the channel here says
what that state is: a closed broker connection, whose errors every caller already handles (the consumer
reconnects; an acknowledgement that cannot be sent is logged, and the message comes back after the broker's
visibility timeout, or the reaper requeues its run: extraction/services.py extraction_runs_reap).

`install()` makes this the transport of every `redis://` and `redis+socket://` broker URL of the process
(config/celery.py calls it), so the worker, beat and the web processes use the same one.
"""

from __future__ import annotations

from typing import Any

import kombu.transport
import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:  # the connection was collected or closed (module docstring)
            raise redis.ConnectionError("the broker connection was closed")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)  # type: ignore[no-untyped-call]
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel


def install() -> None:
    """kombu resolves a URL's scheme through this table each time it makes a connection."""
    kombu.transport.TRANSPORT_ALIASES["redis"] = f"{__name__}:Transport"
