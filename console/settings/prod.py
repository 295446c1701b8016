"""docker-compose / production: every secret must come from the environment.

The default of manage.py, WSGI and `celery -A console`: started without
DJANGO_SETTINGS_MODULE, the console runs these, and they refuse to start without a secret key
and the host names they serve. `make run` names console.settings.dev itself.

`manage.py check --deploy` passes with the defaults below. Behind a proxy that terminates TLS,
set DJANGO_SECURE_PROXY_SSL_HEADER=true (the proxy must set X-Forwarded-Proto and strip it from
clients); on plain HTTP (a trial on localhost) set DJANGO_SECURE_SSL_REDIRECT=false,
DJANGO_SECURE_COOKIES=false and DJANGO_HSTS_SECONDS=0 (check --deploy then says so).
"""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import SECRET_KEY, VAR_DIR, env_bool

DEBUG = False
_DEV_HINT = (
    " (the console `make run` starts on one machine: DJANGO_SETTINGS_MODULE=console.settings.dev)"
)
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set in production: 50+ random characters, e.g. "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`" + _DEV_HINT
    )
if not os.environ.get("DJANGO_ALLOWED_HOSTS", "").strip():
    raise ImproperlyConfigured(
        "DJANGO_ALLOWED_HOSTS must name the host names the console is served as, comma-separated"
        + _DEV_HINT
    )


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None


SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = _env_int("DJANGO_HSTS_SECONDS", 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", True)
# Prometheus scrapes /metrics over the internal network (allowed networks or its own token,
# console/metrics.py): not redirected to HTTPS.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
