"""Every write to clusters and nodes. The models' own rules run before each save."""

from __future__ import annotations

from typing import Any

from .models import Cluster, Node


def cluster_create(**fields: Any) -> Cluster:
    cluster = Cluster(**fields)
    cluster.full_clean()
    cluster.save()
    return cluster


def cluster_update(*, cluster: Cluster, **fields: Any) -> Cluster:
    for name, value in fields.items():
        setattr(cluster, name, value)
    cluster.full_clean()
    cluster.save()
    return cluster


def node_create(*, cluster: Cluster, **fields: Any) -> Node:
    node = Node(cluster=cluster, **fields)
    node.full_clean()
    node.save()
    return node


def node_update(*, node: Node, **fields: Any) -> Node:
    for name, value in fields.items():
        setattr(node, name, value)
    node.full_clean()
    node.save()
    return node


def job_nodes_register(*, cluster: Cluster, nodes: list[dict]) -> list[Node]:
    """Register or update the nodes a scheduler named (name, address, port, username,
    key_path, host_key each), under the cluster's rules; returns them in the given order.
    A node whose fields did not change is not written."""
    existing = {n.name: n for n in cluster.nodes.filter(name__in=[n["name"] for n in nodes])}
    out = []
    for spec in nodes:
        fields = {k: spec[k] for k in ("address", "port", "username", "key_path", "host_key")}
        node = existing.get(spec["name"])
        if node is None:
            node = node_create(cluster=cluster, name=spec["name"], **fields)
        elif any(getattr(node, k) != v for k, v in fields.items()):
            node = node_update(node=node, **fields)
        out.append(node)
    return out
