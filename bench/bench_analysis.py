"""Time `analysis.diagnose` on a 4,096-rank, 512-node snapshot built from real captured evidence.

Every rank gets a real captured environment (RANK/LOCAL_RANK/WORLD_SIZE rewritten), a real
py-spy JSON dump, a real training-log tail (rank tag rewritten) and a real gloo flight-recorder
pickle; every node a real `ps` layout and a published nvidia-smi table. One rank is stuck
outside the collective (the captured `outside` scenario), so the verdict is A.

    .venv/bin/python bench/bench_analysis.py [--ranks 4096] [--nodes 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis import diagnose, extract_ranks, timeline_figure  # noqa: E402
from analysis.evidence import NodeEvidence, SnapshotEvidence  # noqa: E402

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


def build_snapshot(world: int, node_count: int, stuck_rank: int) -> SnapshotEvidence:
    captured = _captured_rank_files()
    healthy, stuck = captured[0], captured[3]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    snapshot = build_snapshot(args.ranks, args.nodes, stuck_rank=args.ranks * 3 // 10)
    timings = []
    cpu = []
    result = {}
    for _ in range(args.repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = diagnose(snapshot)
        timings.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    started = time.perf_counter()
    rows = extract_ranks(snapshot)
    extract_s = time.perf_counter() - started
    started = time.perf_counter()
    figure = timeline_figure(result)
    figure_s = time.perf_counter() - started
    size = len(json.dumps(result))
    print(f"ranks={args.ranks} nodes={args.nodes} repeat={args.repeat}")
    print(f"diagnose: best {min(timings):.3f} s, median {statistics.median(timings):.3f} s wall")
    # The wall figure depends on what else the machine runs; CPU time does not.
    print(f"diagnose: best {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s CPU")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"extract_ranks: {extract_s:.3f} s ({len(rows)} rows)")
    print(f"timeline_figure: {figure_s:.3f} s ({sum(len(t['y']) for t in figure['data'])} points)")
    print(f"result JSON: {size / 1024:.0f} KiB")
    print(
        f"classification={result['classification']} suspects={result['suspect_ranks']} "
        f"groups={[(g['frame'], g['ranks']) for g in result['stack_groups']]}"
    )
    print(f"summary: {result['summary']}")


if __name__ == "__main__":
    main()
