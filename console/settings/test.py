"""`make test`: real PostgreSQL and Redis when they answer, loudly said either way.

Without DATABASE_URL / REDIS_URL the defaults on 127.0.0.1 are tried. With CI=true a missing
service is an error, not a fallback: CI must prove the suite against the real services.
"""

import os
import socket

from django.core.exceptions import ImproperlyConfigured

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hangdesk"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _choose_services() -> list[str]:
    """Point DATABASE_URL / REDIS_URL at reachable services; return the banner lines."""
    problems, chosen = [], []
    if "DATABASE_URL" not in os.environ:
        if _answers("127.0.0.1", 5432):
            os.environ["DATABASE_URL"] = DEFAULT_DATABASE_URL
        else:
            problems.append("PostgreSQL on 127.0.0.1:5432 does not answer")
    if "REDIS_URL" not in os.environ:
        if _answers("127.0.0.1", 6379):
            os.environ["REDIS_URL"] = DEFAULT_REDIS_URL
        else:
            problems.append("Redis on 127.0.0.1:6379 does not answer")
    # Read CI by hand: importing .base before DATABASE_URL is chosen would freeze its defaults.
    if problems and os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise ImproperlyConfigured("CI=true needs the real services: " + "; ".join(problems))
    chosen.append(f"database: {os.environ.get('DATABASE_URL') or 'SQLite (fallback)'}")
    chosen.append(f"broker:   {os.environ.get('REDIS_URL') or 'filesystem (fallback)'}")
    return chosen + [f"WARNING: {p}" for p in problems]


SERVICES_BANNER = _choose_services()

from .base import *  # noqa: E402, F403

SECRET_KEY = "test-only-not-secret"  # noqa: S105
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; test users only
TEMPLATES[0]["OPTIONS"]["string_if_invalid"] = "INVALID_TEMPLATE_VARIABLE(%s)"  # noqa: F405

# The Celery worker under test runs in another process, so the test database must be a
# file it can open too when the SQLite fallback is in use.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-hangdesk.sqlite3")}  # noqa: F405
