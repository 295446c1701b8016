"""Incident pages that also show snapshots. Each view validates, reads its page through one
selector (pages/selectors.py), and renders."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from incidents.forms import IncidentFilterForm
from incidents.models import Incident

from .selectors import incident_list_page, incident_page


def incident_list(request: HttpRequest) -> HttpResponse:
    page = incident_list_page(IncidentFilterForm(request.GET or None))
    return render(request, "pages/incident_list.html", page.context())


def incident_detail(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(
        Incident.objects.select_related("cluster", "commander", "opened_by"), pk=pk
    )
    page = incident_page(incident, request.user)
    return render(request, "pages/incident_detail.html", page.context())


def incident_live(request: HttpRequest, pk: int) -> HttpResponse:
    """An open incident page asks "changed since this version?" every few seconds. Unchanged
    costs one primary-key read and an empty 204 (htmx swaps nothing); changed, the answer
    carries the timeline and only the other regions whose key moved, as out-of-band swaps
    (the verdict is rebuilt only when the snapshot, its verdict or its decision moved)."""
    version = Incident.objects.filter(pk=pk).values_list("version", flat=True).first()
    if version is None:
        raise Http404("No such incident.")
    if str(version) == request.GET.get("version"):
        return HttpResponse(status=204)
    incident = get_object_or_404(
        Incident.objects.select_related("cluster", "commander", "opened_by"), pk=pk
    )
    shown = request.GET.get("verdict") or ""
    page = incident_page(incident, request.user, shown_verdict=shown)
    swap = {
        "head": page.live.head != request.GET.get("head"),
        "evidence": page.live.verdict != shown,
    }
    seen = _int(request.GET.get("seen"))
    context = page.context() | {
        "swap": swap,
        "seen_event": seen,
        "news": [e for e in page.events if e.pk > seen],
    }
    return render(request, "pages/_live.html", context)


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
