"""What the benchmarks that drive the console share: an empty console database, made if it is
missing (PostgreSQL), migrated and flushed, on the settings the benchmark chose."""

from __future__ import annotations


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
