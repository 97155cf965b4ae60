"""What Tasklift logs never holds an OAuth callback's code or state."""

from __future__ import annotations

import logging

import pytest


@pytest.mark.parametrize("logger_name", ["django.server", "django.request", "integrations"])
def test_a_callback_url_is_logged_without_its_code_and_state(logger_name: str) -> None:
    logger = logging.getLogger(logger_name)
    handlers = [h for source in (logger, logging.getLogger()) for h in source.handlers]
    handler = next(h for h in handlers if h.filters)  # the configured console handler, with its filters
    assert logger_name != "django.server" or handler in logger.handlers  # the access log goes through it
    record = logging.LogRecord(
        logger_name,
        logging.WARNING,
        __file__,
        1,
        '"GET /integrations/google/callback?state=%s&code=%s&scope=x HTTP/1.1" 302',
        ("st4te-S3CRET", "4/0AbC-auth-c0de"),
        None,
    )

    assert handler.filter(record)
    logged = handler.format(record)

    assert "S3CRET" not in logged and "auth-c0de" not in logged
    assert "state=[redacted]&code=[redacted]&scope=x" in logged
