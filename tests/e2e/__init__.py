"""Browser tests: Chromium through Playwright against a live Tasklift, the sandbox and a real Celery worker."""
