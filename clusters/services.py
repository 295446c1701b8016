"""Every write to clusters and nodes. The models' own rules run before each save."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from .models import CONNECTION_FIELDS, Cluster, Node, NodeCheck
from .signals import node_connection_changed


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


def node_create(*, cluster: Cluster, check: bool = True, **fields: Any) -> Node:
    """A new node; with `check`, its connection is checked in the background."""
    node = Node(cluster=cluster, **fields)
    node.full_clean()
    if check:
        node.check_state = NodeCheck.CHECKING
    node.save()
    if check:
        _ask_for_check(node)
    return node


def node_update(*, node: Node, check: bool = True, **fields: Any) -> Node:
    """The node changed; a change to how it is reached asks (with `check`) for a new check."""
    before = {name: getattr(node, name) for name in CONNECTION_FIELDS}
    for name, value in fields.items():
        setattr(node, name, value)
    node.full_clean()
    moved = any(getattr(node, name) != value for name, value in before.items())
    if check and moved:
        node.check_state, node.check_text, node.checked_at = NodeCheck.CHECKING, "", None
    node.save()
    if check and moved:
        _ask_for_check(node)
    return node


def _ask_for_check(node: Node) -> None:
    transaction.on_commit(lambda: node_connection_changed.send(sender=Node, node=node))


def node_check_record(*, node_pk: int, spec: dict, state: str, text: str) -> bool:
    """A check's answer, kept only if the node is still reached the way that was checked
    (an edit meanwhile asked for a check of its own). True when it was kept."""
    unchanged = {name: spec[name] for name in CONNECTION_FIELDS}
    unchanged["key_path"] = unchanged["key_path"] or ""
    kept = Node.objects.filter(pk=node_pk, **unchanged).update(
        check_state=state, check_text=text[:500], checked_at=timezone.now()
    )
    return bool(kept)


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
            node = node_create(cluster=cluster, name=spec["name"], check=False, **fields)
        elif any(getattr(node, k) != v for k, v in fields.items()):
            node = node_update(node=node, check=False, **fields)
        out.append(node)
    return out
