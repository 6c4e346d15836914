# The two commands a newcomer runs: `make run` (web, worker, beat with demo data) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test check lint install stop-db

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

run: $(BIN)/.installed
	scripts/ensure-redis
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@# Exports the embedding model to ONNX the first time (about 15 s), so no process waits for it.
	$(BIN)/python manage.py prepare_models
	$(BIN)/python manage.py seed_demo --once
	@# Ctrl-C stops every process; honcho then exits 130, which is how a run ends, not an error.
	$(BIN)/honcho start -f Procfile || test $$? -eq 130

test: $(BIN)/.installed
	scripts/ensure-redis
	scripts/ensure-chromium
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python manage.py prepare_models
	$(BIN)/pytest

# The fast loop while working: lint, types and the tests that start no process and no browser
# (tests/conftest.py marks `slow` and `browser` by what a test uses). `make test` stays the whole suite.
check: $(BIN)/.installed
	scripts/ensure-redis
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -m "not slow and not browser"

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The embedded PostgreSQL ($(VAR_DIR)/pgdata) outlives `make run` so that every process shares it.
# VAR_DIR as the settings read it: the environment, else the last VAR_DIR= line of .env, else var.
DOTENV_VAR_DIR := $(shell sed -n -E "s/^(export )?VAR_DIR=['\"]?([^'\"]*)['\"]?$$/\2/p" .env 2>/dev/null | tail -n 1)
VAR_DIR := $(or $(VAR_DIR),$(DOTENV_VAR_DIR),var)
PGDATA := $(VAR_DIR)/pgdata

stop-db:
	test ! -f "$(PGDATA)/postmaster.pid" || $(BIN)/python -c "import sys; from agentplatform.plumbing.embedded_postgres import embedded_server; embedded_server(sys.argv[1]).stop()" "$(PGDATA)"
