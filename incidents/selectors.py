"""Reads for pages and the API, each a fixed number of queries whatever the size."""

from __future__ import annotations

from django.db.models import Count, OuterRef, QuerySet, Subquery

from .models import Cluster, Incident, TimelineEvent


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
    return incidents.annotate(verdict=_latest_verdict()).order_by("severity", "-opened_at")


def _latest_verdict():
    """The newest analysed snapshot's classification, as one subquery (no query per row)."""
    from collectors.models import Snapshot

    latest = Snapshot.objects.filter(incident=OuterRef("pk"), diagnosis__isnull=False).order_by(
        "-started_at", "-pk"
    )
    return Subquery(latest.values("diagnosis__classification")[:1])


def incident_timeline(incident: Incident) -> QuerySet[TimelineEvent]:
    return incident.events.select_related("author").order_by("at", "pk")


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.annotate(node_count=Count("nodes", distinct=True)).order_by("name")


def cluster_with_nodes(name: str) -> tuple[Cluster, QuerySet]:
    cluster = Cluster.objects.get(name=name)
    return cluster, cluster.nodes.order_by("name")
