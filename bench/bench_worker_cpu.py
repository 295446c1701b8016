"""The ssh worker's CPU per node, by phase, without Celery: one process, a node farm.

A farm of N nodes (lab/farm.py) whose flight-recorder dumps list a world of W ranks (what a
node of a W-rank job sends: `--dump-world`), its cluster imported, then per round a new
snapshot of it and, in this process:
  visit   every node visited 64 at a time in threads (`node_work.node_visit`: handshake,
          decryption, framing, the frame reader), the process's CPU over the phase;
  store   the visits recorded 32 at a time as the batch task does
          (`node_work.node_results_record`), its CPU split into the map (the node's parse,
          `nodeparse.node_parses_store`), zlib (the artifacts compressed) and the rest
          (COPY, statuses);
  batch   (with --batch) the same nodes again through `fanout.batch_visit` as one task runs
          it: visits and stores interleaved, the real path without Celery's own work.
CPU is `time.process_time` (every thread of this process: paramiko's transport threads
included), per node; the farm's CPU is its own process's, apart. Rounds alternate, the
median is printed, with the load average beside it (the machine is shared).

    .venv/bin/python bench/bench_worker_cpu.py --nodes 128 --worlds 8000 32000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.consolekit import console_settings  # noqa: E402 (the repo is on the path now)

console_settings(bench_database=True)

FANOUT = 64
GROUP = 32


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--worlds", type=int, nargs="+", default=[8000, 32000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", action="store_true", help="also the batch task's own path")
    parser.add_argument("--label", default="", help="a name for this tree in the output")
    parser.add_argument("--json", type=Path, help="append each round's figures here")
    args = parser.parse_args()

    from bench.consolekit import console_database

    console_database()
    rows = [_world(args, world) for world in args.worlds]
    print()
    print(
        "| tree | world | nodes | KB / node on the wire | visit | map | zlib | COPY and rest "
        "| store | visit + store | batch task | farm / node | load |"
    )
    print("|" + "---|" * 13)
    for r in rows:
        print(
            f"| {args.label} | {r['world']} | {r['nodes']} | {r['wire_kb']:.0f} "
            f"| {r['visit_ms']:.1f} ms | {r['map_ms']:.1f} ms | {r['zlib_ms']:.1f} ms "
            f"| {r['rest_ms']:.1f} ms | {r['store_ms']:.1f} ms "
            f"| **{r['visit_ms'] + r['store_ms']:.1f} ms** "
            f"| {_ms(r.get('batch_ms'))} | {r['farm_ms']:.1f} ms "
            f"| {r['load'][0]:.1f} → {r['load'][1]:.1f} |"
        )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _world(args, world: int) -> dict:
    from lab import farm
    from tests.helpers import free_port

    # A state dir per size kept between runs: the nodes keep their host keys (made once).
    state = Path(tempfile.gettempdir()) / f"hangdesk-bench-worker-cpu-{args.nodes}"
    opts = farm.FarmOptions(
        nodes=args.nodes, fault="none", port=free_port(), state_dir=state, lifetime_s=3600,
        dump_world=world,
    )  # fmt: skip
    running = farm.launch(opts, ready_timeout=600)
    try:
        cluster = _import(running.info, f"cpu-{args.nodes}-{world}-{time.time_ns()}")
        rounds = []
        for _ in range(args.rounds):
            one = _round(cluster, running, args.batch)
            one.update(world=world, nodes=args.nodes, label=args.label)
            print(json.dumps(one), flush=True)
            if args.json:
                with args.json.open("a") as out:
                    out.write(json.dumps(one) + "\n")
            rounds.append(one)
    finally:
        running.stop()
    keys = ("visit_ms", "map_ms", "zlib_ms", "rest_ms", "store_ms", "wire_kb", "farm_ms")
    row = {k: statistics.median(r[k] for r in rounds) for k in keys}
    if args.batch:
        row["batch_ms"] = statistics.median(r["batch_ms"] for r in rounds)
    row.update(world=world, nodes=args.nodes, load=[rounds[0]["load"][0], rounds[-1]["load"][1]])
    return row


def _import(info: dict, name: str):
    from clusters.importing import cluster_import
    from clusters.models import Node

    first, *rest = info["nodes"]
    data = {**info, "cluster": {**info["cluster"], "name": name}, "nodes": [first]}
    cluster = cluster_import(data).cluster
    fields = ("name", "address", "port", "username", "key_path", "host_key")
    Node.objects.bulk_create(Node(cluster=cluster, **{k: n[k] for k in fields}) for n in rest)
    return cluster


def _snapshot_ids(cluster) -> tuple[int, ...]:
    from collectors import services
    from incidents.services import incident_open

    incident = incident_open(opened_by=None, title="cpu", cluster=cluster, severity="SEV3")
    snapshot = services.snapshot_create(incident=incident, source="bench").snapshot
    return tuple(snapshot.collections.order_by("pk").values_list("pk", flat=True))


class _Timed:
    """A stand-in for a module-level callable that sums this thread's CPU inside it."""

    def __init__(self, function) -> None:
        self.function, self.cpu = function, 0.0

    def __call__(self, *args, **kwargs):
        started = time.thread_time()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.cpu += time.thread_time() - started


