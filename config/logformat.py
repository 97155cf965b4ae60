"""The two ways a log line is written (LOG_FORMAT): `json`, one object a line for a log collector, and
`plain`, for a person reading a terminal. Both carry the ids of the run in progress (config/logcontext.py)
and redact exception text as the filter redacts messages (config/logfilters.py).

The JSON formatter is the standard library's: the fields are fixed and few, and this is all it takes,
without a dependency to keep up to date.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from config.logcontext import FIELDS
from config.logfilters import redact

# Attributes every record has; anything else on a record came through `extra=` and is written too.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName", "ids"}
_STANDARD.update(FIELDS)


class JsonFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message", "process", run_id…, extras…, "exception"}`, one a line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        line.update({name: value for name in FIELDS if (value := getattr(record, name, None)) is not None})
        for name, value in vars(record).items():
            # Only plain values: an object's repr may hold anything (Django's request logs pass the request,
            # whose repr is its URL with the query string).
            if name not in _STANDARD and not name.startswith("_") and isinstance(value, (str, int, float, bool)):
                line.setdefault(name, redact(value) if isinstance(value, str) else value)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class PlainFormatter(logging.Formatter):
    """`time LEVEL logger message run_id=… user_id=…`, the traceback below it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s%(ids)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.ids = "".join(f" {n}={v}" for n in FIELDS if (v := getattr(record, n, None)) is not None)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return redact(super().formatException(ei))
