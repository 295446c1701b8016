"""Time the analysis of a 4,096-rank, 512-node snapshot built from real captured evidence.

Every rank gets a real captured environment (RANK/LOCAL_RANK/WORLD_SIZE rewritten), a real
py-spy JSON dump, a real training-log tail (rank tag rewritten) and a real gloo flight-recorder
pickle; every node a real `ps` layout and a published nvidia-smi table. One rank is stuck
outside the collective (the captured `outside` scenario), so the verdict is A.

"Analysed" is what the worker stores: the diagnosis as JSON and one row per rank. With a
diagnosis object that has `to_json()` (and `per_rank`) that is one parse; with the older plain
dict it is `diagnose` plus `extract_ranks`, which parse the evidence twice. CPU seconds
(`time.process_time`) are the figure to quote: the wall figure depends on what else the
machine runs.

    .venv/bin/python bench/bench_analysis.py [--ranks 4096] [--nodes 512] [--repeat 5]
    .venv/bin/python bench/bench_analysis.py --profile   # where the CPU goes, by function
    .venv/bin/python bench/bench_analysis.py --map-reduce --ranks 32000 --nodes 4000 --repeat 1
    .venv/bin/python bench/bench_analysis.py --map-reduce --whole-world   # a real job's groups

--whole-world: the captured dumps come from a 4-rank job, so their `pg_config` lists group 0 as
ranks 0-3 and the flight recorder's reading compares four ranks at any size. With it, every
dump lists the whole world as the default group's members, as on a real job (as
`bench_flight_recorder.py` does): the reading then compares every rank at each sequence number.

--map-reduce (issue 22): the analysis as the fleet runs it. "map" is each node's parse as its
worker makes it (summed over nodes: spread over the workers, in parallel, as nodes arrive),
"store" its JSON and compression; "merge + rules" is what is left after the last node: the
stored parses read back (decompressed, checked field by field), merged, the facts and the
rules (`analysis.diagnose_parses`). "one pass" is `analysis.diagnose` on the same evidence,
the analysis before the split; both verdicts are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import analysis  # noqa: E402
from analysis.evidence import NodeEvidence, SnapshotEvidence  # noqa: E402
from readings.rank_timeline import rank_timeline_figure  # noqa: E402

SAMPLE = REPO / "tests" / "analysis" / "samples" / "outside"
PUBLIC = REPO / "tests" / "analysis" / "samples" / "public"


def _captured_rank_files() -> dict[int, dict[str, bytes | str]]:
    by_rank = {}
    for environ in SAMPLE.glob("environ_*"):
        raw = environ.read_bytes()
        rank = int(re.search(rb"\0RANK=(\d+)\0", b"\0" + raw).group(1))
        pid = environ.name.split("_")[1]
        by_rank[rank] = {
            "environ": raw,
            "pyspy": (SAMPLE / f"pyspy_{pid}.json").read_text(),
            "log": (SAMPLE / f"rank{rank}.log").read_text(),
            "fr": (SAMPLE / "fr" / f"trace_rank_{rank}").read_bytes(),
        }
    return by_rank


def _whole_world(dump: bytes, world: int) -> bytes:
    import pickle

    data = pickle.loads(dump)  # noqa: S301 - our own captured file
    for config in data["pg_config"].values():
        config["ranks"] = str(list(range(world)))
    return pickle.dumps(data, protocol=2)  # the protocol torch writes


def build_snapshot(
    world: int, node_count: int, stuck_rank: int, whole_world: bool = False
) -> SnapshotEvidence:
    captured = _captured_rank_files()
    healthy, stuck = captured[0], captured[3]
    if whole_world:
        for files in (healthy, stuck):
            files["fr"] = _whole_world(files["fr"], world)
    per_node = world // node_count
    ps_header = (SAMPLE / "ps.txt").read_text().splitlines()[0]
    nvidia = (PUBLIC / "nvidia_smi_515.txt").read_text()
    stamp = json.loads((SAMPLE / "snapshot.json").read_text())["collected_at"]
    from datetime import datetime

    collected = datetime.fromisoformat(stamp)
    nodes = []
    for index in range(node_count):
        name = f"node-{index:03d}"
        node = NodeEvidence(node=name, hostname=name, nvidia_smi=nvidia, collected_at=collected)
        launcher = 100_000 + index * 100
        ps_lines = [ps_header, f"{launcher} 1 Ssl 300 /usr/bin/python3 /usr/bin/torchrun train.py"]
        for local in range(per_node):
            rank = index * per_node + local
            source = stuck if rank == stuck_rank else healthy
            pid = launcher + 1 + local
            environ = re.sub(rb"\0RANK=\d+\0", b"\0RANK=%d\0" % rank, b"\0" + source["environ"])
            environ = re.sub(rb"\0LOCAL_RANK=\d+\0", b"\0LOCAL_RANK=%d\0" % local, environ)
            environ = re.sub(rb"\0WORLD_SIZE=\d+\0", b"\0WORLD_SIZE=%d\0" % world, environ)
            node.environ[pid] = environ[1:]
            node.pyspy[pid] = source["pyspy"]
            log = re.sub(r"\[rank\d+\]", f"[rank{rank}]", source["log"])
            node.logs[f"/var/log/train/rank{rank}.log"] = log.replace("host=vm", f"host={name}")
            node.flight_recorder[f"/var/log/train/fr/trace_rank_{rank}"] = source["fr"]
            ps_lines.append(f"{pid} {launcher} Sl 300 /usr/bin/python3 -u train.py")
        node.ps = "\n".join(ps_lines) + "\n"
        nodes.append(node)
    return SnapshotEvidence(nodes=nodes, expected_world_size=world, collected_at=collected)


@dataclass
class Run:
    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    payload: dict = field(default_factory=dict)
    rows: int = 0
    parses: str = ""


def _timed(run: Run, phase: str, work):
    started, started_cpu = time.perf_counter(), time.process_time()
    value = work()
    run.wall[phase] = time.perf_counter() - started
    run.cpu[phase] = time.process_time() - started_cpu
    return value


def analyse(snapshot: SnapshotEvidence) -> Run:
    """The diagnosis as JSON plus the per-rank rows, as the worker needs them, phase by phase."""
    run = Run()
    result = _timed(run, "diagnose", lambda: analysis.diagnose(snapshot))
    if hasattr(result, "to_json"):
        run.payload = _timed(run, "to_json", result.to_json)
        rows = getattr(result, "per_rank", None)
        run.rows = len(rows if rows is not None else run.payload.get("per_rank") or [])
        run.parses = "one parse (typed diagnosis, per_rank from the same facts)"
    else:
        run.payload = result
        rows = _timed(run, "extract_ranks", lambda: analysis.extract_ranks(snapshot))
        run.rows = len(rows)
        run.parses = "two parses (diagnose, then extract_ranks)"
    run.wall["total"] = sum(run.wall.values())
    run.cpu["total"] = sum(run.cpu.values())
    return run


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def _profile(snapshot: SnapshotEvidence) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(analyse, snapshot)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def _report(args: argparse.Namespace, runs: list[Run], load_before: str) -> None:
    last = runs[-1]
    print(f"ranks={args.ranks} nodes={args.nodes} repeat={args.repeat}: {last.parses}")
    for phase in last.cpu:
        cpu = [r.cpu[phase] for r in runs]
        wall = [r.wall[phase] for r in runs]
        print(
            f"{phase:>13}: CPU median {statistics.median(cpu):.3f} s (best {min(cpu):.3f}), "
            f"wall median {statistics.median(wall):.3f} s (best {min(wall):.3f})"
        )
    print(f"load average before: {load_before}; after: {_load()}")
    figure_started = time.perf_counter()
    figure = rank_timeline_figure(analysis.Diagnosis.from_json(last.payload))
    figure_s = time.perf_counter() - figure_started
    points = sum(len(t["y"]) for t in figure["data"])
    print(f"per-rank rows: {last.rows}; rank_timeline_figure: {figure_s:.3f} s ({points} points)")
    print(f"result JSON: {len(json.dumps(last.payload)) / 1024:.0f} KiB")
    result = last.payload
    groups = [(g.get("frame"), g.get("ranks")) for g in result.get("stack_groups") or []]
    print(
        f"classification={result.get('classification')} "
        f"suspects={result.get('suspect_ranks')} groups={groups}"
    )
    print(f"summary: {result.get('summary')}")


def map_reduce(snapshot: SnapshotEvidence) -> dict[str, float]:
    """CPU seconds of each half, and the check that both give one verdict."""
    import dataclasses
    import gc
    import zlib

    from analysis import nodemap
    from analysis.diagnosis import no_cyclic_gc
    from analysis.signals.place import host_map

    cpu: dict[str, float] = {}
    hosts = host_map((n.node, n.hostname) for n in snapshot.nodes)
    gc.collect()
    started = time.process_time()
    one_pass = analysis.diagnose(snapshot).to_json()
    cpu["one pass"] = time.process_time() - started
    started = time.process_time()
    parses = [
        nodemap.map_node(n, hosts=hosts, snapshot_collected_at=snapshot.collected_at)
        for n in snapshot.nodes
    ]
    cpu["map (all nodes)"] = time.process_time() - started
    started = time.process_time()
    stored = [zlib.compress(json.dumps(nodemap.to_json(p)).encode(), 1) for p in parses]
    cpu["store (all nodes)"] = time.process_time() - started
    cpu["stored bytes per node"] = sum(map(len, stored)) / len(stored)
    del parses
    gc.collect()
    head = dataclasses.replace(snapshot, nodes=[])
    started = time.process_time()
    with no_cyclic_gc():  # as collectors/nodeparse.py reads them
        read = [nodemap.from_json(json.loads(zlib.decompress(b))) for b in stored]
    cpu["merge: read back"] = time.process_time() - started

    def reparse(index, rank_pids, step_summaries=True):
        raise AssertionError("the bench's parses all hold")

    started = time.process_time()
    merged = analysis.diagnose_parses(head, read, reparse).to_json()
    cpu["merge: merge + facts + rules"] = time.process_time() - started
    cpu["merge + rules (total)"] = cpu["merge: read back"] + cpu["merge: merge + facts + rules"]
    assert merged == one_pass, "map/reduce and one pass disagree"
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="one run under cProfile")
    parser.add_argument("--map-reduce", action="store_true", help="each half of the split")
    parser.add_argument("--whole-world", action="store_true", help="dumps list every rank")
    args = parser.parse_args()
    stuck = args.ranks * 3 // 10
    snapshot = build_snapshot(args.ranks, args.nodes, stuck, whole_world=args.whole_world)
    if args.profile:
        _profile(snapshot)
        return
    if args.map_reduce:
        for run in range(args.repeat):
            load_before = _load()
            figures = map_reduce(snapshot)
            print(f"ranks={args.ranks} nodes={args.nodes} run {run + 1}:")
            for name, value in figures.items():
                unit = "" if "bytes" in name else " s CPU"
                print(f"  {name:>30}: {value:.3f}{unit}")
            print(f"  load average before: {load_before}; after: {_load()}")
        return
    load_before = _load()
    runs = [analyse(snapshot) for _ in range(args.repeat)]
    _report(args, runs, load_before)


if __name__ == "__main__":
    main()
