"""Feedback next to the control that caused it.

A form posted by htmx gets a small fragment back (swapped in beside the button) and the
`incident-changed` event, which makes the page's live poll fetch what changed at once; a
plain form post (no JavaScript) gets the old flash message and a redirect."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

CHANGED_EVENT = "incident-changed"
_LEVELS = {"success": messages.SUCCESS, "info": messages.INFO, "error": messages.ERROR}


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def answer(
    request: HttpRequest,
    *,
    to: str,
    text: str = "",
    level: str = "success",
    changed: bool = True,
    about: str = "",
) -> HttpResponse:
    """The response to an action: a fragment for htmx, a redirect with a message otherwise.
    Errors come back as 200 too: htmx swaps only successful responses, and the message must
    show where the responder is looking. `about` names what the message is about (e.g.
    "snapshot-3"), so the page can retire it when that thing moves on."""
    if is_htmx(request):
        context = {"level": level, "text": text, "about": about}
        response = render(request, "_feedback.html", context)
        if changed:
            response["HX-Trigger"] = CHANGED_EVENT
        return response
    if text:
        messages.add_message(request, _LEVELS[level], text)
    return redirect(to)
