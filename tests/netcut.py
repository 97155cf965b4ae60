"""A server that goes away under its clients, for one process of a test only.

`CuttableProxy` forwards a TCP port of its own to a server (PostgreSQL on a unix socket or on TCP). `cut()` drops
every connection through it and refuses new ones, as a restarting PostgreSQL looks to its clients: a query in
flight fails, the next connection is refused, and the server, seeing its client gone, lets go of that session's
locks. `restore()` listens on the same port again. The other processes of the test session keep their own
connections to the server, untouched.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from pathlib import Path
from typing import Any


class CuttableProxy:
    def __init__(self, *, host: str, port: int) -> None:
        """`host` a hostname, or a folder holding PostgreSQL's socket `.s.PGSQL.<port>`."""
        if host.startswith("/"):
            self._upstream: tuple[int, Any] = (socket.AF_UNIX, str(Path(host) / f".s.PGSQL.{port}"))
        else:
            self._upstream = (socket.AF_INET, (host, port))
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.restore()

    def restore(self) -> None:
        """Accept connections again (on the same port after a cut)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Every connection through the proxy dropped at once, and no new one taken until `restore()`."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept() in its thread
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    close = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            upstream = socket.socket(self._upstream[0], socket.SOCK_STREAM)
            try:
                upstream.connect(self._upstream[1])
            except OSError:
                client.close()
                upstream.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        """Both directions of one connection, until either side closes it or the proxy is cut."""
        peers = {a: b, b: a}
        try:
            while True:
                readable, _, _ = select.select(list(peers), [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return  # cut: the sockets were closed under us
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()
