"""What every response under /s/ (the shared pages) carries, whatever produced it: no cookie
of any kind (session, CSRF, messages), noindex, no referrer, no caching.

It stands first in MIDDLEWARE, so it sees the response after every other middleware has
added its cookies, and removes them."""

from __future__ import annotations

SHARED_PREFIX = "/s/"
SHARED_HEADERS = {
    "X-Robots-Tag": "noindex, nofollow, noarchive",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store, private",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The page runs only the console's own scripts (plotly and the chart's), loads nothing
    # from elsewhere, and sends nothing anywhere.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self'; connect-src 'none'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
}


def is_shared_path(path: str) -> bool:
    return path.startswith(SHARED_PREFIX)


class SharedPageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if is_shared_path(request.path_info):
            response.cookies.clear()
            for name, value in SHARED_HEADERS.items():
                response[name] = value
            # Whatever varied, nothing of the visitor's cookies shaped this page.
            if response.has_header("Vary"):
                del response["Vary"]
        return response
