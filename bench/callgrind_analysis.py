"""Count the instructions of one analysis (`diagnose` + `to_json`) under callgrind.

CPU seconds on a shared host swing by a quarter from one minute to the next; the number of
instructions the same code executes does not. This builds the snapshot of
`bench_analysis.py` (512 ranks on 64 nodes by default), warms up on a small one (every lazy
import, every `.pyc`, every compiled regular expression), then switches callgrind's
instrumentation on around `diagnose(snapshot).to_json()` only, and prints the count.

    .venv/bin/python bench/callgrind_analysis.py [--ranks 512] [--nodes 64]
    .venv/bin/python bench/callgrind_analysis.py --repo /tmp/base   # another checkout's code
    .venv/bin/python bench/callgrind_analysis.py --map-only         # each node's map_node alone
    .venv/bin/python bench/callgrind_analysis.py --reduce --ranks 4096 --nodes 512
        # the reduce alone, as the fleet runs it after the last node: the stored parses
        # decompressed and read back, then `diagnose_parses(...).to_json()`
    .venv/bin/python bench/callgrind_analysis.py --read-back --ranks 4096 --nodes 512
        # the read back alone: the stored parses decompressed, parsed and decoded

Needs valgrind and a C compiler (the two markers that switch instrumentation on and off are
callgrind's client requests, built once into a temporary shared library). `--repo` measures
the analysis of another checkout (for example `git worktree add /tmp/base e67f7b6`) with the
snapshot built by that checkout's `bench/bench_analysis.py`. The hash seed is fixed, so two
runs of the same code give the same count to within a few thousand instructions.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

MARKERS = r"""
#include <valgrind/callgrind.h>
void hd_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void hd_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _markers(workdir: Path) -> ctypes.CDLL:
    source, library = workdir / "markers.c", workdir / "markers.so"
    source.write_text(MARKERS)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def _child(args: argparse.Namespace) -> None:
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    sys.path.insert(0, str(repo / "bench"))
    import bench_analysis

    import analysis

    if Path(analysis.__file__).resolve().parents[1] != repo:
        raise SystemExit(f"analysis imported from {analysis.__file__}, not {repo}")
    markers = _markers(Path(args.workdir))
    warm = bench_analysis.build_snapshot(8, 2, stuck_rank=3)
    stuck = args.ranks * 3 // 10  # as bench_analysis.py
    if args.whole_world:
        snapshot = bench_analysis.build_snapshot(args.ranks, args.nodes, stuck, whole_world=True)
    else:  # (older trees' build_snapshot has no such argument)
        snapshot = bench_analysis.build_snapshot(args.ranks, args.nodes, stuck_rank=stuck)
    if args.map_only:
        from analysis import nodemap
        from analysis.signals.place import host_map

        hosts = host_map((n.node, n.hostname) for n in snapshot.nodes)
        for node in warm.nodes:
            nodemap.map_node(node, hosts=hosts, snapshot_collected_at=warm.collected_at)

        def work():
            gc.disable()  # as `diagnose` runs it
            for node in snapshot.nodes:
                nodemap.map_node(node, hosts=hosts, snapshot_collected_at=snapshot.collected_at)
            gc.enable()
    elif args.reduce or args.read_back:
        work = _reduce_work(snapshot, warm, read_back_only=args.read_back)
    else:
        analysis.diagnose(warm).to_json()

        def work():
            return analysis.diagnose(snapshot).to_json()

    gc.collect()
    markers.hd_start()
    work()
    markers.hd_stop()


def _reduce_work(snapshot, warm, read_back_only=False):
    """The reduce of `bench_analysis.py --map-reduce`: each tree's own map and store made
    first (not counted), the decoders and caches warmed on a small snapshot's reduce."""
    import dataclasses
    import json
    import zlib

    import analysis
    from analysis import nodemap
    from analysis.diagnosis import no_cyclic_gc
    from analysis.signals.place import host_map

    def stored_parses(snap):
        hosts = host_map((n.node, n.hostname) for n in snap.nodes)
        return [
            zlib.compress(
                json.dumps(
                    nodemap.to_json(
                        nodemap.map_node(n, hosts=hosts, snapshot_collected_at=snap.collected_at)
                    )
                ).encode(),
                1,
            )
            for n in snap.nodes
        ]

    def reparse(index, rank_pids, step_summaries=True):
        raise AssertionError("the bench's parses all hold")

    def reduce(snap, stored):
        head = dataclasses.replace(snap, nodes=[])
        with no_cyclic_gc():
            parses = [nodemap.from_json(json.loads(zlib.decompress(b))) for b in stored]
        if read_back_only:
            return parses
        return analysis.diagnose_parses(head, parses, reparse).to_json()

    reduce(warm, stored_parses(warm))
    stored = stored_parses(snapshot)
    return lambda: reduce(snapshot, stored)


def _count(out_file: Path) -> int:
    for line in out_file.read_text().splitlines():
        if line.startswith("totals:"):  # "summary:" stays 0 after ZERO_STATS
            return int(line.split()[1])
    raise SystemExit(f"no total in {out_file}")


def counted(script: Path, flags: list[str], *, keep: str | None = None) -> tuple[int, str]:
    """`script --child --workdir=DIR FLAGS` run under callgrind with its instrumentation off
    until the child's markers switch it on (the hash seed fixed): the instructions counted,
    and what the child printed. `keep`: where callgrind's output file is kept."""
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}-") as workdir:
        out_file = Path(keep or Path(workdir) / "callgrind.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out_file}",
            sys.executable,
            str(script.resolve()),
            "--child",
            f"--workdir={workdir}",
            *flags,
        ]
        environment = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run(command, env=environment, capture_output=True, text=True)
        if done.returncode:
            sys.stderr.write(done.stderr)
            raise SystemExit(done.returncode)
        return _count(out_file), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--repo", default=str(HERE), help="the checkout whose analysis to count")
    parser.add_argument("--map-only", action="store_true", help="count map_node of every node")
    parser.add_argument("--reduce", action="store_true", help="count the reduce alone")
    parser.add_argument("--read-back", action="store_true", help="count its read back alone")
    parser.add_argument("--whole-world", action="store_true", help="dumps list every rank")
    parser.add_argument("--keep", help="keep callgrind's output file at this path")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    flags = [f"--ranks={args.ranks}", f"--nodes={args.nodes}", f"--repo={args.repo}"]
    flags += ["--map-only"] if args.map_only else []
    flags += ["--reduce"] if args.reduce else []
    flags += ["--read-back"] if args.read_back else []
    flags += ["--whole-world"] if args.whole_world else []
    count, _ = counted(Path(__file__), flags, keep=args.keep)
    what = "map_node of every node" if args.map_only else "diagnose + to_json"
    what = "the reduce (read back + diagnose_parses + to_json)" if args.reduce else what
    what = "the read back (zlib + JSON + decode)" if args.read_back else what
    load = re.sub(r"\s+", " ", Path("/proc/loadavg").read_text()).strip()
    print(
        f"{args.repo}: {what}, {args.ranks} ranks on {args.nodes} nodes: "
        f"{count:,} instructions ({count / 1e6:,.0f} M); load {load}"
    )


if __name__ == "__main__":
    main()
