"""A small client for the sandbox control API, used by tests, benchmarks and the demo seeding."""

from __future__ import annotations

from typing import Any

import requests


class SandboxClient:
    def __init__(self, base_url: str, *, timeout: float = 10) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = requests.Session()
        self.http.trust_env = False  # loopback only; never a proxy
        self.timeout = timeout

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, f"{self.base_url}/_sandbox{path}", timeout=self.timeout, **kwargs)
        if response.status_code >= 400:
            raise SandboxControlError(response.status_code, response.text)
        return response.json()

    def reset(self) -> None:
        self.call("POST", "/reset")

    def fault(self, service: str, status: int, **spec: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.call("POST", "/faults", json={"service": service, "status": status, **spec})
        return result

    def clear_faults(self, service: str | None = None) -> None:
        self.call("DELETE", "/faults", params={"service": service} if service else None)

    def requests(self, service: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.call("GET", "/requests", params={"service": service} if service else None)[
            "requests"
        ]
        return result

    def clear_requests(self) -> None:
        self.call("DELETE", "/requests")

    def set_gemini_latency(self, ms: int) -> None:
        self.call("PUT", "/settings", json={"gemini_latency_ms": ms})


class SandboxControlError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"sandbox control API answered {status}: {body}")
        self.status = status
        self.body = body
