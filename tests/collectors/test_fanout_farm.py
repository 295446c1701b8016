"""A farm of nodes through the real Celery worker: each planted fault ends in its verdict, and
one worker process visits many nodes at once (the visits' own intervals overlap), one SSH
session per node."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from clusters.importing import cluster_import
from collectors import selectors
from collectors.models import NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.farm.farmkit import (
    assert_planted_fault,
    farm_factory,  # noqa: F401 - the farm fixture
)
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

NODES = 96  # more than one batch (64): two tasks, and nodes taken between them
SECONDS = re.compile(r"^(\d+\.\d+)s, ")


@pytest.mark.parametrize("fault", ["rank-gone", "group-mismatch", "node-down", "node-slow"])
def test_the_farm_through_the_worker_ends_in_the_planted_fault(
    farm_factory,  # noqa: F811
    celery_worker_process,
    bob,
    fault,
):
    running = farm_factory(fault, nodes=NODES, slow_s=6)
    info, expected = running.info, running.info["expected"]
    cluster = cluster_import({**info, "cluster": {**info["cluster"], "name": f"farm-{fault}"}})
    incident = incident_open(
        opened_by=bob, title=f"farm {fault}", cluster=cluster.cluster, severity="SEV2"
    )
    _drop_node_checks()
    snapshot, _ = snapshot_start(incident=incident, by=bob)

    def finished():
        status = Snapshot.objects.values_list("status", flat=True).get(pk=snapshot.pk)
        return status in (SnapshotStatus.DONE, SnapshotStatus.FAILED)

    wait_for(finished, timeout=300, interval=0.5, what=f"the {fault} farm's verdict")
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    failed = dict(
        snapshot.collections.filter(status=NodeStatus.FAILED).values_list("node_name", "reason")
    )
    if fault == "node-down":
        assert list(failed) == [expected["fault_node"]]
        assert failed[expected["fault_node"]].startswith("unreachable")
    else:
        assert failed == {}

    diagnosis = snapshot.read_diagnosis()
    assert_planted_fault(diagnosis, expected)

    # One SSH session per node answered, none refused; on a loaded machine a visit can run
    # out of one of its SSH timeouts and be visited again (the worker's log says so), and
    # only such a retry may add a session (with or without its probe, then refused).
    answered = NODES - len(failed)
    attempts = dict(snapshot.collections.values_list("node_name", "attempts"))
    retries = sum(n - 1 for node, n in attempts.items() if node not in failed)
    wait_for(lambda: running.stats()["probes"] >= answered, timeout=10, what="the farm's count")
    stats = running.stats()
    counts = {k: stats[k] for k in ("sessions", "probes", "refused")}
    assert answered <= stats["sessions"] <= answered + retries, (counts, retries)
    assert stats["probes"] <= answered + retries, (counts, retries)
    assert stats["refused"] <= retries, (counts, retries)

    # Visited at once: each node's visit, from its own start to its last byte (the collector's
    # own record), overlaps many others; one at a time per process would be at most 2 here.
    evidence = selectors.snapshot_evidence(snapshot)
    intervals = []
    for node in evidence.nodes:
        seconds = SECONDS.match(node.system.get("collection", ""))
        if seconds and node.collected_at:
            start = node.collected_at
            intervals.append((start, start + timedelta(seconds=float(seconds.group(1)))))
    assert len(intervals) == answered
    assert _most_at_once(intervals) >= 16


def _drop_node_checks() -> None:
    """The import asked for a check of each new node (one connection each, on the ssh queue,
    ahead of the snapshot): not what this test measures."""
    from console.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("ssh")


def _most_at_once(intervals) -> int:
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most
