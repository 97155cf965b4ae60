"""gunicorn's settings for the web process (the Procfile's `web`), read from the environment like the app's.

`PORT` (default 8000) and `GUNICORN_BIND` say where it listens, `WEB_CONCURRENCY` how many processes it forks.
"""

import os

bind = os.environ.get("GUNICORN_BIND") or f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = timeout
