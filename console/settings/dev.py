"""`make run`: a console on one machine with embedded defaults."""

import secrets

from .base import *  # noqa: F403
from .base import VAR_DIR, env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)


def _dev_secret_key() -> str:
    # Stable across restarts so sessions survive; never used when DJANGO_SECRET_KEY is set.
    path = VAR_DIR / "secret-key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = SECRET_KEY or _dev_secret_key()  # noqa: F405
