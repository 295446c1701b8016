"""Reads for pages and the API, each a fixed number of queries whatever the size."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Incident, TimelineEvent


def incident_list(
    *, status: str = "", severity: str = "", cluster: str = "", active_only: bool = False
) -> QuerySet[Incident]:
    incidents = Incident.objects.select_related("cluster", "commander", "opened_by")
    if status:
        incidents = incidents.filter(status=status)
    elif active_only:
        incidents = incidents.filter(status__in=["open", "investigating", "mitigated"])
    if severity:
        incidents = incidents.filter(severity=severity)
    if cluster:
        incidents = incidents.filter(cluster__name=cluster)
    return incidents.order_by("severity", "-opened_at")


def incident_timeline(incident: Incident) -> QuerySet[TimelineEvent]:
    return incident.events.select_related("author").order_by("at", "pk")