class _TimedZlib:
    def __init__(self) -> None:
        self.compress = _Timed(zlib.compress)

    def __getattr__(self, name):
        return getattr(zlib, name)


def _round(cluster, running, batch: bool) -> dict:
    from collectors import fanout, node_work

    load_before = os.getloadavg()[0]
    farm_before = running.cpu_s()
    ids = _snapshot_ids(cluster)
    works = node_work.node_work_claim(task_id="bench-phases", collection_ids=ids)
    n = len(works)
    started = time.process_time()
    with ThreadPoolExecutor(max_workers=FANOUT) as pool:
        visits = list(pool.map(node_work.node_visit, works))
    visit_cpu = time.process_time() - started
    failed = [v.failure.text for v in visits if v.failure]
    if failed:
        raise RuntimeError(f"{len(failed)} visits failed, e.g. {failed[0]}")
    wire = sum(_wire_bytes(v) for v in visits)

    parses, timed_zlib = _Timed(node_work._node_parses_store), _TimedZlib()
    original = node_work._node_parses_store, node_work.zlib
    node_work._node_parses_store, node_work.zlib = parses, timed_zlib
    try:
        started = time.process_time()
        pairs = list(zip(works, visits, strict=True))
        for at in range(0, n, GROUP):
            node_work.node_results_record(task_id="bench-phases", results=pairs[at : at + GROUP])
        store_cpu = time.process_time() - started
    finally:
        node_work._node_parses_store, node_work.zlib = original
    zlib_cpu = timed_zlib.compress.cpu
    row = {
        "visit_ms": 1000 * visit_cpu / n,
        "map_ms": 1000 * parses.cpu / n,
        "zlib_ms": 1000 * zlib_cpu / n,
        "rest_ms": 1000 * (store_cpu - parses.cpu - zlib_cpu) / n,
        "store_ms": 1000 * store_cpu / n,
        "wire_kb": wire / n / 1000,
    }
    if batch:
        ids = _snapshot_ids(cluster)
        started = time.process_time()
        outcome = fanout.batch_visit(
            collection_ids=ids, task_id="bench-batch", fanout=FANOUT,
            steal_until=time.monotonic(),
        )  # fmt: skip
        row["batch_ms"] = 1000 * (time.process_time() - started) / outcome.visited
    row["farm_ms"] = 1000 * (running.cpu_s() - farm_before) / (n * (2 if batch else 1))
    row["load"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    return row


def _wire_bytes(visit) -> int:
    """The bytes the node sent, as the visit's own record says ("1.23s, 508123 bytes, ...")."""
    note = visit.evidence.system.get("collection", "")
    try:
        return int(note.split(", ")[1].split()[0])
    except (IndexError, ValueError):
        return 0


if __name__ == "__main__":
    main()
