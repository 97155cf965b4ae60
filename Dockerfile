# Tasklift's image: one image for every process of the Procfile (compose.yaml picks the command). Not built in this
# repository's tests (no image registry is reachable there); tests/test_deploy_files.py holds its commands to the
# Procfile. docs/deploy.md, "Docker and compose".
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    PATH=/app/.venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=config.settings \
    TASKLIFT_LOCAL_DIR=/var/lib/tasklift \
    STATIC_ROOT=/app/staticfiles

RUN python -m pip install --no-cache-dir uv \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home --shell /usr/sbin/nologin tasklift \
    && install -d -o tasklift -g tasklift /var/lib/tasklift /var/lib/tasklift/metrics

WORKDIR /app

# The locked dependencies first, without the dev group (tests, linters): gunicorn and celery are main dependencies.
COPY pyproject.toml uv.lock ./
RUN python -m uv sync --frozen --no-dev --no-install-project --no-cache

COPY . .

# Static files are collected at build time, into the image. Production mode refuses to start without its settings,
# none of which collectstatic uses: these are placeholders of this one command, never the running container's
# (and a scratch TASKLIFT_LOCAL_DIR, so that nothing is left owned by root in the one the processes write to). The
# key is the base64 of "tasklift-build-time-placeholder!": every key is checked at start (production refuses one of
# zeros), and this one encrypts nothing.
RUN TASKLIFT_MODE=production \
    TASKLIFT_DEMO=true \
    SECRET_KEY=build-time-placeholder-never-used-at-run-time-0000000000 \
    TASKLIFT_ENCRYPTION_KEYS=dGFza2xpZnQtYnVpbGQtdGltZS1wbGFjZWhvbGRlciE= \
    SITE_URL=https://build.invalid \
    EMAIL_HOST=build.invalid \
    SANDBOX_URL=https://sandbox.invalid \
    DATABASE_URL=postgres://build@build.invalid:5432/build \
    REDIS_URL=redis://build.invalid:6379/0 \
    TASKLIFT_LOCAL_DIR=/tmp/tasklift-build \
    python manage.py collectstatic --noinput \
    && rm -rf /tmp/tasklift-build

USER tasklift
ENV PORT=8000
EXPOSE 8000

# The Procfile's web line; compose.yaml gives the worker, beat and migrate services their own (and their checks).
HEALTHCHECK --interval=30s --timeout=15s --start-period=60s --retries=3 CMD ["python", "-m", "config.healthcheck", "web"]
CMD ["gunicorn", "config.wsgi", "--config", "gunicorn.conf.py"]
