"""Run the sandbox app in a background thread (tests, `make run`) or in the foreground.

With `tls_port`, a second listener serves the same app (and state) over HTTPS with a certificate generated at
start and renewed before it expires (sandbox/tls.py), written to `cert_path`; both listeners serve every route.
Clients use plain http for Google, Gemini and the control API (https too in a demo deployment, docs/deploy.md),
and https for Microsoft identity and Graph, whose links point there.

The DNS server (sandbox/dns.py) listens on UDP at the HTTP listener's host and port number: one port names the
whole sandbox, so a test run's settings need nothing new to find it.
"""

from __future__ import annotations

import socketserver
import threading
from pathlib import Path
from socket import socket
from typing import Any

from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer, WSGIRequestHandler, make_server

from sandbox.app import create_app
from sandbox.dns import dns_listener
from sandbox.state import SandboxState
from sandbox.tls import RenewingCertificate


class _NoDelayHandler(WSGIRequestHandler):
    # Over TLS each write is a record of its own; with Nagle on, the body waits for the ACK of the headers
    # (delayed by the client), which costs ~10 ms a request on loopback.
    disable_nagle_algorithm = True


class _TLSServer(ThreadedWSGIServer):
    """Each connection wrapped in the certificate's current context as it is accepted; the handshake is left
    to the request's own thread (werkzeug's own wrapping does it inside accept(), on the one serving thread,
    so a client that connects and stays silent would stall the listener)."""

    certificate: RenewingCertificate

    def get_request(self) -> tuple[socket, Any]:
        connection, address = self.socket.accept()
        context = self.certificate.current()
        return context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address


class SandboxServer:
    """A threaded HTTP server for the sandbox on `host:port` (port 0 picks a free one), DNS over UDP on the same
    port number, plus optional HTTPS."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        state: SandboxState | None = None,
        *,
        tls_port: int | None = None,
        cert_path: str | Path | None = None,
    ) -> None:
        if tls_port is not None and cert_path is None:
            raise ValueError("tls_port needs cert_path: the file the sandbox writes its certificate to")
        self.state = state or SandboxState()
        self._server, self._dns = self._http_and_dns(host, port)
        self.port: int = self._server.server_port
        self.url = f"http://{host}:{self.port}"
        self._tls_server: BaseWSGIServer | None = None
        self.tls_url = ""
        self.cert_path = Path(cert_path) if cert_path is not None else None
        if tls_port is not None and self.cert_path is not None:
            tls_server = _TLSServer(host, tls_port, app=None, handler=_NoDelayHandler)  # type: ignore[arg-type]
            tls_server.certificate = RenewingCertificate(self.cert_path)
            tls_server.ssl_context = tls_server.certificate.context  # so the WSGI environ says https
            self._tls_server = tls_server
            self.tls_url = f"https://{host}:{tls_server.server_port}"
        self.app = create_app(self.state, base_url=self.url, tls_base_url=self.tls_url)
        self._server.app = self.app
        if self._tls_server is not None:
            self._tls_server.app = self.app
        self._threads: list[threading.Thread] = []

    def _http_and_dns(self, host: str, port: int) -> tuple[BaseWSGIServer, socketserver.BaseServer]:
        """The HTTP listener and the DNS one on the same port number. With port 0 the kernel picks a TCP port
        whose UDP twin may be taken: then another pick."""
        for _ in range(10):
            server: BaseWSGIServer = make_server(host, port, app=None, threaded=True)  # type: ignore[arg-type]
            try:
                return server, dns_listener(self.state, host, server.server_port)
            except OSError as error:
                server.server_close()
                if port:
                    raise OSError(
                        error.errno, f"The sandbox's DNS cannot listen on UDP {host}:{port}: {error.strerror}"
                    ) from error
        raise OSError(f"No port on {host} was free for both TCP (HTTP) and UDP (DNS) after 10 tries")

    def _listeners(self) -> list[tuple[str, socketserver.BaseServer]]:
        listeners: list[tuple[str, socketserver.BaseServer]] = [("sandbox", self._server), ("sandbox-dns", self._dns)]
        if self._tls_server is not None:
            listeners.append(("sandbox-tls", self._tls_server))
        return listeners

    def _serve_in_threads(self, listeners: list[tuple[str, socketserver.BaseServer]]) -> None:
        for name, listener in listeners:
            thread = threading.Thread(target=listener.serve_forever, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def start(self) -> SandboxServer:
        self._serve_in_threads(self._listeners())
        return self

    def serve_forever(self) -> None:
        """Serve HTTP in the foreground (DNS and the HTTPS listener, if any, in daemon threads beside it)."""
        self._serve_in_threads(self._listeners()[1:])
        self._server.serve_forever()

    def stop(self) -> None:
        for _, listener in self._listeners():
            listener.shutdown()
            listener.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
