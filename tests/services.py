"""Which PostgreSQL and Redis the suite runs on, chosen before Django's settings are loaded.

tests/conftest.py calls `configure(config)` from its `pytest_configure` hook. The pytest
settings in pyproject.toml name no DJANGO_SETTINGS_MODULE on purpose: pytest-django then loads
the settings only after that hook (its own `pytest_configure` runs last), so the settings read
the environment chosen here. The settings themselves open no socket and change no variable.

Without DATABASE_URL / REDIS_URL the defaults on 127.0.0.1 are tried; a service that does not
answer leaves the settings' fallback (SQLite, the filesystem broker), said at the top of the run.
With CI=true the run stops instead: CI must prove the suite on the real services.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, MutableMapping
from urllib.parse import urlsplit, urlunsplit

import pytest

SETTINGS_MODULE = "console.settings.test"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hangdesk"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
BANNER = pytest.StashKey[list[str]]()


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def choose_services(
    environ: MutableMapping[str, str], answers: Callable[[str, int], bool] = answers
) -> list[str]:
    """Point DATABASE_URL / REDIS_URL in `environ` at the local defaults that answer (a value
    already set is kept as it is); return what did not answer."""
    problems = []
    for name, default, service in (
        ("DATABASE_URL", DEFAULT_DATABASE_URL, "PostgreSQL"),
        ("REDIS_URL", DEFAULT_REDIS_URL, "Redis"),
    ):
        if name in environ:
            continue
        where = urlsplit(default)
        if answers(where.hostname, where.port):
            environ[name] = default
        else:
            problems.append(f"{service} on {where.hostname}:{where.port} does not answer")
    return problems


def is_ci(environ: MutableMapping[str, str]) -> bool:
    return environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def describe(settings) -> tuple[list[str], list[str]]:
    """What the loaded settings use: the header lines, and the fallbacks among them."""
    database = settings.DATABASES["default"]
    fallbacks = []
    if database["ENGINE"].endswith("sqlite3"):
        test_name = database.get("TEST", {}).get("NAME") or database["NAME"]
        lines = [f"database: SQLite {test_name}"]
        fallbacks.append("SQLite instead of PostgreSQL")
    else:
        host, port = database.get("HOST") or "localhost", database.get("PORT") or 5432
        lines = [f"database: PostgreSQL at {host}:{port}, test database test_{database['NAME']}"]
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        lines.append(f"broker:   filesystem broker in {settings.BROKER_DIR}")
        fallbacks.append("the filesystem broker instead of Redis")
    else:
        lines.append(f"broker:   {_without_password(settings.CELERY_BROKER_URL)}")
    return lines, fallbacks


def configure(config: pytest.Config) -> None:
    """Choose the services, load the settings, and keep the banner for the report header."""
    if not config.pluginmanager.has_plugin("django"):
        return  # `-p no:django`: the pure suites need no service
    from django.conf import settings

    warnings = []
    if settings.configured:
        warnings.append(
            "DJANGO_SETTINGS_MODULE was set before pytest started, so the settings loaded "
            "before the suite could choose its services: they come from the environment as is"
        )
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
        warnings += choose_services(os.environ)
        settings.DATABASES  # noqa: B018 - load the settings now, on the environment chosen above
    lines, fallbacks = describe(settings)
    if fallbacks and is_ci(os.environ):
        raise pytest.UsageError(
            "CI=true needs the real services, but the suite would run on "
            + " and ".join(fallbacks)
            + (": " + "; ".join(warnings) if warnings else "")
        )
    config.stash[BANNER] = [
        f"settings: {os.environ.get('DJANGO_SETTINGS_MODULE')}",
        *lines,
        *(f"WARNING: {warning}" for warning in warnings),
    ]


def report_header(config: pytest.Config) -> list[str]:
    banner = config.stash.get(BANNER, [])
    if not banner:
        return []
    return ["=" * 20 + " services under test " + "=" * 20, *banner]
