"""The Content-Security-Policy every console page carries: scripts and styles from the
console's own static files only (no inline script, no eval: htmx and plotly run under it, the
pages' behaviour lives in static/*.js), nothing loaded from elsewhere, no framing. Inline
styles stay allowed: plotly and htmx set style attributes as they draw. Shared pages (/s/) get
a stricter one of their own (sharing/middleware.py), set after this."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

CONSOLE_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "worker-src 'self' blob:",  # the API reference (Redoc) searches in a worker
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONSOLE_POLICY)
        return response
