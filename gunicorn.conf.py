"""gunicorn's settings for the web process (the Procfile's `web`), read from the environment like the app's.

`PORT` (default 8000) and `GUNICORN_BIND` say where it listens, `WEB_CONCURRENCY` how many processes it forks.
"""

import os

bind = os.environ.get("GUNICORN_BIND") or f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = timeout

# gunicorn's error and access logs through our logging configuration (LOG_FORMAT, LOG_LEVEL): one JSON
# object a line in production, redacted (an OAuth callback's ?code=…&state=… never reaches the access log).
# Setting logconfig_dict is also what turns gunicorn's access log on.
from config.logconfig import log_settings, logging_config  # noqa: E402

_log_format, _log_level = log_settings()
logconfig_dict = logging_config(log_format=_log_format, level=_log_level)
