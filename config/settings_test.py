"""Settings for the test suite: the normal settings, with the environment pointed at test resources.

Set before the normal settings are read, and inherited by any process a test starts: a Redis database
of its own (so tests never touch the queue or cache of a running `make run`); cache keys, a Celery queue
and a test database name of this run (so two test runs side by side do not disturb each other); and free
ports for the sandbox, which the test session starts there.
"""

import atexit
import os
import shutil
import tempfile

from config.ports import free_port as _free_port

# Under pytest-xdist each worker is a test run of its own: the controller's values (which its workers inherit)
# are replaced once in each worker, and the processes a worker starts inherit that worker's.
# PER_RUN_ENV names what each run sets for itself; tests starting a process of their own (a benchmark, a second
# checkout) leave these out of its environment so that it chooses its own.
PER_RUN_ENV = (
    "CACHE_KEY_PREFIX",
    "CELERY_QUEUE",
    "TEST_DATABASE_NAME",
    "SANDBOX_URL",
    "SANDBOX_TLS_URL",
    "MICROSOFT_CA_BUNDLE",
    "IMAP_CA_BUNDLE",
    "INBOUND_DNS_SERVER",
)
_run = os.environ.get("PYTEST_XDIST_WORKER", "")
if os.environ.get("TASKLIFT_TEST_RUN", _run) != _run:
    for name in (*PER_RUN_ENV, "PROMETHEUS_MULTIPROC_DIR"):
        os.environ.pop(name, None)
os.environ["TASKLIFT_TEST_RUN"] = _run
os.environ.setdefault("REDIS_DB", "1")
os.environ.setdefault("CACHE_KEY_PREFIX", f"tasklift-test-{os.getpid()}")
os.environ.setdefault("CELERY_QUEUE", f"tasklift-test-{os.getpid()}")
os.environ.setdefault("TEST_DATABASE_NAME", f"test_tasklift_{os.getpid()}")
os.environ.setdefault("SANDBOX_URL", f"http://127.0.0.1:{_free_port()}")
os.environ.setdefault("SANDBOX_TLS_URL", f"https://127.0.0.1:{_free_port()}")
os.environ.setdefault("MICROSOFT_CA_BUNDLE", f"{tempfile.gettempdir()}/tasklift-test-{os.getpid()}-tls-cert.pem")
# The test Dovecot's certificate (sandbox/dovecot.py writes it where this says)
os.environ.setdefault("IMAP_CA_BUNDLE", f"{tempfile.gettempdir()}/tasklift-test-{os.getpid()}-imap-ca.pem")
# The inbound checks' DNS is the sandbox's (UDP on its HTTP port's number: sandbox/dns.py).
os.environ.setdefault("INBOUND_DNS_SERVER", f"127.0.0.1:{os.environ['SANDBOX_URL'].rpartition(':')[2]}")
os.environ.setdefault("INBOUND_WEBHOOK_SECRET", "tasklift-test-inbound-secret")
os.environ.setdefault("IMAP_ALLOW_PRIVATE_HOSTS", "true")  # the test Dovecot is on 127.0.0.1
for name in ("GOOGLE_CLIENT_ID", "GEMINI_API_KEY", "MICROSOFT_CLIENT_ID"):
    os.environ.pop(name, None)  # tests always run against the sandbox
os.environ.setdefault("GEMINI_RETRY_INITIAL_DELAY_S", "0.01")
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:  # this run's metrics, shared with the processes it starts
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"tasklift-test-{os.getpid()}-metrics-")
    atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], True)
# Push needs the site reachable by the sandbox: only the tests that serve it (live_server) turn it on.
os.environ.setdefault("PUSH_ENABLED", "false")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast, tests only
