"""Tasklift settings. Everything comes from the environment; `.env.example` lists each variable.

Without DATABASE_URL / REDIS_URL the embedded PostgreSQL and Redis under `.local/` are used, and
without provider credentials each external service is the local sandbox (see sandbox/README.md).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from email.utils import parseaddr
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from config import embedded
from config.clientaddress import FORWARDED_FOR, proxy_networks
from config.crypto import encryption_keys_check, encryption_keys_strength_check
from config.env import env_bool, env_int, env_list, env_str
from config.logconfig import log_settings, logging_config
from config.weak import allowed_hosts_check, secret_key_check, site_url_check

django_stubs_ext.monkeypatch()  # generic Django classes (forms, managers) at run time

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DIR = Path(env_str("TASKLIFT_LOCAL_DIR") or BASE_DIR / ".local")

# Mode -----------------------------------------------------------------------------------------------
PRODUCTION = env_str("TASKLIFT_MODE", "development") == "production"
if env_str("TASKLIFT_MODE", "development") not in ("development", "production"):
    raise ImproperlyConfigured("TASKLIFT_MODE must be 'development' or 'production'")

DEV_SECRET_KEY = "dev-insecure-only-for-local-development-never-in-production"
SECRET_KEY = env_str("SECRET_KEY") or DEV_SECRET_KEY
if PRODUCTION:
    if SECRET_KEY == DEV_SECRET_KEY:
        raise ImproperlyConfigured(
            "Production mode needs a real SECRET_KEY (at least 50 random characters) in the environment."
        )
    secret_key_check(SECRET_KEY)  # what check --deploy would only warn of stops the start

DEBUG = env_bool("DEBUG", default=not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
if PRODUCTION:  # not `*`, nor `.co.uk`: every subdomain of one domain (`.example.co.uk`) at most
    allowed_hosts_check(ALLOWED_HOSTS)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
if PRODUCTION:  # named, and https: the development default is plain http on loopback
    site_url_check(env_str("SITE_URL"))

if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("Production mode refuses DEBUG=true: it shows code and settings to anyone.")
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # A proxy that terminates TLS and redirects http itself may turn Django's redirect off.
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    # Load balancers, supervisors and Prometheus ask these over plain http from inside, not through the proxy;
    # a redirect would answer for them (most probes count a 3xx as up). None sets a cookie; /metrics wants its
    # bearer token, which a private network carries.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    CSRF_COOKIE_HTTPONLY = True  # htmx and the API docs read the token from the page, never from the cookie
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=31_536_000)  # a year at least
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=True)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# Encryption of secrets at rest: Fernet keys, newest first. Older keys only decrypt, so a key can be
# rotated by putting a new one in front and running `manage.py rotate_secrets`.
ENCRYPTION_KEYS = env_list("TASKLIFT_ENCRYPTION_KEYS")
if not ENCRYPTION_KEYS:
    if PRODUCTION:
        raise ImproperlyConfigured("Production mode needs TASKLIFT_ENCRYPTION_KEYS (Fernet keys, comma-separated).")
    ENCRYPTION_KEYS = [base64.urlsafe_b64encode(hashlib.sha256(SECRET_KEY.encode()).digest()).decode()]
encryption_keys_check(ENCRYPTION_KEYS)  # each one, now: a bad key would fail the first mailbox connected
if PRODUCTION:
    encryption_keys_strength_check(ENCRYPTION_KEYS)  # no key of zeros, none listed twice

# Applications -----------------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "accounts",
    "integrations",
    "extraction",
    "tasks",
    "reminders",
]

MIDDLEWARE = [
    "config.metrics.HttpMetricsMiddleware",  # every answer counted, by route and status (/metrics)
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # the Content-Security-Policy below
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.UserTimezoneMiddleware",
    "config.middleware.HtmxLoginRedirectMiddleware",
    "config.middleware.MethodNotAllowedPageMiddleware",
    "config.unavailable.UnavailableMiddleware",  # Redis or the database out of reach: 503, never 500
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.context_processors.simulated_services",
            ],
        },
    },
]

# Database and Redis -----------------------------------------------------------------------------------
# Production names its servers: the embedded ones are development's, with their data under TASKLIFT_LOCAL_DIR.
_missing_servers = [name for name in ("DATABASE_URL", "REDIS_URL") if not env_str(name)]
if PRODUCTION and _missing_servers:
    raise ImproperlyConfigured(
        f"Production mode needs {' and '.join(_missing_servers)}: the embedded development servers are not for "
        "production (docs/deploy.md, Settings)."
    )
DATABASE_URL = env_str("DATABASE_URL") or embedded.postgres_url(LOCAL_DIR / "postgres")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", "test_tasklift")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL") or f"{embedded.redis_url(LOCAL_DIR / 'redis')}?db={env_int('REDIS_DB', 0)}"
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "tasklift"),
    }
}

# Celery: acks late with redelivery on worker loss, one message at a time, and
# soft time limit < hard time limit < broker visibility timeout, so a slow job is stopped before the
# broker hands its message to another worker.
CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1)
if CELERY_BROKER_URL.startswith("redis+socket://"):
    # kombu takes the database of a unix-socket URL from the virtual host, not from ?db=
    CELERY_BROKER_VHOST = REDIS_URL.rsplit("db=", 1)[1] if "db=" in REDIS_URL else "0"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 2, minimum=1)  # processes of one worker
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1)}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "tasklift")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
CELERY_BEAT_SCHEDULE_FILENAME = str(LOCAL_DIR / "celerybeat-schedule")
# One beat at a time, however many are started (config/beat.py): the one holding a Redis lock of
# BEAT_LOCK_SECONDS sends the schedule; another takes over within about BEAT_LOCK_SECONDS * 4/3 of its death.
CELERY_BEAT_SCHEDULER = "config.beat:LockedScheduler"
BEAT_LOCK_SECONDS = env_int("BEAT_LOCK_SECONDS", 30, minimum=3)
# /readyz (config/health.py): a worker counts as alive when its heartbeat is younger than READYZ_WORKER_SECONDS
# (it writes one every quarter of that); beat, when the lock holder ticked within READYZ_BEAT_SECONDS (it ticks
# at least every BEAT_LOCK_SECONDS / 3, whatever the schedule's intervals).
READYZ_WORKER_SECONDS = env_int("READYZ_WORKER_SECONDS", 60, minimum=1)
READYZ_BEAT_SECONDS = env_int("READYZ_BEAT_SECONDS", 60, minimum=1)
if READYZ_BEAT_SECONDS < BEAT_LOCK_SECONDS:
    raise ImproperlyConfigured(
        "READYZ_BEAT_SECONDS must be at least BEAT_LOCK_SECONDS, or /readyz would call a beat that is just"
        " between two ticks (BEAT_LOCK_SECONDS / 3 apart at most) dead."
    )

# Rate limiting (django-ratelimit) uses the shared Redis cache. Behind a proxy, RATELIMIT_IP_META_KEY names the
# META key of the header holding the client's address (HTTP_X_REAL_IP set by the proxy), or every client counts
# as the proxy; TRUSTED_PROXIES names the proxies' addresses. django-ratelimit itself is given the function that
# reads them (config/clientaddress.py): X-Forwarded-For is believed only as far as the trusted proxies wrote it.
RATELIMIT_USE_CACHE = "default"
CLIENT_ADDRESS_META_KEY = env_str("RATELIMIT_IP_META_KEY").upper()
if CLIENT_ADDRESS_META_KEY == "REMOTE_ADDR":
    CLIENT_ADDRESS_META_KEY = ""
if CLIENT_ADDRESS_META_KEY and not re.fullmatch(r"HTTP_[A-Z0-9_]+", CLIENT_ADDRESS_META_KEY):
    raise ImproperlyConfigured(
        "RATELIMIT_IP_META_KEY names a request META key such as HTTP_X_REAL_IP (the header X-Real-IP), "
        f"not {env_str('RATELIMIT_IP_META_KEY')!r}."
    )
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES")
proxy_networks(TRUSTED_PROXIES)  # a clear refusal now rather than on the first request
if PRODUCTION and CLIENT_ADDRESS_META_KEY == FORWARDED_FOR and not TRUSTED_PROXIES:
    raise ImproperlyConfigured(
        "RATELIMIT_IP_META_KEY=HTTP_X_FORWARDED_FOR needs TRUSTED_PROXIES: a client writes the start of that "
        "header itself, so name the proxies' addresses (TRUSTED_PROXIES=127.0.0.1 for a proxy on this machine) "
        "and the address the outermost one saw is taken; or have the proxy set X-Real-IP (docs/deploy.md, The proxy)."
    )
RATELIMIT_IP_META_KEY = "config.clientaddress.client_address"

# External services: real when configured, the sandbox otherwise ------------------------------------
SANDBOX_URL = env_str("SANDBOX_URL", "http://127.0.0.1:8765").rstrip("/")
# The sandbox's certificate, the file its https listeners' certificate is written to (`python -m sandbox
# --cert-file`, `make run`): every client that reaches the sandbox over https trusts it, given explicitly
# (config/trust.py). A demo deployment sets only this, beside an https SANDBOX_URL (docs/deploy.md). While
# Microsoft is the sandbox, MICROSOFT_CA_BUNDLE, which named this file before, is read as its default.
SANDBOX_CA_BUNDLE = (
    env_str("SANDBOX_CA_BUNDLE")
    or (env_str("MICROSOFT_CA_BUNDLE") if not env_str("MICROSOFT_CLIENT_ID") else "")
    or str(LOCAL_DIR / "sandbox" / "tls-cert.pem")
)
_SANDBOX_TLS = SANDBOX_URL.startswith("https://")
# httplib2 reads HTTPLIB2_CA_CERTS when it is imported and raises unless it names a file: naming a sandbox
# certificate not written yet, it made every command crash. The Gmail client is given its CA file itself
# (GOOGLE_CA_BUNDLE), so such a value is dropped from the environment, before anything imports httplib2.
if os.environ.get("HTTPLIB2_CA_CERTS") and not os.path.isfile(os.environ["HTTPLIB2_CA_CERTS"]):
    del os.environ["HTTPLIB2_CA_CERTS"]

GOOGLE_CLIENT_ID = env_str("GOOGLE_CLIENT_ID")
GOOGLE_CLIENT_SECRET = env_str("GOOGLE_CLIENT_SECRET")
GOOGLE_SIMULATED = not GOOGLE_CLIENT_ID
if GOOGLE_SIMULATED:
    GOOGLE_CLIENT_ID = "sandbox-google-client"
    GOOGLE_CLIENT_SECRET = "sandbox-google-secret"
    GOOGLE_AUTH_URI = f"{SANDBOX_URL}/google/o/oauth2/auth"
    GOOGLE_TOKEN_URI = f"{SANDBOX_URL}/google/token"
    GOOGLE_REVOKE_URI = f"{SANDBOX_URL}/google/revoke"
    GMAIL_API_ENDPOINT = SANDBOX_URL
    GOOGLE_CA_BUNDLE = SANDBOX_CA_BUNDLE if _SANDBOX_TLS else ""
    if not PRODUCTION:
        # oauthlib refuses plain http; the development sandbox is plain http on loopback. Never in production
        # (see "Production and the sandbox" below).
        os.environ.setdefault("OAUTHLIB_INSECURE_TRANSPORT", "1")
else:
    GOOGLE_AUTH_URI = "https://accounts.google.com/o/oauth2/auth"
    GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
    GOOGLE_REVOKE_URI = "https://oauth2.googleapis.com/revoke"
    GMAIL_API_ENDPOINT = "https://gmail.googleapis.com"
    GOOGLE_CA_BUNDLE = ""  # the system's trust store
GMAIL_BATCH_URI = f"{GMAIL_API_ENDPOINT}/batch/gmail/v1"
GMAIL_SCOPES = ["https://www.googleapis.com/auth/gmail.readonly"]
GMAIL_HTTP_TIMEOUT_S = env_int("GMAIL_HTTP_TIMEOUT_S", 30, minimum=1)
GMAIL_BATCH_SIZE = min(env_int("GMAIL_BATCH_SIZE", 20, minimum=1), 20)
GMAIL_NUM_RETRIES = env_int("GMAIL_NUM_RETRIES", 2)

MICROSOFT_CLIENT_ID = env_str("MICROSOFT_CLIENT_ID")
MICROSOFT_CLIENT_SECRET = env_str("MICROSOFT_CLIENT_SECRET")
MICROSOFT_TENANT = env_str("MICROSOFT_TENANT", "common")
MICROSOFT_SIMULATED = not MICROSOFT_CLIENT_ID
# Microsoft identity must be HTTPS (MSAL refuses http), so the sandbox serves it, and Graph, over TLS
# with a certificate it generates at start; we trust exactly that certificate, never "verify=False".
SANDBOX_TLS_URL = env_str("SANDBOX_TLS_URL", "https://127.0.0.1:8766").rstrip("/")
if MICROSOFT_SIMULATED:
    MICROSOFT_CLIENT_ID = "sandbox-microsoft-client"
    MICROSOFT_CLIENT_SECRET = "sandbox-microsoft-secret"
    MICROSOFT_AUTHORITY = f"{SANDBOX_TLS_URL}/{MICROSOFT_TENANT}"
    GRAPH_API_ENDPOINT = f"{SANDBOX_TLS_URL}/v1.0"
    MICROSOFT_CA_BUNDLE = env_str("MICROSOFT_CA_BUNDLE") or SANDBOX_CA_BUNDLE
else:
    MICROSOFT_AUTHORITY = f"https://login.microsoftonline.com/{MICROSOFT_TENANT}"
    GRAPH_API_ENDPOINT = "https://graph.microsoft.com/v1.0"
    MICROSOFT_CA_BUNDLE = env_str("MICROSOFT_CA_BUNDLE")  # empty: the system's trust store
MICROSOFT_SCOPES = ["Mail.Read", "User.Read"]
GRAPH_HTTP_TIMEOUT_S = env_int("GRAPH_HTTP_TIMEOUT_S", 30, minimum=1)
GRAPH_PAGE_SIZE = env_int("GRAPH_PAGE_SIZE", 50, minimum=1)
GRAPH_MAX_RETRIES = env_int("GRAPH_MAX_RETRIES", 2)

GEMINI_API_KEY = env_str("GEMINI_API_KEY")
GEMINI_SIMULATED = not GEMINI_API_KEY
GEMINI_BASE_URL = f"{SANDBOX_URL}/" if GEMINI_SIMULATED else ""
if GEMINI_SIMULATED:
    GEMINI_API_KEY = "sandbox-gemini-key"
GEMINI_CA_BUNDLE = SANDBOX_CA_BUNDLE if GEMINI_SIMULATED and _SANDBOX_TLS else ""  # empty: the system's store
# IMAP mailboxes (integrations/providers/imap.py): TLS always, certificates always checked against the system's
# trust store, or against this PEM file alone (a local server's CA in development and tests; there is no setting
# that turns checking off). How long a server may take to connect or answer one command.
IMAP_CA_BUNDLE = env_str("IMAP_CA_BUNDLE")
IMAP_TIMEOUT_SECONDS = env_int("IMAP_TIMEOUT_SECONDS", 30, minimum=1)
# The connect form names the server: a private address (loopback, the local network) only where the operator
# allows it (a self-hosted Tasklift beside its own mail server, Proton Mail Bridge on the same machine; tests and
# `make run` with their Dovecot). Tries of the form per person per hour.
IMAP_ALLOW_PRIVATE_HOSTS = env_bool("IMAP_ALLOW_PRIVATE_HOSTS", False)
IMAP_CONNECT_TRIES_PER_HOUR = env_int("IMAP_CONNECT_TRIES_PER_HOUR", 20, minimum=1)
# The `imap-idle` process (integrations/imapidle.py): IDLE connections held per process, which share of the
# mailboxes it watches (mailbox id modulo IMAP_IDLE_SHARDS), how often IDLE is renewed (servers end it at 30
# minutes) and how often the list of mailboxes is read again.
IMAP_IDLE_MAX_CONNECTIONS = env_int("IMAP_IDLE_MAX_CONNECTIONS", 500, minimum=1)
IMAP_IDLE_SHARDS = env_int("IMAP_IDLE_SHARDS", 1, minimum=1)
IMAP_IDLE_SHARD = env_int("IMAP_IDLE_SHARD", 0)
IMAP_IDLE_RENEW_SECONDS = env_int("IMAP_IDLE_RENEW_SECONDS", 25 * 60, minimum=1)
IMAP_IDLE_REFRESH_SECONDS = env_int("IMAP_IDLE_REFRESH_SECONDS", 30, minimum=1)
# The forward-to door (integrations/inbound): each person's address is tasks+<token>@INBOUND_DOMAIN (the domain
# whose MX points at the `inbound` process, or at the provider whose inbound service posts to /webhooks/inbound).
INBOUND_DOMAIN = env_str("INBOUND_DOMAIN", "in.tasklift.test").lower()
# The `inbound` process (integrations/inbound/smtp.py): where it listens (port 25 behind the MX; an unprivileged
# port and a redirect, or a capability, in practice), its certificate for STARTTLS (PEM files; none: no STARTTLS),
# and the name it gives itself.
INBOUND_SMTP_HOST = env_str("INBOUND_SMTP_HOST", "0.0.0.0")  # noqa: S104 — it takes mail from the internet
INBOUND_SMTP_PORT = env_int("INBOUND_SMTP_PORT", 2525, minimum=1)
INBOUND_TLS_CERT = env_str("INBOUND_TLS_CERT")
INBOUND_TLS_KEY = env_str("INBOUND_TLS_KEY")
INBOUND_HOSTNAME = env_str("INBOUND_HOSTNAME", INBOUND_DOMAIN)
# The DNS server the sender checks ask (DKIM keys, SPF and DMARC records), "host:port"; empty: the system's.
INBOUND_DNS_SERVER = env_str("INBOUND_DNS_SERVER")
# The webhook's shared secret (HMAC-SHA256 of the timestamp and the body); empty: the webhook is off (404).
INBOUND_WEBHOOK_SECRET = env_str("INBOUND_WEBHOOK_SECRET")
# Limits: a message's size, messages a person may send in an hour and from one address in an hour (sliding
# windows), and messages stored for a person and not yet read (beyond: 452, the sender tries later).
INBOUND_MAX_BYTES = env_int("INBOUND_MAX_BYTES", 10_000_000, minimum=1000)
INBOUND_PER_PERSON_PER_HOUR = env_int("INBOUND_PER_PERSON_PER_HOUR", 200, minimum=1)
INBOUND_PER_SENDER_PER_HOUR = env_int("INBOUND_PER_SENDER_PER_HOUR", 100, minimum=1)
INBOUND_MAX_WAITING = env_int("INBOUND_MAX_WAITING", 1000, minimum=1)
GEMINI_MODEL = env_str("GEMINI_MODEL", "gemini-2.5-flash")
GEMINI_TIMEOUT_S = env_int("GEMINI_TIMEOUT_S", 60, minimum=1)
GEMINI_MAX_ATTEMPTS = env_int("GEMINI_MAX_ATTEMPTS", 4, minimum=1)
# The quota of GEMINI_MODEL shared by every worker (extraction/quota.py): 0 means no limit of that kind.
GEMINI_REQUESTS_PER_MINUTE = env_int("GEMINI_REQUESTS_PER_MINUTE", 1000)
GEMINI_TOKENS_PER_MINUTE = env_int("GEMINI_TOKENS_PER_MINUTE", 1_000_000)
GEMINI_RETRY_INITIAL_DELAY_S = float(env_str("GEMINI_RETRY_INITIAL_DELAY_S", "1.0"))
GEMINI_MAX_RETRY_WAIT_S = env_int("GEMINI_MAX_RETRY_WAIT_S", 60, minimum=0)

# Production and the sandbox ----------------------------------------------------------------------
# A production deployment reads real mailboxes: it refuses to run any service against the sandbox unless
# TASKLIFT_DEMO=true says it is a demo, and it never lets oauthlib accept plain http.
TASKLIFT_DEMO = env_bool("TASKLIFT_DEMO", default=False)
if PRODUCTION:
    _simulated = [
        f"{service} ({variable} is not set)"
        for service, variable, simulated in (
            ("Google sign-in and Gmail", "GOOGLE_CLIENT_ID", GOOGLE_SIMULATED),
            ("Microsoft sign-in and Outlook", "MICROSOFT_CLIENT_ID", MICROSOFT_SIMULATED),
            ("Gemini", "GEMINI_API_KEY", GEMINI_SIMULATED),
        )
        if simulated
    ]
    if _simulated and not TASKLIFT_DEMO:
        raise ImproperlyConfigured(
            f"Production mode would run {', '.join(_simulated)} against the local sandbox. Configure the real "
            "credentials, or set TASKLIFT_DEMO=true if this deployment is a demo on simulated services."
        )
    for _id, _secret in (
        ("GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET"),
        ("MICROSOFT_CLIENT_ID", "MICROSOFT_CLIENT_SECRET"),
    ):
        if env_str(_id) and not env_str(_secret):
            raise ImproperlyConfigured(f"{_id} is set but {_secret} is not: production mode needs both.")
    if os.environ.get("OAUTHLIB_INSECURE_TRANSPORT"):
        raise ImproperlyConfigured(
            "OAUTHLIB_INSECURE_TRANSPORT must not be set in production: OAuth codes and tokens travel over https only."
        )
    if GOOGLE_SIMULATED and not SANDBOX_URL.startswith("https://"):
        raise ImproperlyConfigured(
            "A production demo serves the sandbox over https: set SANDBOX_URL to an https:// address "
            "(OAuth over plain http is refused in production)."
        )

# Auth and i18n ------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where `collectstatic` writes (production serves the files from there, through whitenoise).
STATIC_ROOT = Path(env_str("STATIC_ROOT") or LOCAL_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = not PRODUCTION
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# One JSON object a line (LOG_FORMAT=json, production's default) or plain lines; every handler redacts OAuth
# codes and tokens and adds the ids of the run in progress (config/logconfig.py).
LOG_FORMAT, LOG_LEVEL = log_settings()
LOGGING = logging_config(log_format=LOG_FORMAT, level=LOG_LEVEL)

# The API's docs and OpenAPI document: "public", "staff" (admins only) or "off".
API_DOCS = env_str("API_DOCS", "staff" if PRODUCTION else "public")
if API_DOCS not in ("public", "staff", "off"):
    raise ImproperlyConfigured("API_DOCS must be 'public', 'staff' or 'off'.")

# Metrics (config/metrics.py): Prometheus text at /metrics. With METRICS_TOKEN it wants that bearer token;
# without one it is refused in production and served to loopback only in development. Every process writes
# its counts under PROMETHEUS_MULTIPROC_DIR (prometheus_client reads the variable: it is set here for this
# process and the ones it starts), emptied when the deployment starts (`manage.py metrics_clear`).
METRICS_TOKEN = env_str("METRICS_TOKEN")
PROMETHEUS_MULTIPROC_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR") or LOCAL_DIR / "metrics")
PROMETHEUS_MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)

# Content-Security-Policy (django-csp) --------------------------------------------------------------
# Everything from our own origin; no inline script or style, no eval (htmx runs with allowEval off and its
# indicator style off, templates/base.html; the API docs start Swagger UI from static/js/api-docs.js). The
# one exception is data: images, Swagger UI's icons. form-action stays open: Chrome checks it on every
# redirect of a form's navigation, and the Connect buttons lead through Google's and Microsoft's sign-in
# pages, whose redirects are theirs to change. Violations are reported to /csp-report/ (config/csp.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "report-uri": "/csp-report/",
    }
}
CSP_REPORT_MAX_BYTES = env_int("CSP_REPORT_MAX_BYTES", 16_384, minimum=1024)
CSP_REPORTS_PER_MINUTE = env_int("CSP_REPORTS_PER_MINUTE", 60, minimum=1)

# Login (accounts/throttle.py): a limit per client address; per account, a slowdown for browsers that never
# logged in to it (the first wait, doubled for each failure beyond, up to the cap) and a count of its own for a
# browser holding the account's device cookie (a day's). Sliding windows: the address's in minutes, the account's
# in hours.
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50, minimum=1)
LOGIN_FAILURE_WINDOW_MINUTES = env_int("LOGIN_FAILURE_WINDOW_MINUTES", 15, minimum=1)
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 10, minimum=1)
LOGIN_FAILURES_PER_DEVICE = env_int("LOGIN_FAILURES_PER_DEVICE", 10, minimum=1)
LOGIN_ACCOUNT_WINDOW_HOURS = env_int("LOGIN_ACCOUNT_WINDOW_HOURS", 1, minimum=1)
LOGIN_DELAY_SECONDS = env_int("LOGIN_DELAY_SECONDS", 1, minimum=1)
LOGIN_DELAY_MAX_SECONDS = env_int("LOGIN_DELAY_MAX_SECONDS", 300, minimum=1)
LOGIN_DEVICE_COOKIE_DAYS = env_int("LOGIN_DEVICE_COOKIE_DAYS", 365, minimum=1)

# Email: SMTP when EMAIL_HOST is set (required in production); in development each message is written to a
# file under .local/mail/ instead of being sent (the test run uses Django's in-memory outbox).
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Tasklift <no-reply@tasklift.localhost>")
SERVER_EMAIL = env_str("SERVER_EMAIL") or DEFAULT_FROM_EMAIL
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", default=EMAIL_PORT == 465)  # TLS from the start (port 465)
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=not EMAIL_USE_SSL)  # STARTTLS (port 587)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT_S", 10, minimum=1)
EMAIL_FILE_PATH = LOCAL_DIR / "mail"
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be true.")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
elif PRODUCTION:
    raise ImproperlyConfigured("Production mode needs EMAIL_HOST (and its settings) to send sign-up and reset emails.")
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"

# Sign-up, email confirmation and password reset (accounts/ratelimit.py, accounts/verification.py). Requests from
# one client address are counted per kind (sign-up, new confirmation link, password reset); emails to one
# recipient are counted together, so that nobody can fill someone else's inbox through Tasklift.
ACCOUNT_REQUESTS_PER_ADDRESS = env_int("ACCOUNT_REQUESTS_PER_ADDRESS", 10, minimum=1)
ACCOUNT_EMAILS_PER_RECIPIENT = env_int("ACCOUNT_EMAILS_PER_RECIPIENT", 5, minimum=1)
ACCOUNT_RATE_WINDOW_MINUTES = env_int("ACCOUNT_RATE_WINDOW_MINUTES", 60, minimum=1)
EMAIL_VERIFICATION_MAX_AGE_HOURS = env_int("EMAIL_VERIFICATION_MAX_AGE_HOURS", 48, minimum=1)
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT_MINUTES", 60, minimum=5) * 60  # Django's is 3 days

# Extraction ---------------------------------------------------------------------------------------
EXTRACTION_RUNS_PER_MINUTE = env_int("EXTRACTION_RUNS_PER_MINUTE", 6, minimum=1)
# The "minute" of the per-minute limits (Extract now, push-started runs, CSP reports): sliding windows of this
# many seconds (accounts/counting.py). Tests shorten it; an operator has no reason to.
RATE_WINDOW_SECONDS = env_int("RATE_WINDOW_SECONDS", 60, minimum=1)
EXTRACTION_BATCH_SIZE = min(env_int("EXTRACTION_BATCH_SIZE", 10, minimum=1), 10)
# Gemini calls of one run in flight at once (each a batch of EXTRACTION_BATCH_SIZE emails).
EXTRACTION_LLM_CONCURRENCY = env_int("EXTRACTION_LLM_CONCURRENCY", 4, minimum=1)
# A run reads at most this many emails, for at most this long (well within the job's soft time limit), then
# ends as "continued" with its continuation queued behind other people's runs.
EXTRACTION_RUN_MAX_EMAILS = env_int("EXTRACTION_RUN_MAX_EMAILS", 1000, minimum=10)
EXTRACTION_RUN_SECONDS = env_int(
    "EXTRACTION_RUN_SECONDS", max(1, env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540, minimum=1) * 2 // 3), minimum=1
)
EXTRACTION_MAX_BODY_CHARS = env_int("EXTRACTION_MAX_BODY_CHARS", 4000, minimum=200)
EXTRACTION_MAX_TASKS_PER_EMAIL = env_int("EXTRACTION_MAX_TASKS_PER_EMAIL", 5, minimum=1)
EXTRACTION_MAX_TITLE_CHARS = env_int("EXTRACTION_MAX_TITLE_CHARS", 200, minimum=20)
EXTRACTION_BAD_OUTPUT_ATTEMPTS = env_int("EXTRACTION_BAD_OUTPUT_ATTEMPTS", 2, minimum=1)
EXTRACTION_FETCH_ATTEMPTS = env_int("EXTRACTION_FETCH_ATTEMPTS", 3, minimum=1)
# A run whose runner died this many times with PostgreSQL and Redis up is given up (a delivery ended by their
# outage is not counted: the runner waits up to EXTRACTION_OUTAGE_WRITE_SECONDS for PostgreSQL to say so).
EXTRACTION_MAX_DELIVERIES = env_int("EXTRACTION_MAX_DELIVERIES", 3, minimum=1)
EXTRACTION_OUTAGE_WRITE_SECONDS = env_int("EXTRACTION_OUTAGE_WRITE_SECONDS", 60, minimum=0)
# How old new mail may get, without working push, before it is a task: a mailbox without push is looked at
# again within EXTRACTION_SCHEDULE_MINUTES less EXTRACTION_READ_ALLOWANCE_SECONDS of its last look, the
# allowance being what a reading takes (the check's job, the run, its Gemini calls; about 15 s when measured).
EXTRACTION_SCHEDULE_MINUTES = env_int("EXTRACTION_SCHEDULE_MINUTES", 10, minimum=1)
EXTRACTION_READ_ALLOWANCE_SECONDS = env_int("EXTRACTION_READ_ALLOWANCE_SECONDS", 30, minimum=0)
# Tests only: the crash point at which a run kills its own process (extraction/crashpoints.py).
EXTRACTION_CRASH_POINT = env_str("EXTRACTION_CRASH_POINT")
if PRODUCTION and EXTRACTION_CRASH_POINT:
    raise ImproperlyConfigured("EXTRACTION_CRASH_POINT is for tests; it must not be set in production.")
MAIL_BACKFILL_DAYS = env_int("MAIL_BACKFILL_DAYS", 7, minimum=0)
EXTRACTION_RESYNC_MARGIN_MINUTES = env_int("EXTRACTION_RESYNC_MARGIN_MINUTES", 60, minimum=0)
EXTRACTION_RESYNC_MAX_MESSAGES = env_int("EXTRACTION_RESYNC_MAX_MESSAGES", 5000, minimum=1)
MAIL_BACKFILL_MAX_MESSAGES = env_int("MAIL_BACKFILL_MAX_MESSAGES", 100, minimum=0)
# The first read of a mailbox's Sent mail (after connect, or after consent to reading it): the newest
# MAIL_SENT_BACKFILL_MAX_MESSAGES of the last MAIL_SENT_BACKFILL_DAYS; the rest of that window is counted.
MAIL_SENT_BACKFILL_DAYS = env_int("MAIL_SENT_BACKFILL_DAYS", 14, minimum=0)
MAIL_SENT_BACKFILL_MAX_MESSAGES = env_int("MAIL_SENT_BACKFILL_MAX_MESSAGES", 100, minimum=0)
# The polling safety net: every EXTRACTION_SCAN_SECONDS, beat's scan claims the mailboxes due (without working
# push, every EXTRACTION_SCHEDULE_MINUTES) and sends them to idle checks; one rung but not read since gets a run.
EXTRACTION_SCAN_SECONDS = env_int("EXTRACTION_SCAN_SECONDS", 60, minimum=1)
# A mailbox whose push works (a live channel, heard from within its quiet time, no mail missed) is swept this
# often instead; the sweep is an idle check (one provider call), a run only when there is mail.
EXTRACTION_SWEEP_MINUTES = env_int("EXTRACTION_SWEEP_MINUTES", 60, minimum=1)
CELERY_BEAT_SCHEDULE["extraction-schedule"] = {
    "task": "extraction.jobs.extraction_schedule_job",
    "schedule": EXTRACTION_SCAN_SECONDS,
}
# Retention (extraction/retention.py): run records older than RUN_RETENTION_DAYS are removed (each person's
# latest stays); ledger rows older than LEDGER_COMPACT_DAYS keep only what stops an email being read twice.
# In batches of RETENTION_BATCH rows, each its own short transaction, for at most RETENTION_JOB_SECONDS a job.
RUN_RETENTION_DAYS = env_int("RUN_RETENTION_DAYS", 90, minimum=1)
LEDGER_COMPACT_DAYS = env_int("LEDGER_COMPACT_DAYS", 30, minimum=1)
RETENTION_BATCH = env_int("RETENTION_BATCH", 1000, minimum=1)
RETENTION_JOB_SECONDS = env_int("RETENTION_JOB_SECONDS", 60, minimum=1)
# The longest a batch's transaction may hold its locks; a batch that would take longer is cancelled, rolled
# back and done again in smaller batches.
RETENTION_TRANSACTION_MS = env_int("RETENTION_TRANSACTION_MS", 500, minimum=50)
# Between two batches retention rests this many times as long as the batch took (its share: 1 / (1 + this)).
RETENTION_REST_FACTOR = env_int("RETENTION_REST_FACTOR", 3, minimum=0)
CELERY_BEAT_SCHEDULE["extraction-retention"] = {
    "task": "extraction.jobs.extraction_retention_job",
    "schedule": env_int("RETENTION_EVERY_SECONDS", 600, minimum=1),
}
# Throttled mailboxes wait Retry-After when given, else 30 s doubling up to an hour, with jitter.
PROVIDER_BACKOFF_INITIAL_S = env_int("PROVIDER_BACKOFF_INITIAL_S", 30, minimum=1)
PROVIDER_BACKOFF_MAX_S = env_int("PROVIDER_BACKOFF_MAX_S", 3600, minimum=1)
EXTRACTION_REAPER_SECONDS = env_int("EXTRACTION_REAPER_SECONDS", 30, minimum=1)
EXTRACTION_QUEUED_STALE_SECONDS = env_int("EXTRACTION_QUEUED_STALE_SECONDS", 120, minimum=1)
CELERY_BEAT_SCHEDULE["extraction-reaper"] = {
    "task": "extraction.jobs.extraction_reap_job",
    "schedule": EXTRACTION_REAPER_SECONDS,
}

# Push: a provider rings the doorbell (Gmail through Pub/Sub push, Outlook through Graph change
# notifications), and a run reads the mailbox. PUSH_BASE_URL is where the providers reach this site
# (HTTPS in production). Push-triggered runs have their own limit per person, apart from "Extract now".
PUSH_ENABLED = env_bool("PUSH_ENABLED", True)
PUSH_BASE_URL = env_str("PUSH_BASE_URL", SITE_URL).rstrip("/")
PUSH_RUNS_PER_MINUTE = env_int("PUSH_RUNS_PER_MINUTE", 20, minimum=1)
PUSH_RENEW_HOURS = env_int("PUSH_RENEW_HOURS", 24, minimum=1)  # watches and subscriptions renewed daily
PUSH_MAINTAIN_SECONDS = env_int("PUSH_MAINTAIN_SECONDS", 300, minimum=1)
CELERY_BEAT_SCHEDULE["push-maintain"] = {
    "task": "integrations.jobs.push_channels_maintain_job",
    "schedule": PUSH_MAINTAIN_SECONDS,
}
# Gmail: the Pub/Sub topic Gmail publishes to, and the OIDC token its push subscription sends (audience,
# the push service account, the certificates that sign it).
GMAIL_PUSH_TOPIC = env_str("GMAIL_PUSH_TOPIC", "projects/tasklift-sandbox/topics/gmail" if GOOGLE_SIMULATED else "")
GMAIL_PUSH_AUDIENCE = env_str("GMAIL_PUSH_AUDIENCE", f"{PUSH_BASE_URL}/webhooks/gmail")
GMAIL_PUSH_SERVICE_ACCOUNT = env_str(
    "GMAIL_PUSH_SERVICE_ACCOUNT", "gmail-push@tasklift-sandbox.iam.gserviceaccount.com" if GOOGLE_SIMULATED else ""
)
GOOGLE_CERTS_URL = env_str(
    "GOOGLE_CERTS_URL",
    f"{SANDBOX_URL}/oauth2/v1/certs" if GOOGLE_SIMULATED else "https://www.googleapis.com/oauth2/v1/certs",
)
# A token naming a key the certificates lack makes at most one fetch of them per this many seconds, for
# every web process together (anyone can send one); Google publishes a new key well before signing with it.
GMAIL_PUSH_CERTS_REFRESH_SECONDS = env_int("GMAIL_PUSH_CERTS_REFRESH_SECONDS", 300, minimum=1)
# Pub/Sub's tokens last an hour (exp - iat = 3600): a longer one was not made by Pub/Sub. Five minutes over.
GMAIL_PUSH_TOKEN_MAX_LIFETIME_SECONDS = env_int("GMAIL_PUSH_TOKEN_MAX_LIFETIME_SECONDS", 3900, minimum=60)
# Graph: how long a subscription is asked for. Sources disagree on the longest for Outlook messages
# (10,080 or 4,230 minutes): stay under the shorter one; renewed daily anyway.
GRAPH_SUBSCRIPTION_MINUTES = min(env_int("GRAPH_SUBSCRIPTION_MINUTES", 4200, minimum=1), 4200)

# Reminders (reminders/): the morning digest email, for those who turn it on in Settings, sent once a day per
# person from DIGEST_HOUR of their time zone, for DIGEST_SEND_HOURS (a worker down all morning skips the day
# rather than send a "morning" digest at night); beat looks for whose morning it is every DIGEST_SCAN_SECONDS.
# Its unsubscribe link (no login) works for DIGEST_UNSUBSCRIBE_DAYS.
DIGEST_HOUR = env_int("DIGEST_HOUR", 7, minimum=0)
DIGEST_SEND_HOURS = env_int("DIGEST_SEND_HOURS", 5, minimum=1)
if DIGEST_HOUR + DIGEST_SEND_HOURS > 24:
    raise ImproperlyConfigured("DIGEST_HOUR + DIGEST_SEND_HOURS must end within the day (at most 24).")
DIGEST_SCAN_SECONDS = env_int("DIGEST_SCAN_SECONDS", 300, minimum=1)
# Each scan sends one job per DIGEST_CHUNK due people; a job holds its chunk for DIGEST_CHUNK_LEASE_SECONDS at
# most (then those it did not reach are due again, and one that died is taken by another job).
DIGEST_CHUNK = env_int("DIGEST_CHUNK", 200, minimum=1)
DIGEST_CHUNK_LEASE_SECONDS = env_int("DIGEST_CHUNK_LEASE_SECONDS", 600, minimum=1)
DIGEST_UNSUBSCRIBE_DAYS = env_int("DIGEST_UNSUBSCRIBE_DAYS", 90, minimum=1)
# The calendar feed (reminders/calendar.py): past this many wrong links from one address within the window, its
# fetches are 429 until the oldest leaves (a calendar app fetching its own link is never counted).
CALENDAR_GUESSES_PER_ADDRESS = env_int("CALENDAR_GUESSES_PER_ADDRESS", 20, minimum=1)
CALENDAR_GUESS_WINDOW_MINUTES = env_int("CALENDAR_GUESS_WINDOW_MINUTES", 10, minimum=1)
CELERY_BEAT_SCHEDULE["digest-send"] = {
    "task": "reminders.jobs.digest_send_job",
    "schedule": DIGEST_SCAN_SECONDS,
}
# Reminders at a time (reminders/ring.py): beat looks for due ones every REMINDER_SCAN_SECONDS and sends a job per
# REMINDER_CHUNK of them; a job holds its chunk REMINDER_LEASE_SECONDS at most (ringing for 0.8 of it). A reminder
# more than REMINDER_LATE_MINUTES late (workers down meanwhile) is dropped rather than rung for a time long gone.
REMINDER_SCAN_SECONDS = env_int("REMINDER_SCAN_SECONDS", 20, minimum=1)
REMINDER_CHUNK = env_int("REMINDER_CHUNK", 200, minimum=1)
REMINDER_LEASE_SECONDS = env_int("REMINDER_LEASE_SECONDS", 60, minimum=1)
REMINDER_LATE_MINUTES = env_int("REMINDER_LATE_MINUTES", 120, minimum=1)
CELERY_BEAT_SCHEDULE["reminder-send"] = {
    "task": "reminders.jobs.reminder_send_job",
    "schedule": REMINDER_SCAN_SECONDS,
}
# Web Push of reminders (reminders/push.py): the server's VAPID key (RFC 8292), a P-256 private key as 32 bytes
# in base64url (`vapid --gen` prints one); by default one derived from SECRET_KEY (a new SECRET_KEY then means
# every browser turns notifications on again). Reminders are pushed only to the push services named in
# PUSH_SERVICE_HOSTS (a browser's subscription names where to POST: any other host is refused, so that no one
# makes this server POST into its own network); with the sandbox (not production, or a demo), to it too.
VAPID_PRIVATE_KEY = env_str("VAPID_PRIVATE_KEY") or base64.urlsafe_b64encode(
    hashlib.sha256(f"vapid:{SECRET_KEY}".encode()).digest()
).decode().rstrip("=")
VAPID_SUBJECT = (
    env_str("VAPID_SUBJECT") or f"mailto:{parseaddr(DEFAULT_FROM_EMAIL)[1] or 'no-reply@tasklift.localhost'}"
)
PUSH_SERVICE_HOSTS = env_list("PUSH_SERVICE_HOSTS") or [
    "fcm.googleapis.com",  # Chrome, Edge, Opera
    "updates.push.services.mozilla.com",  # Firefox
    "web.push.apple.com",  # Safari
    ".notify.windows.com",  # Edge on Windows (a leading dot: that domain's hosts)
]
if not PRODUCTION or TASKLIFT_DEMO:
    PUSH_SERVICE_HOSTS = [*PUSH_SERVICE_HOSTS, urlsplit(SANDBOX_URL).hostname or "127.0.0.1"]
PUSH_TIMEOUT_S = env_int("PUSH_TIMEOUT_S", 10, minimum=1)
