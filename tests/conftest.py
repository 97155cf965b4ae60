"""Shared fixtures: the sandbox server (one per test session) and a reset control client per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from accounts.models import User
from accounts.services import consent_grant
from sandbox.client import SandboxClient
from sandbox.server import SandboxServer
from tests.factories import UserFactory


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


@pytest.fixture(autouse=True)
def _clean_redis() -> Iterator[None]:
    """Each test starts with an empty test Redis database (rate-limit counters, broker queue)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def broker_queue() -> Callable[[], int]:
    """How many jobs wait in the Celery queue of the test Redis database."""
    import redis

    connection = redis.Redis.from_url(settings.REDIS_URL)

    def length() -> int:
        return int(connection.llen(settings.CELERY_TASK_DEFAULT_QUEUE))

    return length


@pytest.fixture
def user(db: None) -> User:
    return UserFactory()


@pytest.fixture
def consenting_user(user: User) -> User:
    consent_grant(user=user)
    return user
