"""Expanding Slurm host lists of a large job (target: 10,000 nodes under 50 ms).

The console expands a job's NodeList itself (analysis/schedulers/hostlist.py) and then parses
`scontrol show node -o` for every node; both are timed on lists as Slurm writes them for a
10,000-node allocation: one zero-padded range, a fragmented list (every third node missing,
3,334 ranges), two brackets per name (rack x node), and the node records.

    .venv/bin/python bench/bench_hostlist.py [--nodes 10000] [--repeat 50]

Prints the median and worst CPU time of `--repeat` runs of each, and the median wall time,
in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.schedulers import slurm
from analysis.schedulers.hostlist import compress, expand


def lists(nodes: int) -> dict[str, str]:
    racks = max(1, nodes // 100)
    fragmented = [f"gpu{i:05d}" for i in range(nodes * 3 // 2) if i % 3 != 2][:nodes]
    return {
        "one range": f"gpu[00001-{nodes:05d}]",
        "fragmented": compress(fragmented),
        "rack x node": f"r[001-{racks:03d}]n[001-100]",
    }


def node_records(nodes: int) -> str:
    return "\n".join(
        f"NodeName=gpu{i:05d} Arch=x86_64 CoresPerSocket=48 CPUAlloc=96 CPUTot=96 "
        f"NodeAddr=10.{i // 65536}.{i // 256 % 256}.{i % 256} NodeHostName=gpu{i:05d} "
        f"State={'MIXED+DRAIN' if i % 997 == 0 else 'ALLOCATED'} Partitions=gpu "
        f"Reason={'Kill task failed [root@2026-11-30T09:12:00]' if i % 997 == 0 else '(null)'}"
        for i in range(nodes)
    )


def timed(function, repeat: int) -> tuple[float, float, float]:
    """Median CPU ms, worst CPU ms, median wall ms (a shared machine's wall time includes
    other people's work; the CPU time is this process's own)."""
    cpu, wall = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        cpu.append((time.process_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
    return statistics.median(cpu), max(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    for name, text in lists(args.nodes).items():
        count = len(expand(text))
        median, worst, wall = timed(lambda t=text: expand(t), args.repeat)
        print(f"expand {name:<12} {count:>6} names ({len(text):>6} chars): CPU median "
              f"{median:6.2f} ms, worst {worst:6.2f} ms; wall median {wall:6.2f} ms")  # fmt: skip
    records = node_records(args.nodes)
    median, worst, wall = timed(lambda: slurm.node_states(records), max(5, args.repeat // 5))
    print(f"scontrol show node -o, {args.nodes} records ({len(records) // 1024} KiB): CPU median "
          f"{median:6.1f} ms, worst {worst:6.1f} ms; wall median {wall:6.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
