"""Clusters from a file: the lab's node list, or one an SRE writes by hand (JSON or YAML).

    {"cluster": {"name": ..., "process_pattern": ..., "world_size": ..., "log_globs": [...],
                 "flight_recorder_globs": [...], "pyspy_command": ...},
     "nodes": [{"name", "address", "port", "username", "key_path", "host_key"}, ...]}

Importing the same file twice changes nothing; importing an edited one updates in place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from core.errors import Invalid

from .models import METRICS_FIELDS, SOURCE_FIELDS, Cluster, Node
from .services import cluster_create, cluster_update, node_create, node_update

CLUSTER_FIELDS = {
    "description": "description",
    "process_pattern": "process_pattern",
    "world_size": "expected_world_size",
    "expected_world_size": "expected_world_size",
    "log_globs": "log_globs",
    "flight_recorder_globs": "flight_recorder_globs",
    "pyspy_command": "pyspy_command",
    **{name: name for name in (*SOURCE_FIELDS, *METRICS_FIELDS)},
}
NODE_FIELDS = ("address", "port", "username", "key_path", "host_key")


class ImportRefused(Invalid):
    """The file is not a cluster description; the message says where and why."""


@dataclass
class ImportResult:
    cluster: Cluster
    created: bool
    nodes_created: list[str] = field(default_factory=list)
    nodes_updated: list[str] = field(default_factory=list)
    nodes_unchanged: list[str] = field(default_factory=list)


def load_cluster_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportRefused(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ImportRefused(f"{path} is not valid JSON/YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ImportRefused(f"{path} must hold an object with 'cluster' and 'nodes'")
    return data


@transaction.atomic
def cluster_import(data: dict[str, Any]) -> ImportResult:
    spec, nodes = data.get("cluster"), data.get("nodes", [])
    if not isinstance(spec, dict) or not spec.get("name"):
        raise ImportRefused("'cluster' must be an object with at least a 'name'")
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise ImportRefused("'nodes' must be a list of objects")
    fields = {CLUSTER_FIELDS[k]: v for k, v in spec.items() if k in CLUSTER_FIELDS}
    try:
        cluster = Cluster.objects.select_for_update().filter(name=spec["name"]).first()
        created = cluster is None
        if created:
            cluster = cluster_create(name=spec["name"], **fields)
        elif any(getattr(cluster, k) != v for k, v in fields.items()):
            cluster_update(cluster=cluster, **fields)
        result = ImportResult(cluster=cluster, created=created)
        existing = {n.name: n for n in cluster.nodes.all()}
        for index, node_spec in enumerate(nodes):
            _import_node(cluster, existing, node_spec, index, result)
    except ValidationError as exc:
        raise ImportRefused(_describe(exc)) from exc
    return result


def _import_node(cluster, existing: dict[str, Node], spec: dict, index: int, result) -> None:
    name = spec.get("name")
    if not name:
        raise ImportRefused(f"nodes[{index}] has no 'name'")
    values = {k: spec[k] for k in NODE_FIELDS if k in spec}
    values["key_path"] = values.get("key_path") or ""
    if "host_key" not in values:
        raise ImportRefused(f"node {name} has no 'host_key': hangdesk never trusts an unknown key")
    try:
        node = existing.get(name)
        if node is None:
            node_create(cluster=cluster, name=name, **values)
            result.nodes_created.append(name)
        elif any(str(getattr(node, k)) != str(v) for k, v in values.items()):
            node_update(node=node, **values)
            result.nodes_updated.append(name)
        else:
            result.nodes_unchanged.append(name)
    except ValidationError as exc:
        raise ImportRefused(f"node {name}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    return " ".join(exc.messages)
