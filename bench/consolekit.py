"""What the benchmarks that drive the console share: the settings they run it on, and an empty
console database, made if it is missing (PostgreSQL), migrated and flushed."""

from __future__ import annotations

import os
import tempfile

BENCH_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hangdesk_bench"
BENCH_REDIS_URL = "redis://127.0.0.1:6379/14"


def console_settings(*, bench_database: bool = False, test_client: bool = False) -> None:
    """The console's settings for a benchmark, where the environment names none: dev's, with
    a var dir of its own; with `bench_database` the benchmarks' own PostgreSQL database and
    Redis number; with `test_client` Django's test client's host allowed. Before django.setup."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.dev")
    if bench_database:
        os.environ.setdefault("DATABASE_URL", BENCH_DATABASE_URL)
        os.environ.setdefault("REDIS_URL", BENCH_REDIS_URL)
    os.environ.setdefault("HANGDESK_VAR_DIR", tempfile.mkdtemp(prefix="hangdesk-bench-"))
    if test_client:
        os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"


def console_database(*, flush: bool = True) -> None:
    """django.setup(), then the database made, migrated and emptied (unless not `flush`)."""
    import django

    django.setup()
    from django.core.management import call_command

    _ensure_database()
    call_command("migrate", verbosity=0)
    if flush:
        call_command("flush", interactive=False, verbosity=0)


def _ensure_database() -> None:
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    import psycopg

    name = settings.DATABASES["default"]["NAME"]
    params = {k: v for k, v in connection.get_connection_params().items() if k != "dbname"}
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
