"""The logging configuration (Django's LOGGING), and the two settings it is made from.

gunicorn.conf.py gives gunicorn the same configuration, so that its error and access logs go through our
handler (its format, the redaction filter, the run ids), and Celery's worker and beat take it too
(config/celery.py). Both read LOG_FORMAT and LOG_LEVEL here rather than from the settings module, which
gunicorn's master cannot import: reading it starts the embedded servers.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from config.env import env_str

# Libraries that log token responses, request URLs or SQL with its parameters (addresses, ciphertexts) at
# DEBUG: never below WARNING (INFO for SQL), whatever LOG_LEVEL says, so that no OAuth token reaches a log.
_QUIET = {
    "requests_oauthlib": "WARNING",
    "oauthlib": "WARNING",
    "google_auth_oauthlib": "WARNING",
    "google.auth": "WARNING",
    "msal": "WARNING",
    "requests": "WARNING",
    "googleapiclient": "WARNING",
    "httpx": "WARNING",
    "httpx2": "WARNING",
    "urllib3": "WARNING",
    "pgserver": "WARNING",
    "django.db.backends": "INFO",
}


def log_settings() -> tuple[str, str]:
    """LOG_FORMAT (`json`, the default in production, or `plain`) and LOG_LEVEL (INFO) from the environment."""
    production = env_str("TASKLIFT_MODE", "development") == "production"
    log_format = (env_str("LOG_FORMAT") or ("json" if production else "plain")).lower()
    if log_format not in ("json", "plain"):
        raise ImproperlyConfigured(f"LOG_FORMAT must be 'json' or 'plain', not {log_format!r}.")
    return log_format, (env_str("LOG_LEVEL") or "INFO").upper()


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """One handler (stderr) for everything; the redaction and the run ids are filters of that handler, so
    that every record it writes passes them, whichever logger it came through."""
    through_console = {"handlers": ["console"], "level": "INFO", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {"()": "config.logformat.JsonFormatter"},
            "plain": {"()": "config.logformat.PlainFormatter"},
        },
        "filters": {
            "redact": {"()": "config.logfilters.RedactOAuthParams"},
            "context": {"()": "config.logfilters.LogContextFilter"},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["redact", "context"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            **{name: {"level": quiet} for name, quiet in _QUIET.items()},
            # Django's own default handlers on "django" (a console one while DEBUG, mail to ADMINS otherwise)
            # write without our filters: a 400 on a reset link wrote its token. Its records go to ours only.
            "django": {"handlers": [], "level": "INFO", "propagate": True},
            # Access logs (the development server's, gunicorn's) and gunicorn's own lines, through the
            # redacting handler instead of their own.
            "django.server": through_console,
            "gunicorn.access": through_console,
            "gunicorn.error": {**through_console, "level": level},
        },
    }


def log_line(logger: str, level: int, message: str, **extra: object) -> str:
    """One line as the console handler would write it (LOG_FORMAT's formatter), for the few written outside
    logging: at a start the settings refuse (config/startup.py), in Celery's signal handler (config/celery.py).
    A LOG_FORMAT that is itself wrong gives JSON."""
    import logging

    from config.logformat import JsonFormatter, PlainFormatter

    record = logging.LogRecord(logger, level, __file__, 0, message, None, None)
    record.__dict__.update(extra)
    try:
        plain = log_settings()[0] == "plain"
    except ImproperlyConfigured:
        plain = False
    return (PlainFormatter() if plain else JsonFormatter()).format(record)
