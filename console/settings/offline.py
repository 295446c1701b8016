"""manage.py's commands that read no database and keep no secret (`diagnose --bundle`, `help`,
any command's `--help`), when no settings are named: the base settings, a key of this process
only, and no database at all, so such a command cannot reach one by accident.

manage.py chooses these itself (manage.py, `offline_command`); nothing serves on them.
"""

import secrets

from .base import *  # noqa: F403

# Signs nothing that outlives the process: these commands keep no session, token or link.
SECRET_KEY = secrets.token_urlsafe(50)
# Django's dummy backend: any query raises ImproperlyConfigured instead of connecting.
DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
