"""Snapshots started as a click starts them, for the tests that run the real workers."""

from __future__ import annotations

from clusters.services import cluster_create, node_create
from collectors.models import Snapshot
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.conftest import HOST_KEY
from tests.helpers import free_port

REFUSING_NODE = "gone-0"


def refused_snapshot(by, cluster_name: str, *, prometheus_url: str = "") -> Snapshot:
    """A snapshot started on a new cluster of one node, REFUSING_NODE, whose port nothing
    listens on: its visit is refused, retried once, then failed (the workers' whole path to
    the verdict, with no SSH server). `prometheus_url` the cluster's, if given."""
    cluster = cluster_create(name=cluster_name)
    if prometheus_url:
        cluster.prometheus_url = prometheus_url
        cluster.save(update_fields=["prometheus_url"])
    node_create(
        cluster=cluster, name=REFUSING_NODE, address="127.0.0.1", port=free_port(),
        username="root", key_path="/etc/hangdesk/id_ed25519", host_key=HOST_KEY,
    )  # fmt: skip
    incident = incident_open(opened_by=by, title="hung", cluster=cluster)
    snapshot, _ = snapshot_start(incident=incident, by=by)
    return snapshot
