"""The first verdict's deadline on the node farm, with the real workers: 4 nodes, one slow
(3 of 4 in is under the 95 % rule), so only the deadline the snapshot's own visits set can make
a first verdict: every visit started, the slow one past max(10 s, 3x the median visit), the
check re-scheduled by its task until then (collectors/tasks.py, analyse_provisional_at_deadline)."""

from __future__ import annotations

import time

import pytest

from clusters.importing import cluster_import
from collectors import selectors
from collectors.models import Snapshot, SnapshotStatus
from collectors.provisional import SLOW_FLOOR_S
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.helpers import wait_for

NODES = 4
SLOW_S = 40.0  # well past the floor: the slow node is out when the deadline passes


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_slow_node_past_the_deadline_gets_a_first_verdict_without_it(
    farm_factory, celery_worker_process, bob
):
    running = farm_factory("node-slow", nodes=NODES, slow_s=SLOW_S)
    expected = running.info["expected"]
    cluster = cluster_import(running.info).cluster
    incident = incident_open(opened_by=bob, title="farm slow", cluster=cluster)
    started = time.monotonic()
    snapshot, _ = snapshot_start(incident=incident, by=bob)

    shown = wait_for(
        lambda: selectors.read_provisional(Snapshot.objects.get(pk=snapshot.pk)),
        timeout=SLOW_S + 30,
        what="the provisional verdict",
    )
    waited = time.monotonic() - started
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.RUNNING
    assert waited >= SLOW_FLOOR_S  # not before the floor: the deadline made it
    assert shown["label"] == f"provisional: {NODES - 1} of {NODES} nodes"
    assert shown["missing"] == [expected["slow_node"]]
    assert set(expected["provisional_unobserved"]) <= set(shown["unobserved_ranks"])

    done = wait_for(
        lambda: Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.DONE).first(),
        timeout=SLOW_S + 120,
        what="the final verdict",
    )
    assert done.provisional is None
    assert done.diagnosis["classification"] == expected["classification"]
