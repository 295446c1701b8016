"""After the last node on a cluster with a Prometheus: the analysis task of a snapshot whose
nodes all have DCGM series, today's way (the series as each node's `dcgm` artifact, the node's
stored parse kept, the merge reading the series beside it) against the way before (each such
node's stored parse deleted, so the merge parsed the node again from its artifacts: `--before`
does exactly that after the series are stored, and puts the parses back after each run).

The snapshot is bench_verdict's (real captured evidence, 8 ranks a node, each node's parse
stored as its ssh worker stores it), with its artifacts stored too (the parse again reads
them). Prometheus is bench/prometheus_stub.py on loopback: a series per GPU (8 a node) and
metric, a point every step asked (`--step` is GPU_METRICS_STEP_S, default 30 s as the
console's; before a10bb89 the 1,000 nodes' answer at 30 s passed MAX_ANSWER_BYTES). CPU is
this process's (time.process_time), the load average beside it; the stub's own CPU is its
process's, apart.

`--click` (click22): the series read as a click reads them, beside the node visits
(collectors/gpuclick.py, `fetch_at_click`, timed apart: it is not after the last node), then
the analysis task after the last node, which finds them in (since gpu22b each node's series
kept parsed too, `GpuSeriesRecord`). `--dump PATH` writes the last run's diagnosis JSON
(compare the two ways' verdicts). The series given to the stored parses (`series_onto`, inside
the read back) and the top-up after the last node are timed apart too.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hd_gpu22_bench \\
        .venv/bin/python bench/bench_gpu_metrics.py --nodes 1000 --repeat 3 [--before]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HANGDESK_EGRESS_ALLOW", "127.0.0.0/8")  # the stub is on loopback
from bench import bench_verdict, prometheus_stub  # noqa: E402
from bench.consolekit import console_database  # noqa: E402

GPUS = 8
# bench_verdict's steps, and the GPU's own inside them (a tree without one times nothing).
GPU_STEPS = (
    ("  of it, GPU series onto parses", "collectors.gpumetrics", "series_onto"),
    ("GPU metrics topped up (click)", "collectors.gpumetrics", "snapshot_gpu_metrics_top_up"),
)


def _dcgm(host: str, gpu: int, metric: str, at: float) -> float:
    # Every GPU flat at 100 % but one node's GPU 3, idle with its memory held.
    idle = host == "node-001" and gpu == 3
    values = {"DCGM_FI_DEV_GPU_UTIL": 0.0 if idle else 100.0, "DCGM_FI_DEV_FB_USED": 30_000.0}
    return values.get(metric, 0.0)


def build(ranks: int, nodes: int):
    """bench_verdict's snapshot (cluster "bench-verdict-R-N-gpu"), its artifacts stored too."""
    from bench.bench_analysis import build_snapshot
    from collectors import node_work

    snapshot = bench_verdict.build(ranks, nodes, name=_cluster_name(ranks, nodes))
    evidence = build_snapshot(ranks, nodes, stuck_rank=ranks * 3 // 10)
    by_name = {n.node: n for n in evidence.nodes}
    node_work.artifacts_insert(
        row
        for pk, name in snapshot.collections.values_list("pk", "node_name")
        for row in node_work.artifact_rows(pk, by_name[name])
    )
    return snapshot


def _cluster_name(ranks: int, nodes: int) -> str:
    return bench_verdict._cluster_name(ranks, nodes) + "-gpu"


def _find(ranks: int, nodes: int):
    from collectors.models import Snapshot

    name = _cluster_name(ranks, nodes)
    return Snapshot.objects.filter(cluster__name=name).order_by("pk").last()


def _parses_deleted_after_store():
    """The way before: the nodes that got series lose their stored parse (put back later)."""
    from collectors import gpumetrics
    from collectors.models import NodeParseRecord

    original = getattr(gpumetrics, "series_store", None)
    if original is None:  # a tree from before it (a738d84's parent): it deletes them itself
        return

    def store(nodes, window, by_host):
        stored = original(nodes, window, by_host)
        ids = [nodes[h].pk for h in by_host if h in nodes]
        NodeParseRecord.objects.filter(collection_id__in=ids).delete()
        return stored

    gpumetrics.series_store = store


def _fetch_at_click(snapshot) -> tuple[float, float]:
    """The click's read, as its task makes it: (CPU, wall) seconds."""
    import time

    from collectors import gpuclick
    from collectors.models import Snapshot

    Snapshot.objects.filter(pk=snapshot.pk).update(gpu_metrics=gpuclick.READING)
    wall, cpu = time.perf_counter(), time.process_time()
    gpuclick.fetch_at_click(snapshot_id=snapshot.pk)
    return time.process_time() - cpu, time.perf_counter() - wall


def run(snapshot, before: bool, click: bool = False):
    from collectors.models import NodeParseRecord

    kept = list(NodeParseRecord.objects.filter(collection__snapshot=snapshot))
    try:
        fetched = _fetch_at_click(snapshot) if click else None
        timer = bench_verdict.run_once(snapshot)
        if fetched:
            label = "at the click: fetch, store (apart)"
            timer.cpu[label], timer.wall[label] = fetched
        return timer
    finally:
        if before:
            NodeParseRecord.objects.filter(collection__snapshot=snapshot).delete()
            for record in kept:
                record.pk = None
            NodeParseRecord.objects.bulk_create(kept, batch_size=500)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--step", type=float, default=30.0, help="GPU_METRICS_STEP_S")
    parser.add_argument("--timeout", type=float, help="GPU_METRICS_TIMEOUT_S (a loaded host)")
    parser.add_argument("--before", action="store_true", help="the parses deleted, as before")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--click", action="store_true", help="read at the click, as click22")
    parser.add_argument("--dump", type=Path, help="the last diagnosis's JSON, to this file")
    parser.add_argument("--profile", action="store_true", help="one run under cProfile")
    args = parser.parse_args()
    console_database(flush=False)
    from django.conf import settings

    settings.GPU_METRICS_STEP_S = args.step
    if args.timeout:
        settings.GPU_METRICS_TIMEOUT_S = args.timeout
    bench_verdict.STEPS += GPU_STEPS
    ranks = args.nodes * GPUS
    snapshot = None if args.rebuild else _find(ranks, args.nodes)
    snapshot = snapshot or build(ranks, args.nodes)
    if args.before:
        _parses_deleted_after_store()
    hosts = {f"node-{i:03d}": GPUS for i in range(args.nodes)}
    runs = []
    with prometheus_stub.serving(hosts, _dcgm, apart=True) as url:
        snapshot.cluster.prometheus_url = url
        snapshot.cluster.save(update_fields=["prometheus_url"])
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.runcall(run, snapshot, args.before, args.click)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            return
        for _ in range(args.repeat):
            load = os.getloadavg()[0]
            runs.append((run(snapshot, args.before, args.click), load, os.getloadavg()[0]))
    snapshot.refresh_from_db()
    sources = {row["source"] for row in snapshot.diagnosis["gpu_shape"]}
    way = "before (parses deleted)" if args.before else "now (series beside the parses)"
    way += ", read at the click" if args.click else ""
    if args.dump:
        import json

        args.dump.write_text(json.dumps(snapshot.whole_diagnosis(), sort_keys=True))
    print(f"{way}: nodes={args.nodes} ranks={ranks} step={args.step:g} s, gpu_shape {sources}")
    for label in sorted(runs[0][0].wall, key=lambda label: label.startswith("at the click")):
        cpu = [r[0].cpu.get(label, 0.0) for r in runs]
        wall = [r[0].wall.get(label, 0.0) for r in runs]
        print(
            f"  {label:>32}: CPU {statistics.median(cpu):.3f} s ({min(cpu):.3f}), "
            f"wall {statistics.median(wall):.3f} s ({min(wall):.3f})"
        )
    print("  load before → after: " + ", ".join(f"{r[1]:.1f} → {r[2]:.1f}" for r in runs))
    said = snapshot.incident.events.filter(summary__contains="GPU metrics").order_by("pk").last()
    print(f"  timeline: {said.summary if said else '-'}")


if __name__ == "__main__":
    main()
