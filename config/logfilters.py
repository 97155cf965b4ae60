"""Log filters. OAuth callbacks carry an authorization code and a state in their query string: whatever
logs a request's URL (the development server's access log, Django's request warnings) must not keep them."""

from __future__ import annotations

import logging
import re

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
