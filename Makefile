# The README's verbs. `make run` and `make test` are the whole quick start.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format lab lab-down lab-status migrate clean system-packages-run \
	system-packages-test

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "hangdesk needs Python 3.11+ ($(PYTHON) is $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python requirements.txt requirements-dev.txt requirements-lab.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt -r requirements-lab.txt
	@touch $(STAMP)

## Debian packages (sshd, chromium, ps, unshare, ...): installed when missing as root, asked
## for otherwise (scripts/system-packages). Listed first: python3-venv comes before .venv.
system-packages-run:
	@PYTHON=$(PYTHON) scripts/system-packages run

system-packages-test:
	@PYTHON=$(PYTHON) scripts/system-packages test

## Run the console: web + Celery worker + beat (SQLite and a file broker unless
## DATABASE_URL / REDIS_URL are set). Ctrl-C stops everything. The dev settings are named
## here: manage.py, WSGI and Celery default to the production ones (console/settings/prod.py).
run: system-packages-run $(STAMP)
	DJANGO_SETTINGS_MODULE=console.settings.dev $(BIN)/python manage.py runconsole

## The whole suite: lint, format check, tests on real Postgres/Redis/Celery/sshd/chromium.
## PostgreSQL and Redis when they answer (the header of the run says which; CI=true requires
## them), else SQLite and the file broker.
test: system-packages-test $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

migrate: $(STAMP)
	DJANGO_SETTINGS_MODULE=$${DJANGO_SETTINGS_MODULE:-console.settings.dev} $(BIN)/python manage.py migrate

## A lab on this machine (root): `make lab LAB_ARGS="--nodes 4 --scenario oom"`; see docs/lab.md.
LAB_ARGS ?= --nodes 2 --ranks-per-node 2 --scenario rank-exit
lab: $(STAMP)
	$(BIN)/python -m lab up $(LAB_ARGS)

lab-down: $(STAMP)
	$(BIN)/python -m lab down

lab-status: $(STAMP)
	$(BIN)/python -m lab status

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
