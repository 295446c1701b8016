"""Time the flight-recorder part of the analysis at 4,096 ranks: reading every rank's dump, then
reading them together (groups, the first unmatched collective of each, culprits and victims).

Every rank gets the real gloo pickle captured in `tests/analysis/samples/outside` (rank 3's for
the stuck rank, rank 0's for the others), as `bench/bench_analysis.py` does, with one change:
its `pg_config` names the whole world as the default group's members (the captured dumps say
`[0, 1, 2, 3]`, so a reader would compare four ranks and not 4,096). Re-pickled with protocol 2,
the protocol torch writes. CPU seconds (`time.process_time`), median of the runs; per dump in
microseconds.

    .venv/bin/python bench/bench_flight_recorder.py [--ranks 4096] [--repeat 7] [--as-captured]
    .venv/bin/python bench/bench_flight_recorder.py --tensor-parallel   # a group per rank pair

`--tensor-parallel` gives every pair of ranks its own group as well (the captured dumps'
entries re-pickled into tensor-parallel groups of two, 2,048 of them at 4,096 ranks, each with
its own pg_config entry), to show the reading stays linear in the groups.

It runs on older trees too (PYTHONPATH=<tree>): without `analysis.alignment.read_dumps` it times
what that tree computed instead (`group_mismatches` and `group_stops`).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SAMPLE = HERE / "tests" / "analysis" / "samples" / "outside" / "fr"


def _together():
    from analysis import alignment

    if hasattr(alignment, "read_dumps"):
        return lambda dumps, world: alignment.read_dumps(dumps, world=world)
    from analysis.groups import group_stops

    def older(dumps, world):
        per_rank = alignment.dumps_by_rank(dumps)
        return group_stops(per_rank, alignment.group_mismatches(per_rank))

    return older


def _whole_world(data: bytes, ranks: int) -> bytes:
    dump = pickle.loads(data)  # noqa: S301 - our own captured file
    for config in dump["pg_config"].values():
        config["ranks"] = str(list(range(ranks)))
    return pickle.dumps(dump, protocol=2)


def _tensor_parallel(data: bytes, rank: int, ranks: int) -> bytes:
    dump = pickle.loads(data)  # noqa: S301 - our own captured file
    group, first = str(1 + rank // 2), rank - rank % 2
    dump["pg_config"] = {
        "0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))},
        group: {
            "name": group,
            "desc": "TENSOR_MODEL_PARALLEL_GROUP",
            "ranks": str([first, first + 1]),
        },
    }
    for entry in list(dump["entries"]):
        tp = dict(entry, process_group=(group, "TENSOR_MODEL_PARALLEL_GROUP"))
        dump["entries"].append(tp)
    return pickle.dumps(dump, protocol=2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--as-captured", action="store_true", help="keep pg_config as captured ([0, 1, 2, 3])"
    )
    parser.add_argument("--tensor-parallel", action="store_true", help="a group per rank pair")
    args = parser.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    from analysis.parsers.flight_recorder import parse_flight_recorder

    healthy, stuck = ((SAMPLE / f"trace_rank_{r}").read_bytes() for r in (0, 3))
    if not args.as_captured:
        healthy, stuck = (_whole_world(d, args.ranks) for d in (healthy, stuck))
    stuck_rank = args.ranks * 3 // 10
    blobs = [
        (f"/var/log/train/fr/trace_rank_{r}", stuck if r == stuck_rank else healthy)
        for r in range(args.ranks)
    ]
    if args.tensor_parallel:
        blobs = [
            (path, _tensor_parallel(data, r, args.ranks)) for r, (path, data) in enumerate(blobs)
        ]
    together = _together()
    parse_s, read_s = [], []
    gc.disable()  # as `analysis.diagnose` does
    for _ in range(args.repeat):
        started = time.process_time()
        dumps = [parse_flight_recorder(path, data) for path, data in blobs]
        parse_s.append(time.process_time() - started)
        started = time.process_time()
        result = together(dumps, args.ranks)
        read_s.append(time.process_time() - started)
    gc.enable()
    per_dump = 1e6 / args.ranks
    for name, runs in (("parse", parse_s), ("read together", read_s)):
        median = statistics.median(runs)
        print(
            f"{name:>13}: CPU median {median:.3f} s (best {min(runs):.3f}), "
            f"{median * per_dump:.0f} µs a dump"
        )
    print(f"result: {str(result)[:300]}")


if __name__ == "__main__":
    main()
