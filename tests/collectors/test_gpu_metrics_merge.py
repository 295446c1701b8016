"""The GPU's hour from Prometheus reaches the verdict without any node being parsed again: the
series are stored beside the nodes' stored parses (kept), and the merge reads them as each
node's side input. The verdict is the one today's path gave (each such node's parse deleted,
the node parsed again from its artifacts with the series among them): compared here, JSON for
JSON, on a four-node snapshot with DCGM series for two nodes (one of them with the probe's
nvidia-smi samples too, which DCGM's hour replaces) and the probe's samples alone on a third."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench import prometheus_stub
from bench.bench_analysis import build_snapshot
from collectors import gpumetrics, nodeparse
from collectors.models import NodeParseRecord, Snapshot
from collectors.services import snapshot_analyse, snapshot_store_bundle
from incidents.services import incident_open
from tests.analysis.test_gpu_shape import _loop

pytestmark = pytest.mark.django_db

WITH_DCGM = {"node-000": 8, "node-001": 8}


def _dcgm(host: str, gpu: int, metric: str, at: float) -> float | None:
    """node-000: every GPU flat at 100 %; node-001: GPU 3 idle holding memory, the rest flat."""
    idle = host == "node-001" and gpu == 3
    return {
        "DCGM_FI_DEV_GPU_UTIL": 0.0 if idle else 100.0,
        "DCGM_FI_DEV_FB_USED": 30_000.0,
        "DCGM_FI_DEV_POWER_USAGE": 90.0 if idle else 310.5,
        "DCGM_FI_DEV_XID_ERRORS": 0.0,
    }[metric]


def _snapshot(bob, cluster, url: str, title: str) -> Snapshot:
    cluster.prometheus_url = url
    cluster.save()
    evidence = build_snapshot(32, 4, stuck_rank=9)
    samples = _loop({gpu: [100, 0, 97, 3] for gpu in range(8)})  # moving: "busy"
    nodes = [
        replace(n, system={**n.system, "nvidia-smi samples": samples})
        if n.node in ("node-000", "node-002") else n
        for n in evidence.nodes
    ]  # fmt: skip
    evidence = replace(evidence, nodes=nodes)
    incident = incident_open(opened_by=bob, title=title, cluster=cluster, severity="SEV2")
    snapshot = snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)
    # Each node's parse stored as its ssh worker stores it, before any series exist.
    by_name = {n.node: n for n in evidence.nodes}
    rows = snapshot.collections.values_list("pk", "node_name")
    nodeparse.node_parses_store(
        snapshot_id=snapshot.pk, nodes=[(pk, name, by_name[name]) for pk, name in rows]
    )
    assert NodeParseRecord.objects.filter(collection__snapshot=snapshot).count() == 4
    return snapshot


def _verdict(snapshot: Snapshot) -> dict:
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    assert snapshot.status == "done", snapshot.error
    return snapshot.whole_diagnosis()


def test_the_series_reach_the_verdict_as_a_parse_again_would_give_it(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        today = _snapshot(bob, cluster, url, "today's path")
        assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=today.pk) == 2
        # Today's path: the nodes with series parsed again from their artifacts.
        NodeParseRecord.objects.filter(
            collection__snapshot=today, collection__node_name__in=list(WITH_DCGM)
        ).delete()
        now = _snapshot(bob, cluster, url, "side input")
        assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=now.pk) == 2

    merge = nodeparse.snapshot_parses(now)
    assert (merge.stored, merge.parsed_here) == (4, 0)  # no node parsed again
    assert nodeparse.snapshot_parses(today).parsed_here == 2
    expected, got = _verdict(today), _verdict(now)
    assert got == expected
    sources = {(row["node"], row["source"]) for row in got["gpu_shape"]}
    assert sources == {("node-000", "dcgm"), ("node-001", "dcgm"), ("node-002", "nvidia-smi")}
    readings = {(row["node"], row["gpu"]): row["reading"] for row in got["gpu_shape"]}
    assert readings[("node-001", 3)] == "idle" and readings[("node-001", 2)] == "spin"
    assert readings[("node-002", 0)] == "busy"


def test_series_stored_again_replace_the_first_and_keep_every_parse(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _snapshot(bob, cluster, url, "twice")
        assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 2
        assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 2
    stored = snapshot.collections.filter(artifacts__name=gpumetrics.DCGM_ARTIFACT)
    assert sorted(stored.values_list("node_name", flat=True)) == sorted(WITH_DCGM)
    assert NodeParseRecord.objects.filter(collection__snapshot=snapshot).count() == 4
    events = snapshot.incident.events.values_list("summary", flat=True)
    assert f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot " \
           "at 30 s steps for 2 of 4 nodes" in events  # fmt: skip
