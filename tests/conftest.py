"""Shared fixtures: the sandbox server (one per test session) and a reset control client per test."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from sandbox.client import SandboxClient
from sandbox.server import SandboxServer


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[SandboxServer]:
    url = urlsplit(settings.SANDBOX_URL)
    server = SandboxServer(url.hostname or "127.0.0.1", url.port or 0).start()
    yield server
    server.stop()


@pytest.fixture
def sandbox(sandbox_server: SandboxServer) -> Iterator[SandboxClient]:
    """The sandbox, reset to empty before the test."""
    client = SandboxClient(sandbox_server.url)
    client.reset()
    yield client
