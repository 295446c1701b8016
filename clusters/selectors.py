"""Reads for the cluster pages, each a fixed number of queries whatever the size."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from .models import Cluster


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.annotate(node_count=Count("nodes", distinct=True)).order_by("name")


def cluster_with_nodes(name: str) -> tuple[Cluster, QuerySet]:
    cluster = Cluster.objects.get(name=name)
    return cluster, cluster.nodes.order_by("name")
