"""Incident pages and the forms that change an incident. Views validate input, call one
service, and render or redirect. The pages that also show snapshots (the list, the incident
with its diagnosis, the post-mortem drafted from the verdict) and opening an incident (which
may read a Slurm job and start its snapshot) are composed in pages/views.py."""

from __future__ import annotations

import copy

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST

from core.feedback import answer
from core.roles import Role, role_required

from . import services
from .forms import IncidentEditForm, NoteForm, StatusChangeForm
from .models import Incident, TimelineEvent


@require_POST
@role_required(Role.RESPONDER)
def incident_change_status(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    form = StatusChangeForm(request.POST, incident=incident)
    to = incident.get_absolute_url()
    if not form.is_valid():
        text = " ".join(e for errs in form.errors.values() for e in errs)
        return answer(request, to=to, text=text, level="error")
    try:
        services.incident_change_status(
            incident=incident,
            to_status=form.cleaned_data["to_status"],
            by=request.user,
            note=form.cleaned_data["note"],
        )
    except services.InvalidTransition as exc:
        return answer(request, to=to, text=str(exc), level="error")
    return answer(request, to=to, text=f"{incident.reference} is {incident.get_status_display()}.")


@require_POST
@role_required(Role.RESPONDER)
def incident_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("commander"), pk=pk)
    to = incident.get_absolute_url()
    try:
        services.incident_acknowledge(incident=incident, by=request.user)
    except services.InvalidTransition as exc:
        return answer(request, to=to, text=str(exc), level="error")
    return answer(request, to=to, text=f"You command {incident.reference}.")


@require_POST
@role_required(Role.RESPONDER)
def incident_add_note(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    form = NoteForm(request.POST)
    to = f"{incident.get_absolute_url()}#timeline"
    if not form.is_valid():
        text = "A note needs some text (at most 2,000 characters)."
        return answer(request, to=to, text=text, level="error", changed=False)
    services.incident_add_note(incident=incident, by=request.user, **form.cleaned_data)
    return answer(request, to=to, text="Note added to the timeline.")


@require_POST
@role_required(Role.RESPONDER)
def incident_edit(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=pk)
    # The form writes into its instance while validating; give it a copy so the service
    # still sees the old values and can record what changed.
    form = IncidentEditForm(request.POST, instance=copy.copy(incident))
    to = incident.get_absolute_url()
    if not form.is_valid():
        text = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        return answer(request, to=to, text=text, level="error", changed=False)
    services.incident_update(incident=incident, by=request.user, **form.cleaned_data)
    return answer(request, to=to, text="Saved.")


@require_POST
@role_required(Role.RESPONDER)
def event_toggle_pin(request: HttpRequest, pk: int, event_pk: int) -> HttpResponse:
    event = get_object_or_404(TimelineEvent, pk=event_pk, incident_id=pk)
    services.event_set_pinned(event=event, pinned=not event.pinned)
    return answer(request, to=f"{event.incident.get_absolute_url()}#event-{event.pk}")
