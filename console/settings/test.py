"""`make test`: the suite's settings. They read DATABASE_URL / REDIS_URL like every other
environment; which PostgreSQL and Redis the suite uses is chosen before these settings load,
by tests/services.py (called from tests/conftest.py), which also says so at the top of the run.
"""

from .base import *  # noqa: F403

SECRET_KEY = "test-only-not-secret"  # noqa: S105
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; test users only
TEMPLATES[0]["OPTIONS"]["string_if_invalid"] = "INVALID_TEMPLATE_VARIABLE(%s)"  # noqa: F405

# The Celery worker under test runs in another process, so the test database must be a
# file it can open too when the SQLite fallback is in use.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-hangdesk.sqlite3")}  # noqa: F405

# Every receiver, proxy and node of the suite listens on loopback; the tests of the default
# policy set EGRESS_ALLOW back to nothing (tests/security/test_egress.py).
EGRESS_ALLOW = [*EGRESS_ALLOW, "127.0.0.0/8"]  # noqa: F405

# The watch in seconds, not minutes: the worker and beat the watch's lab tests start read these
# (tests/watch/test_watch_lab.py).
WATCH_PERIOD_S = 2.0
WATCH_SECOND_SNAPSHOT_AFTER_S = 3.0
WATCH_WEBHOOK_BACKOFF_S = 1
CELERY_BEAT_SCHEDULE["watch-dispatch"]["schedule"] = WATCH_PERIOD_S  # noqa: F405
