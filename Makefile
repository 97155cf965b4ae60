# Tasklift. `make run` serves the app with all its processes; `make test` runs every check.
# Both set themselves up on a fresh machine: uv (through pip if missing), the locked dependencies,
# and the embedded PostgreSQL and Redis (started on first use, data under .local/).

PYTHON ?= python3
UV := $(PYTHON) -m uv
export UV_PYTHON_DOWNLOADS := never

.PHONY: run test check setup browser imap lint typecheck pytest bench screenshot stop clean

setup:
	@$(UV) --version >/dev/null 2>&1 || { echo "Installing uv (the package manager), once…"; $(PYTHON) -m pip install --quiet uv; }
	@[ -d .venv ] || echo "Installing Tasklift's dependencies into .venv, once (a minute or two)…"
	@$(UV) sync --frozen --quiet

# Debian's Chromium for the browser tests (Playwright cannot download its own browser here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing and cannot be installed here: browser tests will be skipped"; fi; }

# Debian's Dovecot for the IMAP tests, benchmark and demo mailbox (sandbox/dovecot.py starts its own instances).
imap:
	@[ -x /usr/sbin/dovecot ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's dovecot-imapd for the IMAP tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dovecot-imapd >/dev/null; \
	  else echo "dovecot-imapd is missing and cannot be installed here: IMAP tests will be skipped"; fi; }

run: setup imap
	@$(UV) run python -m config.run

lint: setup
	$(UV) run ruff check .
	$(UV) run ruff format --check .

typecheck: setup
	$(UV) run mypy .

# pytest-xdist: TEST_WORKERS processes, each with its own test database, sandbox, Celery queue and cache keys
# (config/settings_test.py). The slowest tests and each folder's time are printed last; every test's time is in
# .local/test-results.xml (JUnit).
TEST_WORKERS ?= 4
PYTEST := $(UV) run pytest -n $(TEST_WORKERS) --junitxml=.local/test-results.xml

pytest: setup browser imap
	$(PYTEST)

# mypy runs beside pytest (its half minute on one core, while pytest starts its workers): its lines come when it
# ends, among pytest's first dots, and either failing fails the command.
test: lint setup browser imap
	@$(UV) run mypy . & types=$$!; \
	$(PYTEST); tests=$$?; \
	wait $$types; typed=$$?; \
	[ $$typed = 0 ] || echo "mypy failed (its lines are above)"; \
	[ $$tests = 0 ] && [ $$typed = 0 ]

# The inner loop: lint, types and every test not marked slow (no browser, no process, no benchmark).
check: lint typecheck imap
	$(PYTEST) -m "not slow"

bench: setup
	$(UV) run python benchmarks/extract_gmail.py

# docs/screenshot.png afresh: the demo's task list at 1280x800, from a Tasklift of its own that it stops after.
screenshot: setup browser
	$(UV) run python -m config.screenshot

# Stop the embedded PostgreSQL and Redis (they outlive the commands that started them), and anything a
# `make run` that was killed outright left behind.
stop: setup
	@$(UV) run python -m config.embedded stop

# Stop everything, then delete .local (TASKLIFT_LOCAL_DIR); never under a server that still runs.
clean: setup
	@$(UV) run python -m config.embedded clean
