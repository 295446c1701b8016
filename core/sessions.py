"""Console sessions end when the browser closes (SESSION_EXPIRE_AT_BROWSER_CLOSE), after
SESSION_IDLE_SECONDS without a request, and SESSION_COOKIE_AGE after the login whatever the
activity. Django alone would keep a session 14 days, across browser restarts, and slide it
forward with every save."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

SEEN = "hangdesk_seen"
SINCE = "hangdesk_since"
TOUCH_EVERY_S = 60  # the session is written at most once a minute for activity


class SessionLimitsMiddleware:
    """After AuthenticationMiddleware: a session past its limits is logged out before the
    view runs (a page then asks for the login, the API answers 401/403)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            _check(request)
        return self.get_response(request)


def _check(request: HttpRequest) -> None:
    session, now = request.session, time.time()
    since, seen = session.get(SINCE), session.get(SEEN)
    idle = getattr(settings, "SESSION_IDLE_SECONDS", 3600)
    if (seen is not None and now - seen > idle) or (
        since is not None and now - since > settings.SESSION_COOKIE_AGE
    ):
        logout(request)
        return
    if since is None:
        session[SINCE] = now
    if seen is None or now - seen > TOUCH_EVERY_S:
        session[SEEN] = now
