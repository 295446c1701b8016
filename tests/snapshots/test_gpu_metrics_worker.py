"""GPU metrics read from the click through the real workers: the click queues the read on the
early queue beside the node visit, and the verdict after the last node uses it when it is
in (a node refusing its connection: its visit fails after its retry, its series dropped); the
analysis task finding the read still out waits a bounded time, goes without it, and the read
landing after makes the verdict again. The Prometheus is bench/prometheus_stub.py on loopback."""

from __future__ import annotations

import pytest

from bench import prometheus_stub
from collectors import gpuclick, gpumetrics, tasks
from collectors.models import Artifact, Snapshot, SnapshotStatus
from tests.collectors.test_gpu_metrics_merge import WITH_DCGM, _dcgm, _snapshot
from tests.helpers import wait_for
from tests.snapshotkit import REFUSING_NODE, refused_snapshot

pytestmark = pytest.mark.django_db(transaction=True)


def _summaries(snapshot: Snapshot) -> list[str]:
    return list(snapshot.incident.events.order_by("pk").values_list("summary", flat=True))


def _done(snapshot: Snapshot) -> Snapshot:
    return wait_for(
        lambda: Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.DONE).first(),
        timeout=90,
        what="the verdict",
    )


def test_read_at_the_click_and_in_before_the_last_node(celery_worker_process, bob):
    with prometheus_stub.serving({REFUSING_NODE: 8}, lambda *_: 100.0) as url:
        snapshot = refused_snapshot(bob, "gpu-click", prometheus_url=url)
        done = _done(snapshot)
    assert done.gpu_metrics == gpuclick.READ
    said = [s for s in _summaries(snapshot) if "GPU metrics" in s]
    assert said == [
        f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot at "
        "30 s steps for 1 of 1 nodes"
    ]
    # Read by the node's name at the click; the node gave no evidence, so its series went.
    assert not Artifact.objects.filter(
        collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT
    ).exists()


def test_a_prometheus_still_answering_costs_the_verdict_a_bounded_wait(
    celery_worker_process, bob, cluster
):
    # Four nodes in with their parses (a bundle's snapshot, marked as a click marks it): the
    # analysis task waits its bounded time, goes without the series; the read, queued after,
    # lands and the verdict is made again with them, through the workers' own tasks.
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _snapshot(bob, cluster, url, "read late")
        Snapshot.objects.filter(pk=snapshot.pk).update(gpu_metrics=gpuclick.READING)
        tasks.analyse_snapshot.delay(snapshot.pk)
        without = _done(snapshot)
        assert without.gpu_metrics == gpuclick.MISSED
        assert "dcgm" not in {row["source"] for row in without.diagnosis["gpu_shape"]}
        tasks.read_gpu_metrics.delay(snapshot.pk)
        wait_for(
            lambda: any("verdict made again" in s for s in _summaries(snapshot)),
            timeout=60,
            what="the verdict made again with them",
        )
    said = [s for s in _summaries(snapshot) if "GPU metrics" in s or "finished" in s]
    assert said[0] == (
        f"Snapshot {snapshot.pk}: GPU metrics still being read: this verdict is made without "
        "them, and made again once they are in"
    )
    assert said[1].startswith(f"Snapshot {snapshot.pk} finished: 4 nodes ok, 0 failed")
    assert said[2].startswith(f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour")
    assert said[3].startswith(f"Snapshot {snapshot.pk}: verdict made again with the GPU metrics")
    again = Snapshot.objects.get(pk=snapshot.pk)
    assert again.gpu_metrics == gpuclick.READ
    sources = {(row["node"], row["source"]) for row in again.diagnosis["gpu_shape"]}
    assert ("node-000", "dcgm") in sources and ("node-001", "dcgm") in sources
