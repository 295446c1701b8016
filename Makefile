# The README's verbs. `make run` and `make test` are the whole quick start.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-setup lint format lab lab-down lab-status migrate clean system-packages-run \
	system-packages-test venv-module ray-venv

$(BIN)/python: | venv-module
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

system-packages-test: | venv-module
	@PYTHON=$(PYTHON) scripts/system-packages test

## The venv module .venv and .venv-ray are made with (Debian: python3-venv). When it is
## missing, every package of `test` is installed first, before anything runs beside it.
venv-module:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || PYTHON=$(PYTHON) scripts/system-packages test

## The Ray lab's own virtualenv (lab/rayenv.py): built once, again when requirements-ray.txt
## changes; a no-op when current.
ray-venv: | venv-module
	@$(PYTHON) -m lab.rayenv

## What the suite needs, three jobs at once: apt, the .venv install and the Ray venv wait on
## the network and the disk, not on each other (run one after another they add up).
test-setup:
	@$(MAKE) --no-print-directory -j3 system-packages-test $(STAMP) ray-venv

## Run the console: web + Celery worker + beat (SQLite and a file broker unless
## DATABASE_URL / REDIS_URL are set). Ctrl-C stops everything. The dev settings are named
## here: manage.py, WSGI and Celery default to the production ones (console/settings/prod.py).
run: system-packages-run $(STAMP)
	DJANGO_SETTINGS_MODULE=console.settings.dev $(BIN)/python manage.py runconsole

## The whole suite: lint, format check, tests on real Postgres/Redis/Celery/sshd/chromium.
## PostgreSQL and Redis when they answer (the header of the run says which; CI=true requires
## them), else SQLite and the file broker.
## Without PYTEST_ARGS, scripts/run-suite runs the tests that need no service beside the rest.
test: test-setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(if $(PYTEST_ARGS),$(BIN)/python -m pytest $(PYTEST_ARGS),scripts/run-suite $(BIN)/python)

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
