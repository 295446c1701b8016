"""A request body over its cap is refused from Content-Length, before anything reads it:
Django's CSRF check reads a POST's form (spooling its files to disk) before any view runs, so
a cap checked in the view comes after the disk has filled.

Every request may carry settings.REQUEST_BODY_CAP_BYTES (8 MiB), a request with no session
and no Authorization header REQUEST_BODY_CAP_ANONYMOUS_BYTES (256 KiB: a login form). A view
marked `@body_cap(n)` (the bundle uploads) accepts `n` from a responder, or from a request
with an Authorization header (the API's own check then asks for the responder's token).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve

from .roles import Role, has_role

DEFAULT_CAP = 8 << 20
ANONYMOUS_CAP = 256 << 10


@dataclass(frozen=True)
class BodyCap:
    limit: int
    field: str = "detail"  # the API answers {field: message}, as core.api_errors does
    what: str = "request"  # "bundle": "600 MiB is over the 512 MiB bundle limit."
    slack: int = 0  # a form's own bytes around a file of `limit` (boundaries, fields)

    @property
    def refuses_above(self) -> int:
        return self.limit + self.slack


def body_cap(limit: int, *, field: str = "detail", what: str = "request", slack: int = 0):
    """Mark a view (function, or APIView class) as taking bodies up to `limit` bytes."""

    def mark(view):
        view.body_cap = BodyCap(limit, field, what, slack)
        return view

    return mark


def declared_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def cap_for(request: HttpRequest) -> BodyCap:
    user = getattr(request, "user", None)
    signed_in = user is not None and user.is_authenticated
    has_credentials = signed_in or "HTTP_AUTHORIZATION" in request.META
    if not has_credentials:
        return BodyCap(getattr(settings, "REQUEST_BODY_CAP_ANONYMOUS_BYTES", ANONYMOUS_CAP))
    default = BodyCap(getattr(settings, "REQUEST_BODY_CAP_BYTES", DEFAULT_CAP))
    view_cap = _view_cap(request.path_info)
    bigger = view_cap is not None and view_cap.limit > default.limit
    if bigger and (not signed_in or has_role(user, Role.RESPONDER)):
        return view_cap
    return default


def _view_cap(path: str) -> BodyCap | None:
    try:
        func = resolve(path).func
    except Resolver404:
        return None
    return getattr(func, "body_cap", None) or getattr(getattr(func, "cls", None), "body_cap", None)


class BodyCapMiddleware:
    """After AuthenticationMiddleware (it needs the user), before any view reads the body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = declared_length(request)
        cap = cap_for(request) if length else None
        if cap is not None and length > cap.refuses_above:
            return _too_large(request, length, cap)
        return self.get_response(request)


def _too_large(request: HttpRequest, length: int, cap: BodyCap) -> HttpResponse:
    unit, shift = ("MiB", 20) if cap.limit >= 1 << 20 else ("KiB", 10)
    limit = cap.limit >> shift
    text = f"{length >> shift} {unit} is over the {limit} {unit} {cap.what} limit."
    if request.path_info.startswith("/api/"):
        return JsonResponse({cap.field: text}, status=413)  # the API's error shape
    return HttpResponse(text + "\n", status=413, content_type="text/plain; charset=utf-8")
