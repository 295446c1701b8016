"""Reads for the cluster pages, each a fixed number of queries whatever the size: each page's
one typed record (the view validates, calls it, renders; templates only format)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from django.db.models import Count
from django.forms import Form

from .models import Cluster, Node, NodeCheck


@dataclass(frozen=True)
class ClusterListPage:
    clusters: list[Cluster]  # each with `node_count`

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def cluster_list_page() -> ClusterListPage:
    """The cluster list: every cluster with its node count, in one query."""
    clusters = Cluster.objects.annotate(node_count=Count("nodes", distinct=True))
    return ClusterListPage(clusters=list(clusters.order_by("name")))


@dataclass(frozen=True)
class ClusterPage:
    """The cluster page, and its node list alone (refreshed while a check runs): the cluster,
    its nodes, whether a connection check is running, and the add-a-node form (admins)."""

    cluster: Cluster
    nodes: list[Node]
    checking: bool  # a node's connection check runs: the node list asks again
    node_form: Form | None = None

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def cluster_page(cluster: Cluster, *, node_form: Form | None = None) -> ClusterPage:
    """One query (the nodes), whatever their number."""
    nodes = list(cluster.nodes.order_by("name"))
    return ClusterPage(
        cluster=cluster,
        nodes=nodes,
        checking=any(n.check_state == NodeCheck.CHECKING for n in nodes),
        node_form=node_form,
    )
