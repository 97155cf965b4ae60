"""Run the sandbox app in a background thread (tests, `make run`) or in the foreground."""

from __future__ import annotations

import threading

from werkzeug.serving import BaseWSGIServer, make_server

from sandbox.app import create_app
from sandbox.state import SandboxState


class SandboxServer:
    """A threaded HTTP server for the sandbox on `host:port` (port 0 picks a free one)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, state: SandboxState | None = None) -> None:
        self.state = state or SandboxState()
        self._server: BaseWSGIServer = make_server(host, port, app=None, threaded=True)  # type: ignore[arg-type]
        self.url = f"http://{host}:{self._server.server_port}"
        self.app = create_app(self.state, base_url=self.url)
        self._server.app = self.app
        self._thread: threading.Thread | None = None

    def start(self) -> SandboxServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sandbox", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
