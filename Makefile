# The two set-up commands: `make run` (the product) and `make test` (the whole suite).
# Both create the virtual environment and install everything on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test install browser lint bench clean-var

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the real-browser tests (Playwright drives it; nothing is downloaded).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will be skipped"; \
	  else echo "warning: chromium is not installed (apt-get install chromium); browser tests will be skipped"; fi; }

run: install
	$(BIN)/python -m config.launch

test: install browser
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: install
	$(BIN)/python bench/cycle.py
	$(BIN)/python bench/sim.py
	$(BIN)/python bench/planner.py

# Stop the embedded PostgreSQL and Redis (they keep running between commands for speed).
clean-var: install
	$(BIN)/python -c "from config import embedded; embedded.stop_all()"
