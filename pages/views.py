"""Incident pages that also show snapshots. Each view reads through the apps' selectors,
calls one service, and renders."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from collectors import selectors as snapshot_selectors
from core.roles import Role, has_role
from incidents import postmortems
from incidents import selectors as incident_selectors
from incidents.forms import (
    IncidentEditForm,
    IncidentFilterForm,
    NoteForm,
    PostMortemForm,
    StatusChangeForm,
)
from incidents.models import Incident, PostMortem


def incident_list(request: HttpRequest) -> HttpResponse:
    filters = IncidentFilterForm(request.GET or None)
    chosen = filters.cleaned_data if filters.is_valid() else {}
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
    snapshot = snapshot_selectors.latest_snapshot(incident)
    return render(
        request,
        "pages/incident_detail.html",
        {
            "incident": incident,
            "snapshot": snapshot,
            "progress": snapshot_selectors.progress(snapshot) if snapshot else None,
            "view": snapshot_selectors.diagnosis_view(snapshot) if snapshot else None,
            "events": incident_selectors.incident_timeline(incident),
            "status_form": StatusChangeForm(incident=incident),
            "note_form": NoteForm(),
            "edit_form": IncidentEditForm(instance=incident),
        },
    )


def incident_postmortem(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem: read by everyone; written and edited by responders (a draft is
    prefilled from the latest verdict, the decisions and the timeline)."""
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    context = postmortems.postmortem_view(incident)
    form = None
    if has_role(request.user, Role.RESPONDER):
        instance = context["postmortem"] or _draft(incident)
        form = PostMortemForm(request.POST or None, instance=instance)
        if request.method == "POST" and form.is_valid():
            postmortems.postmortem_save(incident=incident, by=request.user, **form.cleaned_data)
            messages.success(request, "Post-mortem saved.")
            return redirect("incidents:postmortem", pk=incident.pk)
    elif request.method == "POST":
        raise PermissionDenied("This needs the responder role.")
    context.update({"incident": incident, "form": form})
    return render(request, "pages/postmortem.html", context)


def _draft(incident: Incident) -> PostMortem:
    snapshot = snapshot_selectors.latest_diagnosed_snapshot(incident)
    if snapshot is None:
        return postmortems.postmortem_draft(incident)
    return postmortems.postmortem_draft(
        incident, diagnosis=snapshot.diagnosis, diagnosed_at=snapshot.finished_at
    )
