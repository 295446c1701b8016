"""A first verdict before the last node, on the node farm with a real Celery worker: one node
answers late (the farm's node-slow fault), the verdict from the other 19 of 20 is shown as
provisional with that node named as still out, then the final verdict replaces it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from clusters.importing import cluster_import
from collectors import selectors
from collectors.models import NodeParseRecord, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from core.services import api_token_create
from incidents.services import incident_open
from tests.helpers import wait_for

NODES = 20  # 19 in is 95 %
SLOW_S = 25.0  # well inside a visit's deadline: the node is slow, not gone


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_slow_node_gets_a_provisional_verdict_then_the_final_one(
    farm_factory, celery_worker_process, bob
):
    running = farm_factory("node-slow", nodes=NODES, slow_s=SLOW_S)
    expected = running.info["expected"]
    cluster = cluster_import(running.info).cluster
    incident = incident_open(opened_by=bob, title="farm stuck", cluster=cluster)
    snapshot, _ = snapshot_start(incident=incident, by=bob)

    shown = wait_for(
        lambda: selectors.read_provisional(Snapshot.objects.get(pk=snapshot.pk)),
        timeout=SLOW_S + 60,
        what="the provisional verdict",
    )
    # Made while the slow node was still out, and it says so.
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.RUNNING
    assert shown["label"] == f"provisional: {NODES - 1} of {NODES} nodes"
    assert shown["missing"] == [expected["slow_node"]]
    assert set(expected["provisional_unobserved"]) <= set(shown["unobserved_ranks"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    api = client.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    if api.get("status") == SnapshotStatus.RUNNING:  # the final verdict may be in already
        assert api["provisional"]["label"] == shown["label"]
        assert api["provisional"]["missing"] == [expected["slow_node"]]

    done = wait_for(
        lambda: Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.DONE).first(),
        timeout=SLOW_S + 120,
        what="the final verdict",
    )
    assert done.provisional is None and selectors.read_provisional(done) is None
    assert done.diagnosis["classification"] == expected["classification"]
    assert done.diagnosis["suspect_ranks"] == expected["suspect_ranks"]
    # Every node's parse was stored by the worker that collected it.
    assert NodeParseRecord.objects.filter(collection__snapshot=snapshot).count() == NODES
    phases = [e.details.get("phase") for e in incident.events.order_by("at", "pk")]
    assert "provisional" in phases and phases.index("provisional") < phases.index("finished")
