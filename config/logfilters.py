"""Log filters, on every handler. OAuth callbacks carry an authorization code and a state in their query
string: whatever logs a request's URL (gunicorn's and the development server's access logs, Django's
request warnings) must not keep them. And each record gets the ids of the run in progress (config/logcontext.py)."""

from __future__ import annotations

import logging
import re

from config.logcontext import FIELDS, log_context_now

_SECRET_PARAMS = re.compile(r"(?i)\b(code|state|session_state|id_token|access_token|refresh_token)=[^&\s\"']*")


def redact(text: str) -> str:
    return _SECRET_PARAMS.sub(lambda match: f"{match.group(1)}=[redacted]", text)


class RedactOAuthParams(logging.Filter):
    """Replace the values of `code=`, `state=` and token parameters in a record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


class LogContextFilter(logging.Filter):
    """Give the record the run id, person id, mailbox id and job id set where it was logged (None when not)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = log_context_now()
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, ids.get(name))
        return True
