"""A refusal raised by a service in a page view is told to the person, not served as a 500.

Views catch the refusals they expect; this catches the rest (a closed incident refusing a
note, say): the message goes to the page the person came from. The API answers its own
(core/api_errors.py), so only pages get here.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme

from .errors import AppError


class AppErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, AppError):
            return None
        messages.error(request, str(exception))
        back = request.headers.get("Referer", "")
        safe = url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
        target = back if safe and back else "/"
        if request.headers.get("HX-Request") == "true":
            # htmx would swap a followed redirect into the button's target; reload instead.
            response = HttpResponse(status=200)
            response["HX-Redirect"] = target
            return response
        return HttpResponseRedirect(target, status=303)
