"""`python -m config.healthcheck worker|beat`: compose's checks of a worker's and beat's container (issue 35), read
from the heartbeats /readyz reads (config/heartbeat.py), in this test run's Redis."""

from __future__ import annotations

import socket

from config.healthcheck import check_beat, check_worker, main
from config.heartbeat import beat_tick_record, worker_heartbeat_record


def test_healthcheck_worker_is_healthy_only_with_a_heartbeat_of_a_worker_of_this_host() -> None:
    here = socket.gethostname()
    assert check_worker() == f"no worker of {here} wrote its heartbeat within 60 s"
    worker_heartbeat_record(worker="worker.1@another-host:41")  # a worker of another container
    assert check_worker() is not None
    worker_heartbeat_record(worker=f"celery@{here}:42")
    assert check_worker() is None
    assert main(["worker"]) == 0


def test_healthcheck_beat_is_healthy_once_beat_has_ticked() -> None:
    assert check_beat() == "beat has not ticked within 60 s"
    assert main(["beat"]) == 1
    beat_tick_record()
    assert check_beat() is None


def test_healthcheck_without_a_role_says_how_it_is_used() -> None:
    assert main([]) == 2
    assert main(["supervise"]) == 2
