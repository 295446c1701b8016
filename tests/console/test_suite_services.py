"""The suite chooses PostgreSQL and Redis itself (tests/services.py), says which, and under
CI refuses to run on the fallbacks."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings
from django.db import connection

from tests import services


def test_the_local_defaults_are_chosen_when_they_answer():
    asked = []
    environ = {}
    problems = services.choose_services(environ, lambda host, port: asked.append(port) or True)
    assert problems == []
    assert environ == {
        "DATABASE_URL": services.DEFAULT_DATABASE_URL,
        "REDIS_URL": services.DEFAULT_REDIS_URL,
    }
    assert asked == [5432, 6379]


def test_a_service_that_does_not_answer_is_left_to_the_fallback_and_named():
    environ = {}
    problems = services.choose_services(environ, lambda host, port: port == 6379)
    assert environ == {"REDIS_URL": services.DEFAULT_REDIS_URL}
    assert problems == ["PostgreSQL on 127.0.0.1:5432 does not answer"]


def test_a_url_given_in_the_environment_is_kept_and_not_probed():
    asked = []
    environ = {"DATABASE_URL": "postgres://me@127.0.0.1:5433/mine"}
    services.choose_services(environ, lambda host, port: asked.append(port) or True)
    assert environ["DATABASE_URL"] == "postgres://me@127.0.0.1:5433/mine"
    assert asked == [6379]


def test_the_header_names_the_services_this_run_uses(pytestconfig, db):
    banner = "\n".join(pytestconfig.stash[services.BANNER])
    database = connection.settings_dict  # the test database this run set up and uses
    if connection.vendor == "sqlite":
        assert f"database: SQLite {database['NAME']}" in banner
    else:
        where = f"{database['HOST']}:{database['PORT']}"
        assert f"database: PostgreSQL at {where}, test database {database['NAME']}" in banner
    if settings.CELERY_BROKER_URL.startswith("redis"):
        assert f"broker:   {settings.CELERY_BROKER_URL}" in banner
    else:
        assert "broker:   filesystem broker in" in banner


def test_a_password_is_not_printed():
    url = "redis://:s3cret@127.0.0.1:6379/3"
    assert services._without_password(url) == "redis://:***@127.0.0.1:6379/3"


def _collect_only(tmp_path, **env_changes) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(env_changes)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
         "tests/console/test_suite_services.py"],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_under_ci_a_run_on_sqlite_stops_before_any_test(tmp_path):
    database = f"sqlite:///{tmp_path / 'fallback.sqlite3'}"
    done = _collect_only(tmp_path, CI="true", DATABASE_URL=database)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "CI=true needs the real services" in done.stderr
    assert "SQLite instead of PostgreSQL" in done.stderr


def test_outside_ci_the_same_run_goes_on_and_says_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'fallback.sqlite3'}"
    done = _collect_only(tmp_path, CI="false", DATABASE_URL=database)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # The suite's SQLite test database is a file the Celery worker process can open too.
    assert f"database: SQLite {settings.VAR_DIR / 'test-hangdesk.sqlite3'}" in done.stdout
