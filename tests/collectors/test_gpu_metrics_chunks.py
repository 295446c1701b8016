"""A big fleet's GPU hour from Prometheus: asked a chunk of nodes at a time (each answer under
MAX_SERIES and MAX_ANSWER_BYTES), within a budget of points per snapshot (the hour coarser as
the fleet grows, its last minutes still fine), a chunk that fails costing only its nodes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from analysis.gpushape import RECENT_S, parse_dcgm
from bench import prometheus_stub
from collectors import gpumetrics
from collectors.models import Artifact
from core import egress
from tests.collectors.test_gpu_metrics_merge import _snapshot

WHEN = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
GPUS = 8


def _dcgm(host: str, gpu: int, metric: str, at: float) -> float:
    # node-0007's GPU 3 dropped to 0 % two minutes before the snapshot, holding its memory;
    dropped = host == "node-0007" and gpu == 3 and at > WHEN.timestamp() - 120
    values = {"DCGM_FI_DEV_GPU_UTIL": 0.0 if dropped else 100.0, "DCGM_FI_DEV_FB_USED": 30_000.0,
              "DCGM_FI_DEV_POWER_USAGE": 300.0, "DCGM_FI_DEV_XID_ERRORS": 0.0}  # fmt: skip
    return values[metric]


def test_a_small_fleet_reads_the_hour_at_the_configured_step(settings):
    settings.GPU_METRICS_WINDOW_S, settings.GPU_METRICS_STEP_S = 3600, 30
    (whole,) = gpumetrics.windows_before(WHEN, 4 * GPUS * 4)
    assert (whole.step_s, whole.points, whole.end) == (30, 121, WHEN)


def test_the_step_grows_with_the_fleet_and_the_last_minutes_stay_fine(settings):
    settings.GPU_METRICS_WINDOW_S, settings.GPU_METRICS_STEP_S = 3600, 30
    for nodes in (1_000, 4_000, 32_000):
        series = nodes * GPUS * 4
        hour, recent = gpumetrics.windows_before(WHEN, series)
        assert recent.end == WHEN and (WHEN - recent.start).total_seconds() == RECENT_S
        assert hour.end < recent.start and (WHEN - hour.start).total_seconds() == 3600
        assert recent.step_s <= gpumetrics.RECENT_STEP_AT_MOST_S  # a drop in the last minutes
        assert recent.points >= 6 and hour.points >= gpumetrics.HOUR_POINTS_AT_LEAST
        assert hour.step_s > recent.step_s and hour.step_s % recent.step_s == 0
        if nodes == 1_000:
            assert recent.step_s == 30  # the configured step: the budget allows it
            assert series * (hour.points + recent.points) <= gpumetrics.POINTS_BUDGET
    assert gpumetrics.chunk_size([hour, recent]) * gpumetrics.GPUS_A_NODE_AT_MOST <= (
        gpumetrics.MAX_SERIES
    )


def test_a_thousand_nodes_are_read_whole_in_chunks_under_the_answer_bounds(settings, monkeypatch):
    settings.GPU_METRICS_WINDOW_S, settings.GPU_METRICS_STEP_S = 3600, 30
    settings.EGRESS_ALLOW = ["127.0.0.0/8"]
    # The chunks and their bounds are asked here, not the deadline (its own tests): the stub
    # builds ~1 M points in Python, which on a loaded 2-core machine outlasts 3 x 10 s.
    settings.GPU_METRICS_TIMEOUT_S = 120
    answers: list[tuple[int, str]] = []
    real = egress.http_request

    def recorded(*args, **kwargs):
        answer = real(*args, **kwargs)
        answers.append((len(answer.body), kwargs["body"].decode()))
        return answer

    monkeypatch.setattr(egress, "http_request", recorded)
    hosts = {f"node-{i:04d}": GPUS for i in range(1_000)}
    windows = gpumetrics.windows_before(WHEN, len(hosts) * GPUS * 4)
    with prometheus_stub.serving(hosts, _dcgm, apart=True) as url:
        fetched = gpumetrics.dcgm_in_chunks(url, list(hosts), windows)
    assert fetched.unread == {} and set(fetched.by_host) == set(hosts)
    chunks = -(-len(hosts) // gpumetrics.chunk_size(windows))
    assert chunks >= 2 and len(answers) == chunks * 4 * 2  # a POST per chunk, metric, window
    assert max(size for size, _ in answers) < gpumetrics.MAX_ANSWER_BYTES // 2
    assert all(len(series) == GPUS * 4 for series in fetched.by_host.values())
    points = sum(len(s["values"]) for series in fetched.by_host.values() for s in series)
    assert points <= gpumetrics.POINTS_BUDGET
    # What the shape needs: the drop two minutes before, at the fine step; the Xid's maximum
    # over each coarse step (asked for here; read by a real Prometheus in test_gpu_metrics).
    text = json.dumps({"series": fetched.by_host["node-0007"]})
    readings = {s.index: s.reading for s in parse_dcgm("node-0007", text)}
    assert readings[3] == "busy" and readings[0] == "spin"
    assert "max_over_time%28DCGM_FI_DEV_XID_ERRORS" in " ".join(body for _, body in answers)


@pytest.mark.django_db
def test_a_chunk_that_fails_costs_only_its_nodes_and_is_said(bob, cluster, settings, monkeypatch):
    """A hostile Prometheus: one node's answer has thousands of 'GPUs' (past the byte bound,
    cut by the egress policy); its chunk is not read, the other chunk is."""
    settings.EGRESS_ALLOW = ["127.0.0.0/8"]
    monkeypatch.setattr(gpumetrics, "MAX_ANSWER_BYTES", 1024 * 1024)
    monkeypatch.setattr(gpumetrics, "chunk_size", lambda windows: 2)
    hosts = {"node-000": 3_000, "node-001": GPUS, "node-002": GPUS, "node-003": GPUS}
    with prometheus_stub.serving(hosts, _dcgm) as url:
        snapshot = _snapshot(bob, cluster, url, "hostile")
        assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 2
    stored = Artifact.objects.filter(collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT)
    assert sorted(stored.values_list("collection__node_name", flat=True)) == [
        "node-002", "node-003"
    ]  # fmt: skip
    events = list(snapshot.incident.events.values_list("summary", flat=True))
    assert f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot " \
           "at 30 s steps for 2 of 4 nodes; 2 nodes not read (not a Prometheus answer)" in (
        events
    )  # fmt: skip


def test_a_slow_prometheus_costs_the_chunks_past_the_deadline_only(settings, monkeypatch):
    """Each POST is bounded by its timeout; all of them by three timeouts: a query that took
    that long leaves the chunks after it not asked, said as timed out."""
    settings.GPU_METRICS_WINDOW_S, settings.GPU_METRICS_STEP_S = 3600, 30
    settings.GPU_METRICS_TIMEOUT_S = 10
    now = [0.0]
    monkeypatch.setattr(gpumetrics, "_clock", lambda: now[0])
    monkeypatch.setattr(gpumetrics, "chunk_size", lambda windows: 2)
    asked: list[str] = []

    def slow(base_url, query, window):  # a Prometheus answering each POST in 4 s, empty
        asked.append(query)
        now[0] += 4.0
        return []

    monkeypatch.setattr(gpumetrics, "query_range", slow)
    hosts = [f"node-{i}" for i in range(6)]
    window = gpumetrics.window_before(WHEN)
    fetched = gpumetrics.dcgm_in_chunks("http://prometheus:9090", hosts, [window])
    assert len(asked) == 8  # 4 metrics x 2 chunks fit before 30 s; the 9th POST is not begun
    assert fetched.unread == dict.fromkeys(["node-4", "node-5"], "timed out")
