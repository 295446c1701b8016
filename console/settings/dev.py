"""`make run`: a console on one machine with embedded defaults."""

import secrets

from .base import *  # noqa: F403
from .base import VAR_DIR, env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)

# Written once by `runconsole` (`make run`) so that sessions survive restarts; never used when
# DJANGO_SECRET_KEY is set. Importing these settings only reads it: a command run before the
# first `make run` gets a key of its own process.
DEV_SECRET_KEY_FILE = VAR_DIR / "secret-key"


def _dev_secret_key() -> str:
    try:
        return DEV_SECRET_KEY_FILE.read_text().strip() or secrets.token_urlsafe(50)
    except FileNotFoundError:
        return secrets.token_urlsafe(50)


SECRET_KEY = SECRET_KEY or _dev_secret_key()  # noqa: F405
