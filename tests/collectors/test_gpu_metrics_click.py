"""GPU metrics read from the click (collectors/gpuclick.py): the fetch done before the last node
is in (the verdict uses the series, the one the read after the last node gave), done after it
(the verdict is made without them after a bounded wait, the timeline says so, and it is made
again once they land), and failing (its message as before, the verdict never held). The
Prometheus is bench/prometheus_stub.py on loopback, through the egress policy; the snapshots
are stored with each node's parse as its ssh worker stores it, then marked as a click marks
them."""

from __future__ import annotations

import pytest

from bench import prometheus_stub
from collectors import gpuclick, gpumetrics, services
from collectors.models import Artifact, GpuSeriesRecord, NodeStatus, Snapshot, SnapshotStatus
from tests.collectors.test_gpu_metrics_merge import WITH_DCGM, _dcgm, _snapshot, _verdict
from tests.helpers import free_port

pytestmark = pytest.mark.django_db


def _clicked(bob, cluster, url: str, title: str) -> Snapshot:
    snapshot = _snapshot(bob, cluster, url, title)
    ids = tuple(snapshot.collections.values_list("pk", flat=True))
    assert gpuclick.click_fetch_due(snapshot, ids)
    assert not gpuclick.click_fetch_due(snapshot, ids)  # once
    return snapshot


def _state(snapshot: Snapshot) -> str:
    snapshot.refresh_from_db(fields=["gpu_metrics"])
    return snapshot.gpu_metrics


def _events(snapshot: Snapshot) -> list[str]:
    return list(snapshot.incident.events.order_by("pk").values_list("summary", flat=True))


def _after_the_last_node(bob, cluster, url: str) -> dict:
    """Today's path on a twin snapshot: the series read after the last node."""
    twin = _snapshot(bob, cluster, url, "read after the last node")
    gpuclick.series_before_analysis(snapshot_id=twin.pk)
    return _verdict(twin)


def test_a_fetch_done_before_the_last_node_gives_the_verdict_its_series(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        expected = _after_the_last_node(bob, cluster, url)
        snapshot = _clicked(bob, cluster, url, "read at the click")
        assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is False
        assert _state(snapshot) == gpuclick.READ
        assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is False  # redelivered: nothing
    gpuclick.series_before_analysis(snapshot_id=snapshot.pk, wait_s=30)  # no wait: it is in
    got = _verdict(snapshot)
    assert got == expected
    assert {row["source"] for row in got["gpu_shape"] if row["node"] in WITH_DCGM} == {"dcgm"}
    said = [e for e in _events(snapshot) if "GPU metrics" in e]
    assert said == [
        f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot at "
        "30 s steps for 2 of 4 nodes"
    ]


def test_a_fetch_landing_after_the_last_node_is_waited_for_briefly_then_used_again(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        expected = _after_the_last_node(bob, cluster, url)
        snapshot = _clicked(bob, cluster, url, "read late")
        gpuclick.series_before_analysis(snapshot_id=snapshot.pk, wait_s=0.3)
        assert _state(snapshot) == gpuclick.MISSED
        first = _verdict(snapshot)
        assert "dcgm" not in {row["source"] for row in first["gpu_shape"]}
        assert first != expected
        assert f"Snapshot {snapshot.pk}: GPU metrics still being read: this verdict is made " \
               "without them, and made again once they are in" in _events(snapshot)  # fmt: skip
        # The fetch lands: the verdict is to be made again, once.
        assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is True
        assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is False
    assert _state(snapshot) == gpuclick.READ
    assert gpuclick.reanalyse_with_series(snapshot_id=snapshot.pk) == "done"
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.DONE
    assert snapshot.whole_diagnosis() == expected
    assert snapshot.rank_overview == services.rank_overview(expected)
    assert _events(snapshot)[-1] == (
        f"Snapshot {snapshot.pk}: verdict made again with the GPU metrics — {expected['summary']}"
    )


def test_a_verdict_still_being_made_is_made_again_after_it(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _clicked(bob, cluster, url, "still analysing")
        gpuclick.series_before_analysis(snapshot_id=snapshot.pk, wait_s=0)
        assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is True
    assert gpuclick.reanalyse_with_series(snapshot_id=snapshot.pk) == "later"
    _verdict(snapshot)
    assert gpuclick.reanalyse_with_series(snapshot_id=snapshot.pk) == "done"


def test_a_fetch_that_fails_says_why_and_never_holds_the_verdict(bob, cluster):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens
    snapshot = _clicked(bob, cluster, url, "no prometheus")
    gpuclick.series_before_analysis(snapshot_id=snapshot.pk, wait_s=0)
    assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is False  # nothing to add
    assert _state(snapshot) == gpuclick.READ
    assert _verdict(snapshot)["classification"]
    said = [e for e in _events(snapshot) if "GPU metrics" in e]
    assert said[0].endswith("GPU metrics still being read: this verdict is made without them, "
                            "and made again once they are in")  # fmt: skip
    assert said[1].startswith(f"Snapshot {snapshot.pk}: GPU metrics from Prometheus not read: ")


def test_a_node_that_gave_no_evidence_keeps_no_series_read_at_the_click(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _clicked(bob, cluster, url, "a node failed")
        gpuclick.fetch_at_click(snapshot_id=snapshot.pk)
    snapshot.collections.filter(node_name="node-001").update(status=NodeStatus.FAILED)
    assert gpumetrics.snapshot_gpu_metrics_top_up(snapshot_id=snapshot.pk) == 0
    kept = Artifact.objects.filter(collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT)
    assert list(kept.values_list("collection__node_name", flat=True)) == ["node-000"]
    parsed = GpuSeriesRecord.objects.filter(collection__snapshot=snapshot)  # their parses too
    assert list(parsed.values_list("collection__node_name", flat=True)) == ["node-000"]


def test_a_snapshot_without_a_prometheus_or_nodes_reads_nothing_at_the_click(bob, cluster):
    snapshot = _snapshot(bob, cluster, "", "no url")
    assert not gpuclick.click_fetch_due(snapshot, (1,))
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        other = _snapshot(bob, cluster, url, "no nodes")
        assert not gpuclick.click_fetch_due(other, ())
    assert _state(snapshot) == _state(other) == gpuclick.NONE


def test_a_node_failed_before_the_read_lands_gets_no_series(bob, cluster):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _clicked(bob, cluster, url, "failed first")
        snapshot.collections.filter(node_name="node-001").update(status=NodeStatus.FAILED)
        gpuclick.fetch_at_click(snapshot_id=snapshot.pk)
    kept = Artifact.objects.filter(collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT)
    assert list(kept.values_list("collection__node_name", flat=True)) == ["node-000"]
