"""Free TCP ports for the servers tests, benchmarks and `make run`'s helpers start on 127.0.0.1.

A port is chosen free, then bound later by the server it is for: in between, another process may take it. With
`bind(("127.0.0.1", 0))` the kernel chose it from its ephemeral range, the range every outgoing connection's local
port comes from too, so a busy test run's own connections took chosen ports (a second checkout's sandbox found
its port "already in use", CI of 1335b38). These come from below that range, where only servers that asked for a
port by number listen, at random, each checked free when chosen.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20_000
_random = random.SystemRandom()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that nothing listens on now, below the ephemeral range."""
    top = _ephemeral_start() - 1
    chosen: list[int] = []
    probes: list[socket.socket] = []
    try:
        while len(chosen) < count:
            port = _random.randint(LOWEST, top) if top > LOWEST else 0
            probe = socket.socket()
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                probe.close()
                continue
            probes.append(probe)  # held until all are chosen, so they differ
            chosen.append(int(probe.getsockname()[1]))
    finally:
        for probe in probes:
            probe.close()
    return chosen


def free_port() -> int:
    return free_ports(1)[0]
