"""The progress panel's one read (collectors/selectors.progress -> ProgressPanel): counts, a
percentage, the nodes worth a look and a provisional verdict, in two queries whatever the
number of nodes; the incident page and the snapshot page show the same panel."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.services import node_create
from collectors import provisional, selectors, services
from collectors.models import NodeCollection, NodeStatus, Snapshot
from incidents.services import incident_open
from tests.collectors.test_node_parse import _snapshot, _still_collecting
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db


def _nodes(cluster, count: int) -> None:
    for index in range(2, 2 + count):
        node_create(
            cluster=cluster, name=f"gpu-{index}", address=f"127.0.9.{index + 1}", port=22,
            username="root", key_path="/etc/hangdesk/id_ed25519", host_key=HOST_KEY,
        )  # fmt: skip


def _running(cluster, bob) -> Snapshot:
    incident = incident_open(cluster=cluster, title="hung", opened_by=bob)
    return services.snapshot_create(incident=incident, by=bob).snapshot


def _count(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_a_small_snapshot_lists_every_node(cluster, bob):
    snapshot = _running(cluster, bob)
    NodeCollection.objects.filter(snapshot=snapshot, node_name="gpu-0").update(status=NodeStatus.OK)
    panel = selectors.progress(snapshot)
    assert panel.counts == {"total": 2, "ok": 1, "failed": 0, "running": 0, "pending": 1}
    assert panel.percent == 50 and panel.ok_hidden == 0 and panel.provisional is None
    assert [c.node_name for c in panel.collections] == ["gpu-0", "gpu-1"]
    assert set(panel.context()) == {
        "snapshot", "counts", "percent", "collections", "ok_hidden", "provisional",
    }  # fmt: skip


def test_a_large_snapshot_lists_the_nodes_not_ok_in_the_same_two_queries(cluster, bob):
    first = _running(cluster, bob)
    assert _count(lambda: selectors.progress(first)) == 2
    _nodes(cluster, 30)
    snapshot = _running(cluster, bob)
    NodeCollection.objects.filter(snapshot=snapshot).exclude(node_name="gpu-7").update(
        status=NodeStatus.OK
    )
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert _count(lambda: selectors.progress(snapshot)) == 2
    panel = selectors.progress(snapshot)
    assert [c.node_name for c in panel.collections] == ["gpu-7"] and panel.ok_hidden == 31


def test_the_incident_page_shows_the_provisional_verdict_from_its_first_render(
    cluster, bob, client
):
    snapshot = _snapshot(cluster, bob)
    _still_collecting(snapshot, ["lab-node-2"])
    assert provisional.provisional_past_deadline(snapshot_id=snapshot.pk)
    provisional.snapshot_provisional_analyse(snapshot_id=snapshot.pk)
    client.force_login(bob)
    page = client.get(snapshot.incident.get_absolute_url()).content.decode()
    assert "provisional: 3 of 4 nodes" in page and "Still out: lab-node-2" in page
