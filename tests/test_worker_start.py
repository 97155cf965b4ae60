"""What a Celery worker does when it starts, before it takes a job."""

from __future__ import annotations

from celery.signals import worker_init, worker_process_init

from config import celery
from extraction import llm
from integrations.mail.clean import _identifier


def test_a_worker_loads_the_language_model_before_its_first_run() -> None:
    """The cleaner's language model takes seconds to load: a worker loads it at start, so no person's run
    waits for it in the middle of its batches (and a prefork pool's children share it)."""
    connected = [receiver() for _, receiver in worker_init.receivers]
    assert celery._warm_up in connected
    _identifier.cache_clear()

    celery._warm_up()

    assert _identifier.cache_info().currsize == 1
    assert _identifier().classify("Could you please send me the report by Friday?")[0] == "en"


def test_each_worker_process_makes_its_gemini_client_before_its_first_run() -> None:
    """Made after the fork (a client's HTTP connections are not shared between processes), before a run."""
    connected = [receiver() for _, receiver in worker_process_init.receivers]
    assert celery._make_clients in connected
    llm._shared.clear()

    celery._make_clients()

    assert len(llm._shared) == 1
    made = next(iter(llm._shared.values()))
    assert llm.gemini_client() is made  # the first run finds it made


def test_a_worker_bounds_mallocs_heaps_before_its_threads_start() -> None:
    """glibc's malloc answers the limit (a run's threads then share two heaps rather than fragment one each:
    the memory figures of benchmarks/README.md)."""
    connected = [receiver() for _, receiver in worker_init.receivers]
    assert celery._warm_up in connected
    assert celery.malloc_arenas_limit() is True
