"""Login throttling: after LOGIN_FAILURE_LIMIT failed logins for one user name from one
address within LOGIN_FAILURE_WINDOW_SECONDS, that pair is refused until the window passes;
an address that fails for many names (password spraying) is refused the same way.

Kept in the database so every web process shares the count. The check lives in the
authentication backend, so the console's login page and the admin's both go through it;
failures are counted from Django's `user_login_failed` signal.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from .clients import client_ip
from .models import LoginFailure

DEFAULT_LIMIT = 5
DEFAULT_WINDOW_SECONDS = 15 * 60
# Failures from one address across every user name before that address is refused.
ADDRESS_LIMIT_FACTOR = 4


def _limit() -> int:
    return getattr(settings, "LOGIN_FAILURE_LIMIT", DEFAULT_LIMIT)


def window() -> timedelta:
    return timedelta(
        seconds=getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", DEFAULT_WINDOW_SECONDS)
    )


def _normal(username: str | None) -> str:
    return (username or "").strip().lower()[:150]


def _ip(request) -> str | None:
    return client_ip(request) if request is not None else None


def is_locked(username: str | None, request) -> bool:
    since = timezone.now() - window()
    recent = LoginFailure.objects.filter(ip=_ip(request), at__gte=since)
    if recent.filter(username=_normal(username)).count() >= _limit():
        return True
    return recent.count() >= _limit() * ADDRESS_LIMIT_FACTOR


def record_failure(username: str | None, request) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(at__lt=now - window()).delete()
    LoginFailure.objects.create(username=_normal(username), ip=_ip(request), at=now)


def forget_failures(username: str | None, request) -> None:
    LoginFailure.objects.filter(username=_normal(username), ip=_ip(request)).delete()


def retry_after_seconds() -> int:
    return int(window().total_seconds())


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing (without checking the password) while the pair is locked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get("username")
        if is_locked(username, request):
            # Stops the backend chain; Django sends user_login_failed, which counts nothing
            # more while locked (signals.py), so the window still ends.
            raise PermissionDenied("too many failed logins")
        return super().authenticate(request, username=username, password=password, **kwargs)
