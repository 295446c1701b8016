"""GPU metrics read from the click through the real workers: the click queues the read on the
analysis queue beside the node visit, and the verdict after the last node uses it when it is
in; when the Prometheus is still answering, the verdict comes without it after a bounded wait,
and is made again once it lands. The node refuses its connection (its visit fails after its
retry, a few seconds); the Prometheus is bench/prometheus_stub.py on loopback, here."""

from __future__ import annotations

import threading

import pytest

from bench import prometheus_stub
from clusters.services import cluster_create, node_create
from collectors import gpuclick, gpumetrics
from collectors.models import Artifact, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.conftest import HOST_KEY
from tests.helpers import free_port, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _start(bob, url: str, name: str) -> Snapshot:
    cluster = cluster_create(name=name)
    cluster.prometheus_url = url
    cluster.save(update_fields=["prometheus_url"])
    node_create(
        cluster=cluster, name="gone-0", address="127.0.0.1", port=free_port(),
        username="root", key_path="/etc/hangdesk/id_ed25519", host_key=HOST_KEY,
    )  # fmt: skip
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster)
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    return snapshot


def _summaries(snapshot: Snapshot) -> list[str]:
    return list(snapshot.incident.events.order_by("pk").values_list("summary", flat=True))


def _done(snapshot: Snapshot) -> Snapshot:
    return wait_for(
        lambda: Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.DONE).first(),
        timeout=90,
        what="the verdict",
    )


def test_read_at_the_click_and_in_before_the_last_node(celery_worker_process, bob):
    with prometheus_stub.serving({"gone-0": 8}, lambda *_: 100.0) as url:
        snapshot = _start(bob, url, "gpu-click")
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


def test_a_prometheus_still_answering_costs_the_verdict_a_bounded_wait(celery_worker_process, bob):
    answer = threading.Event()

    def held(*_):
        answer.wait(60)  # the first query's answer held until the verdict went without it
        return 100.0

    with prometheus_stub.serving({"gone-0": 8}, held) as url:
        snapshot = _start(bob, url, "gpu-late")
        wait_for(
            lambda: Snapshot.objects.filter(pk=snapshot.pk, gpu_metrics=gpuclick.MISSED).exists(),
            timeout=60,
            what="the verdict made without the GPU metrics",
        )
        answer.set()
        _done(snapshot)
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
    # The read lands while that verdict is being stored, or after: either way, it comes once.
    finished, read = sorted(said[1:3])  # " finished" sorts before ": GPU"
    assert finished.startswith(f"Snapshot {snapshot.pk} finished: 0 nodes ok, 1 failed")
    assert read.startswith(f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour")
    assert said[3].startswith(f"Snapshot {snapshot.pk}: verdict made again with the GPU metrics")
    assert Snapshot.objects.get(pk=snapshot.pk).gpu_metrics == gpuclick.READ
