"""Count the instructions of the ssh worker's own work on farm nodes under callgrind.

What a farm node of a W-rank job answers (lab/farm_nodes.py, rank-gone, gzipped frames, as
bench_node_stages.py makes it) is read as the worker reads it, for N nodes after 2 warm ones
(every lazy import, compiled expression and the inflater's remembered members warm), with
callgrind's instrumentation on around one stage only:
  all     the frame reader, the artifacts and their stored streams, the read back, `map_node`
          and the stored JSON (bench_node_stages.py's stages, in one);
  frames  the frame reader (inflating included) and the evidence built from its frames;
  map     `nodemap.map_node` of the evidence read back from the artifacts;
  json    `nodemap.to_json` and `json.dumps` of the parse.
The SSH visit itself is not here (paramiko's threads, the kernel): see docs/performance.md.
Per node it prints the count and a digest of the nodes' stored parses and artifacts (`all`):
two trees that read the same bytes the same way print the same digest.

    .venv/bin/python bench/callgrind_node.py --stage map [--nodes 8] [--world 32000]
    .venv/bin/python bench/callgrind_node.py --repo /tmp/base   # another checkout's code

Needs valgrind and a C compiler, as bench/callgrind_analysis.py (whose markers it uses). The
hash seed is fixed: two runs of one tree give the same count to within ~0.1 %.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import zlib
from pathlib import Path

# This script's own folder is on the path: its neighbours' runner and farm answers.
from bench_node_stages import FIXED, READ, farm_answers
from callgrind_analysis import counted

HERE = Path(__file__).resolve().parents[1]
WARM = 2
STAGES = ("all", "frames", "map", "json")


def _child(args: argparse.Namespace) -> None:
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.dev")
    import django

    django.setup()
    from analysis import nodemap

    if Path(nodemap.__file__).resolve().parents[1] != repo:
        raise SystemExit(f"analysis imported from {nodemap.__file__}, not {repo}")
    from callgrind_analysis import _markers

    markers = _markers(Path(args.workdir))
    steps = _Steps(args.world, WARM + args.nodes)
    for output in steps.outputs[:WARM]:
        steps.whole(output, hashlib.sha256())
    todo, digest = steps.outputs[WARM:], hashlib.sha256()
    if args.stage == "map":
        backs = [steps.stored(*steps.frames(o))[1] for o in todo]
        work = lambda: [steps.mapped(b) for b in backs]  # noqa: E731
    elif args.stage == "json":
        parses = [steps.mapped(steps.stored(*steps.frames(o))[1]) for o in todo]
        work = lambda: [steps.encoded(p) for p in parses]  # noqa: E731
    elif args.stage == "frames":
        work = lambda: [steps.frames(o) for o in todo]  # noqa: E731
    else:
        work = lambda: [steps.whole(o, digest) for o in todo]  # noqa: E731
    gc.collect()
    markers.hd_start()
    work()
    markers.hd_stop()
    if args.stage == "all":
        print(f"digest {digest.hexdigest()[:16]}")


class _Steps:
    """The worker's steps on one node's answer, as bench_node_stages.py takes them."""

    def __init__(self, world: int, count: int) -> None:
        from hangdesk.plan import CollectionPlan

        self.outputs = farm_answers(world, count)
        self.plan = CollectionPlan()

    def frames(self, output: bytes):
        from hangdesk.frames import FrameReader, evidence_from_frames, frame_cap_of

        plan = self.plan
        reader = FrameReader("n", frame_cap=frame_cap_of(plan), total_cap=plan.max_total_bytes)
        for start in range(0, len(output), READ):
            reader.feed(output[start : start + READ])
        evidence = evidence_from_frames("node", reader)
        evidence.collected_at = FIXED
        return reader, evidence

    def stored(self, reader, evidence):
        from analysis.evidence import EvidenceStatus
        from hangdesk.artifacts import artifacts_from_evidence, evidence_from_artifacts

        pieces = list(artifacts_from_evidence(evidence))
        streams = [(n, reader.packed.find(c) or zlib.compress(c, 1)) for n, c, _ in pieces]
        return streams, evidence_from_artifacts("node", pieces, status=EvidenceStatus())

    def mapped(self, evidence):
        from analysis import nodemap

        return nodemap.map_node(
            evidence, hosts={}, snapshot_collected_at=FIXED, assigned=None, scheduler_log=None,
            rank_pids=None, flight_recorder=True, step_summaries=True,
        )  # fmt: skip

    def encoded(self, parse) -> bytes:
        from analysis import nodemap

        return json.dumps(nodemap.to_json(parse), separators=(",", ":")).encode()

    def whole(self, output: bytes, digest) -> None:
        reader, evidence = self.frames(output)
        streams, back = self.stored(reader, evidence)
        digest.update(self.encoded(self.mapped(back)))
        for name, stream in streams:
            digest.update(name.encode() + hashlib.sha256(stream).digest())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", choices=STAGES, default="all")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--world", type=int, default=32000)
    parser.add_argument("--repo", default=str(HERE), help="the checkout whose code to count")
    parser.add_argument("--keep", help="keep callgrind's output file at this path")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    flags = [f"--stage={args.stage}", f"--nodes={args.nodes}", f"--world={args.world}"]
    count, printed = counted(Path(__file__), [*flags, f"--repo={args.repo}"], keep=args.keep)
    digest = next((ln for ln in printed.splitlines() if ln.startswith("digest")), "")
    print(
        f"{args.repo}: {args.stage}, {args.nodes} farm nodes of a {args.world}-rank job: "
        f"{count / args.nodes / 1e6:.2f} M instructions a node ({count:,} in all) {digest}"
    )


if __name__ == "__main__":
    main()
