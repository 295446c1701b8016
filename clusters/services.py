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
