"""Run the sandbox app in a background thread (tests, `make run`) or in the foreground.

With `tls_port`, a second listener serves the same app (and state) over HTTPS with a certificate generated at
start and renewed before it expires (sandbox/tls.py), written to `cert_path`; both listeners serve every route.
Clients use plain http for Google, Gemini and the control API (https too in a demo deployment, docs/deploy.md),
and https for Microsoft identity and Graph, whose links point there.
"""

from __future__ import annotations

import threading
from pathlib import Path
from socket import socket
from typing import Any

from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer, WSGIRequestHandler, make_server

from sandbox.app import create_app
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
    """A threaded HTTP server for the sandbox on `host:port` (port 0 picks a free one), plus optional HTTPS."""

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
        self._server: BaseWSGIServer = make_server(host, port, app=None, threaded=True)  # type: ignore[arg-type]
        self.url = f"http://{host}:{self._server.server_port}"
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

    def _listeners(self) -> list[BaseWSGIServer]:
        return [self._server] + ([self._tls_server] if self._tls_server is not None else [])

    def start(self) -> SandboxServer:
        for index, listener in enumerate(self._listeners()):
            name = "sandbox" if index == 0 else "sandbox-tls"
            thread = threading.Thread(target=listener.serve_forever, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def serve_forever(self) -> None:
        """Serve in the foreground (the HTTPS listener, if any, in a daemon thread beside it)."""
        if self._tls_server is not None:
            thread = threading.Thread(target=self._tls_server.serve_forever, name="sandbox-tls", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._server.serve_forever()

    def stop(self) -> None:
        for listener in self._listeners():
            listener.shutdown()
            listener.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
