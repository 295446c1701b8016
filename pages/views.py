"""Incident pages that also show snapshots. Each view reads through the apps' selectors,
calls one service, and renders."""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from collectors import selectors as snapshot_selectors
from incidents import selectors as incident_selectors
from incidents.forms import (
    IncidentEditForm,
    IncidentFilterForm,
)
from incidents.guided import Reasked, Standing, responders_call
from incidents.models import EventKind, Incident, TimelineEvent

_CALLS = (EventKind.DECISION, EventKind.ANSWER)


def incident_list(request: HttpRequest) -> HttpResponse:
    filters = IncidentFilterForm(request.GET or None)
    chosen = filters.chosen()
    status = chosen.get("status", "")
    incidents = incident_selectors.incident_list(
        status="" if status in ("", "all") else status,
        active_only=status == "",
        severity=chosen.get("severity", ""),
        cluster=chosen.get("cluster", ""),
    )
    return render(
        request,
        "pages/incident_list.html",
        {"incidents": snapshot_selectors.with_latest_verdict(incidents)[:500], "filters": filters},
    )


def incident_detail(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(
        Incident.objects.select_related("cluster", "commander", "opened_by"), pk=pk
    )
    context = _incident_context(incident)
    return render(request, "pages/incident_detail.html", context)


def incident_live(request: HttpRequest, pk: int) -> HttpResponse:
    """An open incident page asks "changed since version v?" every few seconds. Unchanged
    costs one primary-key read and an empty 204 (htmx swaps nothing); changed, the answer
    carries the timeline and only the other regions whose key moved, as out-of-band swaps
    (the verdict is rebuilt only when the snapshot, its verdict or its decision moved)."""
    version = Incident.objects.filter(pk=pk).values_list("version", flat=True).first()
    if version is None:
        raise Http404("No such incident.")
    if str(version) == request.GET.get("v"):
        return HttpResponse(status=204)
    incident = get_object_or_404(
        Incident.objects.select_related("cluster", "commander", "opened_by"), pk=pk
    )
    light = _incident_context(incident, evidence=False)
    swap = {
        "head": light["live"]["a"] != request.GET.get("a"),
        "evidence": light["live"]["d"] != request.GET.get("d"),
    }
    context = _incident_context(incident) if swap["evidence"] else light
    context["swap"] = swap
    context["seen_event"] = _int(request.GET.get("e"))
    context["news"] = [e for e in context["events"] if e.pk > context["seen_event"]]
    return render(request, "pages/_live.html", context)


def _incident_context(incident: Incident, *, evidence: bool = True) -> dict:
    """What the page shows; without `evidence`, the snapshot and verdict are read only as far
    as the live keys need (no diagnosis JSON, no chart, no progress table)."""
    snapshots = incident.snapshots.order_by("-started_at", "-pk")
    if evidence:  # the verdict without the per-rank table (its overview stands in)
        snapshots = snapshots.for_pages()
    else:
        snapshots = snapshots.defer("diagnosis").annotate(has_diagnosis=Q(diagnosis__isnull=False))
    snapshot = snapshots.first()
    diagnosed = snapshot
    has_diagnosis = snapshot is not None and snapshot.has_diagnosis
    if snapshot is not None and not has_diagnosis:
        # While a new snapshot collects, the last verdict stays on the page (and says which).
        diagnosed = snapshot_selectors.latest_diagnosed_snapshot(incident, for_page=evidence)
    events = list(incident_selectors.incident_timeline(incident))
    # Any decision or guided answer (this snapshot's, or one carried to it) moves the verdict's key.
    answered = max((e.pk for e in events if e.kind in _CALLS), default=0)
    context = {
        "incident": incident,
        "snapshot": snapshot,
        "diagnosed": diagnosed,
        "events": events,
        "edit_form": IncidentEditForm(instance=incident),
        # What the page shows, as keys the live poll sends back: each region is re-rendered
        # only when its own key moved (typing in the note box survives a colleague's note).
        "live": {
            "v": incident.version,
            "a": f"{incident.status}:{incident.severity}:{incident.commander_id or 0}:"
            f"{snapshot.status if snapshot else '-'}:{incident.title}",
            "d": f"{snapshot.pk}:{snapshot.status}:{answered}:{diagnosed.pk if diagnosed else 0}"
            if snapshot
            else "-",
            "e": events[-1].pk if events else 0,
        },
    }
    if evidence:
        context["progress"] = snapshot_selectors.progress(snapshot) if snapshot else None
        context["view"] = snapshot_selectors.diagnosis_view(diagnosed) if diagnosed else None
        context["decision"] = decision_on(events, diagnosed)
    return context


def decision_on(events: list[TimelineEvent], snapshot) -> Standing | Reasked | None:
    """The responders' class decision standing on this snapshot (its own, or one carried from
    an earlier snapshot), shown in the verdict's head."""
    diagnosis = snapshot.read_diagnosis() if snapshot is not None else None
    if diagnosis is None:
        return None
    return responders_call(events, snapshot.pk, diagnosis.classification)


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
