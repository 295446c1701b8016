"""After the last node: the analysis task of a 4,000-node, 32,000-rank snapshot, step by step,
without the farm (issue 22: "the verdict stored under 2 s after the last node").

The snapshot is built once in PostgreSQL: bench_analysis's snapshot of real captured evidence
(8 ranks a node, one rank stuck), each node's parse made and stored as its ssh worker stores
it (`analysis.nodemap`, JSON, zlib: `NodeParseRecord`). Each run puts it back to "analysing"
and runs the analysis task itself (`collectors.tasks.analyse_snapshot`, in this process), its
steps timed where the task calls them: CPU (`time.process_time`, this process only: not
PostgreSQL's) and wall, per step, and the load average beside them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hd_tail22_bench \\
        .venv/bin/python bench/bench_verdict.py --ranks 32000 --nodes 4000 --repeat 3
    ... --profile        # one run under cProfile, by cumulative time
    ... --rebuild        # build the snapshot again, what was built before removed (its
                         # incidents too); else the one built before is reused
    ... --previous       # with a previous snapshot of the incident to compare with (its
                         # artifacts and its nodes' parses stored, as the fleet leaves them:
                         # the analysis merges its parses, `services.compared_snapshot`)
    ... --previous --previous-artifacts-only   # its parses not stored (a bundle's): the
                         # analysis parses it from its artifacts
    ... --store-batches 16   # the map's side instead: `nodeparse.node_parses_store` on that
                         # many batches of 32 of the snapshot's nodes, as its ssh workers
                         # store them (CPU a node; the snapshot's other rows all in)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.consolekit import console_database, console_settings  # noqa: E402

console_settings()

# The steps, as the task calls them: (label, module path, attribute).
STEPS = (
    ("GPU metrics (none here)", "collectors.gpumetrics", "snapshot_gpu_metrics_store"),
    ("read back the parses", "collectors.nodeparse", "snapshot_parses"),
    ("previous snapshot, merged", "collectors.services", "compared_snapshot"),
    ("merge + facts + rules", "analysis", "diagnose_parses"),
    ("rank overview, masked", "collectors.services", "masked_rank_overview"),
    ("diagnosis to JSON, masked", "collectors.services", "masked_diagnosis"),
    ("store + finish (transaction)", "collectors.services", "_snapshot_finish"),
)


def _load() -> float:
    return os.getloadavg()[0]


def _cluster_name(ranks: int, nodes: int, previous: bool = False, parses: bool = True) -> str:
    name = f"bench-verdict-{ranks}-{nodes}" + ("-previous" if previous else "")
    return name + ("" if parses or not previous else "-artifacts")


def cluster_remove(name: str) -> None:
    """What a build made before under that cluster name: its snapshots and incidents first
    (they protect the cluster from deletion), then the cluster."""
    from clusters.models import Cluster
    from collectors.models import Snapshot
    from incidents.models import Incident

    Snapshot.objects.filter(cluster__name=name).delete()
    Incident.objects.filter(cluster__name=name).delete()
    Cluster.objects.filter(name=name).delete()


def build(ranks: int, nodes: int, previous: bool = False, parses: bool = True,
          name: str = ""):  # fmt: skip
    """The snapshot, its node rows and their stored parses, as the fleet leaves them, on a
    cluster of its own (`name`, else the shape's), whatever was built there before removed."""
    from bench.bench_analysis import build_snapshot
    from clusters.models import Cluster
    from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
    from incidents.services import incident_open

    started = time.perf_counter()
    name = name or _cluster_name(ranks, nodes, previous, parses)
    cluster_remove(name)
    evidence = build_snapshot(ranks, nodes, stuck_rank=ranks * 3 // 10)
    cluster = Cluster.objects.create(name=name, expected_world_size=ranks)
    incident = incident_open(opened_by=None, title="bench verdict", cluster=cluster)
    if previous:
        _previous_build(incident, evidence, parses)
    snapshot = Snapshot.objects.create(
        incident=incident, cluster=cluster, source="bench", status=SnapshotStatus.ANALYSING,
        collected_at=evidence.collected_at, expected_world_size=ranks,
    )  # fmt: skip
    collections = NodeCollection.objects.bulk_create(
        NodeCollection(snapshot=snapshot, node_name=n.node, address="(bench)",
                       status=NodeStatus.OK)
        for n in evidence.nodes
    )  # fmt: skip
    _parses_store(collections, evidence.nodes, evidence.collected_at)
    print(f"built snapshot {snapshot.pk} in {time.perf_counter() - started:.0f} s", flush=True)
    return snapshot


def _parses_store(collections, nodes, collected_at) -> None:
    """Each node's parse, stored as its ssh worker stores it."""
    from analysis import nodemap
    from analysis.signals.place import host_map
    from collectors.models import NodeParseRecord

    hosts = host_map((n.node, n.hostname) for n in nodes)
    records = []
    for collection, node in zip(collections, nodes, strict=True):
        parse = nodemap.map_node(node, hosts=hosts, snapshot_collected_at=collected_at)
        raw = json.dumps(nodemap.to_json(parse), separators=(",", ":")).encode()
        records.append(
            NodeParseRecord(collection=collection, version=nodemap.NODE_PARSE_VERSION,
                            hostname=node.hostname, compressed=zlib.compress(raw, 1),
                            size=len(raw))
        )  # fmt: skip
    NodeParseRecord.objects.bulk_create(records, batch_size=500)


def _previous_build(incident, evidence, parses: bool) -> None:
    """The incident's snapshot before, two minutes earlier: the same evidence, stored as
    artifacts (analysed: "done"), with its nodes' parses unless `parses` is false, as the
    analysis finds a previous snapshot to compare with."""
    from datetime import timedelta

    from collectors import node_work
    from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus

    snapshot = Snapshot.objects.create(
        incident=incident, cluster=incident.cluster, source="bench", status=SnapshotStatus.DONE,
        collected_at=evidence.collected_at - timedelta(minutes=2),
        expected_world_size=evidence.expected_world_size,
    )  # fmt: skip
    collections = NodeCollection.objects.bulk_create(
        NodeCollection(snapshot=snapshot, node_name=n.node, address="(bench)",
                       status=NodeStatus.OK)
        for n in evidence.nodes
    )  # fmt: skip
    node_work.artifacts_insert(
        row
        for collection, node in zip(collections, evidence.nodes, strict=True)
        for row in node_work.artifact_rows(collection.pk, node)
    )
    if parses:
        _parses_store(collections, evidence.nodes, snapshot.collected_at)


def find(ranks: int, nodes: int, previous: bool = False, parses: bool = True):
    """The snapshot measured: the cluster's last (a previous one is made before it)."""
    from collectors.models import Snapshot

    name = _cluster_name(ranks, nodes, previous, parses)
    return Snapshot.objects.filter(cluster__name=name).order_by("pk").last()


def reset(snapshot) -> None:
    """Back to "analysing", as the last node's transaction leaves it."""
    from collectors.models import Snapshot, SnapshotStatus

    Snapshot.objects.filter(pk=snapshot.pk).update(
        status=SnapshotStatus.ANALYSING, diagnosis=None, rank_overview=None, finished_at=None,
        provisional=None, error="",
    )  # fmt: skip


TICKS = os.sysconf("SC_CLK_TCK")


def _backend_cpu(pid: int) -> float:
    """User + system seconds of the PostgreSQL backend serving this process (same machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Timer:
    """Wraps the task's steps where it looks them up; sums CPU and wall per step, and the CPU
    of the PostgreSQL backend that serves them."""

    def __init__(self, backend_pid: int) -> None:
        self.backend_pid = backend_pid
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        self.pg: dict[str, float] = {}
        self._undo: list = []
        # When the last step (the finish: the verdict's transaction) returned: wall, CPU.
        self.finished_at, self.finished_cpu = 0.0, 0.0

    def install(self) -> None:
        import importlib

        for label, module_name, attribute in STEPS:
            module = importlib.import_module(module_name)
            original = getattr(module, attribute)
            setattr(module, attribute, self._wrapped(label, original))
            self._undo.append((module, attribute, original))

    def uninstall(self) -> None:
        for module, attribute, original in reversed(self._undo):
            setattr(module, attribute, original)

    def _wrapped(self, label, original):
        def timed(*args, **kwargs):
            wall, cpu, pg = time.perf_counter(), time.process_time(), self.pg_now()
            try:
                return original(*args, **kwargs)
            finally:
                self.cpu[label] = self.cpu.get(label, 0.0) + time.process_time() - cpu
                self.wall[label] = self.wall.get(label, 0.0) + time.perf_counter() - wall
                self.pg[label] = self.pg.get(label, 0.0) + self.pg_now() - pg
                self.finished_at, self.finished_cpu = time.perf_counter(), time.process_time()

        return timed

    def pg_now(self) -> float:
        return _backend_cpu(self.backend_pid)


def run_once(snapshot) -> Timer:
    from django.db import connection

    from collectors import tasks

    reset(snapshot)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    timer = Timer(backend)
    timer.install()
    try:
        wall, cpu, pg = time.perf_counter(), time.process_time(), timer.pg_now()
        tasks.analyse_snapshot(snapshot.pk)
        timer.cpu["the task, all of it"] = time.process_time() - cpu
        timer.wall["the task, all of it"] = time.perf_counter() - wall
        timer.pg["the task, all of it"] = timer.pg_now() - pg
        # The verdict is stored (committed) when the finish returns; what follows is the
        # task freeing what it built.
        timer.cpu["verdict stored (from the start)"] = timer.finished_cpu - cpu
        timer.wall["verdict stored (from the start)"] = timer.finished_at - wall
    finally:
        timer.uninstall()
    snapshot.refresh_from_db(fields=["status", "error"])
    assert snapshot.status == "done", (snapshot.status, snapshot.error)
    return timer


def _stored(snapshot) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(diagnosis), octet_length(diagnosis::text), "
            "pg_column_size(rank_overview) FROM collectors_snapshot WHERE id = %s",
            [snapshot.pk],
        )
        stored, text, overview = cursor.fetchone()
    return (
        f"diagnosis stored {stored / 1e6:.2f} MB (as text {text / 1e6:.2f} MB), "
        f"overview {overview / 1e3:.1f} KB"
    )


def store_batches(snapshot, ranks: int, nodes: int, batches: int) -> None:
    """`node_parses_store` on batches of 32 nodes (the fan-out's group), in this process:
    CPU and wall a node, this process's and PostgreSQL's."""
    from django.db import connection

    from bench.bench_analysis import build_snapshot
    from collectors import nodeparse

    evidence = {n.node: n for n in build_snapshot(ranks, nodes, stuck_rank=ranks * 3 // 10).nodes}
    rows = list(snapshot.collections.order_by("pk").values_list("pk", "node_name"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    cpu, wall, pg, load = [], [], [], _load()
    for start in range(0, 32 * batches, 32):
        batch = [(pk, name, evidence[name]) for pk, name in rows[start : start + 32]]
        w, c, p = time.perf_counter(), time.process_time(), _backend_cpu(backend)
        nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=batch)
        cpu.append((time.process_time() - c) / len(batch))
        wall.append((time.perf_counter() - w) / len(batch))
        pg.append((_backend_cpu(backend) - p) / len(batch))
    print(
        f"node_parses_store, {batches} batches of 32 of {nodes} nodes: a node, median (best): "
        f"CPU {statistics.median(cpu) * 1e3:.2f} ms ({min(cpu) * 1e3:.2f}), wall "
        f"{statistics.median(wall) * 1e3:.2f} ms, PostgreSQL {sum(pg) / len(pg) * 1e3:.2f} ms"
        f" (mean); load {load:.1f} → {_load():.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=32000)
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--profile", action="store_true", help="one run under cProfile")
    parser.add_argument("--previous", action="store_true", help="a previous snapshot too")
    parser.add_argument(
        "--previous-artifacts-only", action="store_true",
        help="the previous snapshot's node parses not stored (parsed from its artifacts)",
    )  # fmt: skip
    parser.add_argument(
        "--store-batches",
        type=int,
        default=0,
        help="time the map's store of that many batches of 32 nodes instead",
    )
    args = parser.parse_args()
    console_database(flush=False)
    shape = (args.ranks, args.nodes, args.previous, not args.previous_artifacts_only)
    snapshot = None if args.rebuild else find(*shape)
    if snapshot is None:
        snapshot = build(*shape)
    if args.store_batches:
        store_batches(snapshot, args.ranks, args.nodes, args.store_batches)
        return
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(run_once, snapshot)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        return
    runs = []
    for _ in range(args.repeat):
        before = _load()
        runs.append((run_once(snapshot), before, _load()))
    print(f"ranks={args.ranks} nodes={args.nodes} snapshot={snapshot.pk} repeat={args.repeat}")
    for label in runs[0][0].wall:
        figures = []
        for name in ("cpu", "wall", "pg"):
            values = [getattr(r[0], name).get(label) for r in runs]
            if None in values:
                continue
            title = {"cpu": "CPU", "wall": "wall", "pg": "PostgreSQL CPU"}[name]
            figures.append(f"{title} {statistics.median(values):.3f} s ({min(values):.3f})")
        print(f"  {label:>32}: " + ", ".join(figures))
    print("  (medians, best in brackets; PostgreSQL's in clock ticks of 10 ms)")
    print("  load before → after: " + ", ".join(f"{r[1]:.1f} → {r[2]:.1f}" for r in runs))
    print("  " + _stored(snapshot))


if __name__ == "__main__":
    main()
