"""Incident pages. Views validate input, call one service or selector, and render."""

from __future__ import annotations

import copy

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from collectors import selectors as snapshot_selectors
from console.roles import Role, has_role, role_required

from . import postmortems, selectors, services
from .forms import (
    IncidentEditForm,
    IncidentFilterForm,
    IncidentOpenForm,
    NoteForm,
    PostMortemForm,
    StatusChangeForm,
)
from .models import Incident, TimelineEvent


def incident_list(request: HttpRequest) -> HttpResponse:
    filters = IncidentFilterForm(request.GET or None)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    status = chosen.get("status", "")
    incidents = selectors.incident_list(
        status="" if status in ("", "all") else status,
        active_only=status == "",
        severity=chosen.get("severity", ""),
        cluster=chosen.get("cluster", ""),
    )
    return render(
        request, "incidents/list.html", {"incidents": incidents[:500], "filters": filters}
    )


@role_required(Role.RESPONDER)
def incident_open(request: HttpRequest) -> HttpResponse:
    form = IncidentOpenForm(request.POST or None, initial={"commander": request.user})
    if request.method == "POST" and form.is_valid():
        incident = services.incident_open(opened_by=request.user, **form.cleaned_data)
        messages.success(request, f"{incident.reference} opened.")
        return redirect(incident)
    return render(request, "incidents/open.html", {"form": form})


def incident_detail(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(
        Incident.objects.select_related("cluster", "commander", "opened_by"), pk=pk
    )
    snapshot = snapshot_selectors.latest_snapshot(incident)
    return render(
        request,
        "incidents/detail.html",
        {
            "incident": incident,
            "snapshot": snapshot,
            "progress": snapshot_selectors.progress(snapshot) if snapshot else None,
            "view": snapshot_selectors.diagnosis_view(snapshot) if snapshot else None,
            "events": selectors.incident_timeline(incident),
            "status_form": StatusChangeForm(incident=incident),
            "note_form": NoteForm(),
            "edit_form": IncidentEditForm(instance=incident),
        },
    )


@require_POST
@role_required(Role.RESPONDER)
def incident_change_status(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    form = StatusChangeForm(request.POST, incident=incident)
    if form.is_valid():
        try:
            services.incident_change_status(
                incident=incident,
                to_status=form.cleaned_data["to_status"],
                by=request.user,
                note=form.cleaned_data["note"],
            )
        except services.InvalidTransition as exc:
            messages.error(request, str(exc))
    else:
        messages.error(request, " ".join(e for errs in form.errors.values() for e in errs))
    return redirect(incident)


@require_POST
@role_required(Role.RESPONDER)
def incident_add_note(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    form = NoteForm(request.POST)
    if form.is_valid():
        services.incident_add_note(incident=incident, by=request.user, **form.cleaned_data)
    else:
        messages.error(request, "A note needs some text (at most 2,000 characters).")
    return redirect(f"{incident.get_absolute_url()}#timeline")


@require_POST
@role_required(Role.RESPONDER)
def incident_edit(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    # The form writes into its instance while validating; give it a copy so the service
    # still sees the old values and can record what changed.
    form = IncidentEditForm(request.POST, instance=copy.copy(incident))
    if form.is_valid():
        services.incident_update(incident=incident, by=request.user, **form.cleaned_data)
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect(incident)


@require_POST
@role_required(Role.RESPONDER)
def event_toggle_pin(request: HttpRequest, pk: int, event_pk: int) -> HttpResponse:
    event = get_object_or_404(TimelineEvent, pk=event_pk, incident_id=pk)
    services.event_set_pinned(event=event, pinned=not event.pinned)
    return redirect(f"{event.incident.get_absolute_url()}#event-{event.pk}")


def incident_postmortem(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem: read by everyone; written and edited by responders (a draft is
    prefilled from the verdicts, the decisions and the timeline)."""
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    context = postmortems.postmortem_view(incident)
    form = None
    if has_role(request.user, Role.RESPONDER):
        instance = context["postmortem"] or postmortems.postmortem_draft(incident)
        form = PostMortemForm(request.POST or None, instance=instance)
        if request.method == "POST" and form.is_valid():
            postmortems.postmortem_save(incident=incident, by=request.user, **form.cleaned_data)
            messages.success(request, "Post-mortem saved.")
            return redirect("incidents:postmortem", pk=incident.pk)
    elif request.method == "POST":
        raise PermissionDenied("This needs the responder role.")
    context.update({"incident": incident, "form": form})
    return render(request, "incidents/postmortem.html", context)
