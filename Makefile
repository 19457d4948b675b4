# The two set-up commands: `make run` (the product) and `make test` (the whole suite).
# Both create the virtual environment and install everything on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run serve test install native browser systemd slurm prometheus lint bench clean-var lock mutants

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The engine compiled with mypyc (scheduler/core/native.py): rebuilt when its sources change;
# without a C compiler the interpreted engine runs, with the same decisions, and the build
# is not tried again until a source changes or `make native` asks for it.
NATIVE := build/native/.attempted
$(NATIVE): $(STAMP) $(wildcard scheduler/core/engine/*.py) scheduler/core/sim/replay.py scheduler/core/sim/usage.py scheduler/core/native.py tools/build_native.py
	@$(BIN)/python tools/build_native.py || echo "warning: the compiled engine could not be built (needs a C compiler and the Python headers); the interpreted engine runs, with the same decisions (make native tries again)"
	@mkdir -p $(dir $(NATIVE)) && touch $(NATIVE)

native: $(STAMP)
	rm -f $(NATIVE)
	$(MAKE) $(NATIVE)

install: $(STAMP) $(NATIVE)

# Debian's chromium for the real-browser tests (Playwright drives it; nothing is downloaded).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will be skipped"; \
	  else echo "warning: chromium is not installed (apt-get install chromium); browser tests will be skipped"; fi; }

# Debian's systemd, for `systemd-analyze verify` of the units in deploy/systemd (a test).
systemd:
	@command -v systemd-analyze >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null) || echo "warning: could not install systemd; the unit check will be skipped"; \
	  else echo "warning: systemd-analyze is missing (apt-get install systemd); the unit check will be skipped"; fi; }

# Debian's Prometheus, for the tests that scrape the simulated cluster's GPU metrics and
# read utilization back over its HTTP API (tests/e2e/test_utilization_prometheus.py).
prometheus:
	@command -v prometheus >/dev/null 2>&1 || test -x /usr/bin/prometheus || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) || echo "warning: could not install prometheus; its tests will be skipped"; \
	  else echo "warning: prometheus is not installed (apt-get install prometheus); its tests will be skipped"; fi; }

# Debian's Slurm 22.05 (munge, slurmctld, slurmd, clients) for the Slurm adapter's tests,
# which start and stop their own cluster (scheduler/adapters/slurm_local.py).
slurm: install
	@$(BIN)/python -m scheduler.adapters.slurm_local install

# The static files with gzip and Brotli copies, which WhiteNoise serves under make run
# (config/settings/dev.py; Plotly 4.8 MB -> 1.1 MB); a file is compressed again only when
# it changed (config/storage.py). Plotly's package data besides its bundle is left out.
STATIC := staticfiles/.collected
$(STATIC): $(STAMP) $(shell find static -type f 2>/dev/null)
	DJANGO_SETTINGS_MODULE=config.settings.dev $(BIN)/python manage.py collectstatic --noinput -v0 \
	  -i widgetbundle.js -i datasets -i templates
	@touch $(STATIC)

run: install $(STATIC)
	$(BIN)/python -m config.launch

# Trying the production settings locally: the web unit's command (deploy/allot-run) on this
# checkout. Production itself runs the systemd units or the image (docs/operations.md), not
# make. Needs SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL and REDIS_URL.
serve: install
	env ALLOT_VENV=$(CURDIR)/$(VENV) ALLOT_VAR_DIR=$${ALLOT_VAR_DIR:-var} deploy/allot-run migrate
	env ALLOT_VENV=$(CURDIR)/$(VENV) ALLOT_VAR_DIR=$${ALLOT_VAR_DIR:-var} deploy/allot-run manage collectstatic --noinput -v0
	exec env ALLOT_VENV=$(CURDIR)/$(VENV) ALLOT_VAR_DIR=$${ALLOT_VAR_DIR:-var} deploy/allot-run web

# The hashed lock of the runtime dependencies the image installs (deploy/requirements.lock),
# resolved for Debian 12's Python 3.11 (the image's).
lock:
	rm -rf build/lockenv && /usr/bin/python3 -m venv build/lockenv
	build/lockenv/bin/python tools/lock_requirements.py

# In parallel (pytest-xdist): three workers per core, at most 8, unless TEST_WORKERS says
# otherwise. Many of the long tests wait (on servers, browsers, Celery workers, cycles,
# the database), so more workers than cores fill that time: on the 2-core machine the
# whole suite took 457 s with 4 workers, 396 s with 6 and 482 s with 8 (2026-12-08, the
# same clone, nothing else running; docs/testing.md). Each worker has its own test
# database and Redis database (tests/conftest.py; REDIS_URL's database number plus the
# workers stays below 16);
# the modules of one xdist group run on one worker (--dist loadgroup; the groups, such as
# the two of the Slurm tests, are XDIST_GROUPS in tests/conftest.py).
# Bytecode is written even where the environment says PYTHONDONTWRITEBYTECODE (this
# machine's does): otherwise every process the suite starts (the workers, servers, Celery
# workers, CLI runs) compiles the project's modules again, and pytest rewrites the test
# modules and its plugins' packages again (1.7 of 5.0 CPU-seconds per pytest process).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( 3 * n < 8 ? 3 * n : 8 )))
test: install browser systemd slurm prometheus
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# Mutation testing of the pure rules (tools/mutants.py; docs/testing.md, "How the suite was
# checked"): each module's own tests against mutmut's mutants of it, on the interpreted
# engine, in copies under build/mutants/. Not part of `make test` (minutes per module).
# MUTANTS names modules (default: all targets); MUTANTS_MINUTES caps each (default 15).
MUTANTS ?=
MUTANTS_MINUTES ?= 15
mutants: install
	$(BIN)/python tools/mutants.py --minutes $(MUTANTS_MINUTES) $(MUTANTS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/cycle.py
	$(BIN)/python bench/sim.py
	$(BIN)/python bench/planner.py
	$(BIN)/python bench/simcluster.py
	$(BIN)/python bench/live_cycle.py
	$(BIN)/python bench/e2e.py

# Stop the embedded PostgreSQL and Redis (they keep running between commands for speed).
clean-var: install
	$(BIN)/python -c "from config import embedded; embedded.stop_all()"
