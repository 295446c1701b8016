"""One shared world for every test: alice (admin), bob (responder), carol (viewer), a cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest
from django.conf import settings

from tests import services
from tests.browserkit import browser, log_in, page  # noqa: F401 - chromium for every suite
from tests.clikit import hangdesk_installed  # noqa: F401 - the README's `pip install .`
from tests.helpers import wait_for  # also re-exported for the suites
from tests.labkit import (  # noqa: F401 - registers the lab fixtures everywhere
    Lab,
    hung_rank_exit_lab,
    lab_factory,
)

# Django models are imported inside the fixtures: the pure suites (analysis, lab) also
# run with `-p no:django`, where importing a model here would fail.

# A well-formed ed25519 public key blob (random bytes: no private half exists anywhere).
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvMWB+brretqGfLz6OJdOfzHeoYv4p+Xobv7TaQ26J1"


def pytest_configure(config) -> None:
    # Before pytest-django loads the settings: choose PostgreSQL/Redis (tests/services.py).
    services.configure(config)


def pytest_report_header(config) -> list[str]:
    return services.report_header(config)


def _user(django_user_model, username: str, role: str | None):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username, password=f"{username}-password")
    if role:
        # get_or_create: transactional tests truncate the groups the migration made.
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def alice(django_user_model):
    """An admin: manages clusters and nodes."""
    return _user(django_user_model, "alice", "admin")


@pytest.fixture
def bob(django_user_model):
    """A responder: opens and works incidents."""
    return _user(django_user_model, "bob", "responder")


@pytest.fixture
def carol(django_user_model):
    """A viewer: reads only."""
    return _user(django_user_model, "carol", None)


@pytest.fixture
def cluster(db):
    from clusters.services import cluster_create, node_create

    cluster = cluster_create(
        name="gpt-train",
        description="70B pre-training, 4 nodes x 8 GPUs",
        expected_world_size=32,
        log_globs=["/var/log/train/*.log"],
    )
    for index in range(2):
        node_create(
            cluster=cluster,
            name=f"gpu-{index}",
            address=f"127.0.9.{index + 1}",
            port=22,
            username="root",
            key_path="/etc/hangdesk/id_ed25519",
            host_key=HOST_KEY,
        )
    return cluster


@pytest.fixture
def as_user(client):
    """Log the test client in as a given user and return the client."""

    def login(user):
        client.force_login(user)
        return client

    return login


def _database_url_of(database: dict) -> str:
    if database["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{database['NAME']}"
    user = database.get("USER") or "postgres"
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    host, port = database.get("HOST") or "127.0.0.1", database.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{database['NAME']}"


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """The real `celery worker`s of settings.HANGDESK_WORKERS, as `make run` starts them
    (prefork, two children each here), on the test database and broker, once all are ready.
    Yields the one that visits nodes ("ssh", with `.log_path`); all of them in `.workers`."""
    workers = start_workers(tmp_path_factory.mktemp("worker"), concurrency=2)
    ssh = workers["ssh"]
    ssh.workers = workers
    yield ssh
    stop_workers(workers)


def start_workers(folder, *, concurrency: int) -> dict[str, subprocess.Popen]:
    """Every worker of settings.HANGDESK_WORKERS, each logging to <folder>/<name>.log."""
    from django.db import connection

    from console.celery import worker_command

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings.test",
        "DATABASE_URL": _database_url_of(connection.settings_dict),
    }
    workers = {}
    for name in settings.HANGDESK_WORKERS:
        log_path = folder / f"{name}.log"
        hostname = f"test-worker-{os.getpid()}-{name}@%h"
        with open(log_path, "wb") as log:
            workers[name] = subprocess.Popen(
                worker_command(name, hostname=hostname, concurrency=concurrency),
                cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        workers[name].log_path = log_path
    _purge_test_queues()
    for name, worker in workers.items():
        wait_for(
            lambda w=worker: " ready." in w.log_path.read_text(),
            timeout=90,
            what=f"the {name} worker to start",
        )
    return workers


def stop_workers(workers: dict[str, subprocess.Popen]) -> None:
    for worker in workers.values():
        worker.terminate()
    for worker in workers.values():
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def _purge_test_queues() -> None:
    # Leftovers from an earlier, interrupted run must not be executed against this database.
    from console.celery import app

    with app.connection_for_write() as conn:
        for queue in {q for w in settings.HANGDESK_WORKERS.values() for q in w["queues"]}:
            with contextlib.suppress(Exception):
                conn.default_channel.queue_purge(queue)
