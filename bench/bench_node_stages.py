"""A node's CPU in the worker by stage, as the world grows: no SSH, no database, no farm process.

What a farm node of a W-rank job answers (lab/farm_nodes.py: the same frames, the flight
recorder's dumps listing the whole world, gzipped as the probe sends them) is read here as the
ssh worker reads it, stage by stage, for N nodes in one process (a worker's caches warm across
the nodes as they do across a task's):
  frames    the frame reader (inflating included) and the evidence built from its frames;
  store     the artifacts made and each one's stored stream (the node's own member, else zlib);
  read back the evidence read back from those artifacts, as the map reads it;
  map       `nodemap.map_node`;
  json      `nodemap.to_json` and `json.dumps`, the parse as stored.
Per node, CPU of this thread (`time.thread_time`); the SSH transfer and the COPY are
bench_worker_cpu.py's. A digest of every node's stored parse and artifacts is printed: two
trees that read the same bytes the same way print the same digest.

    .venv/bin/python bench/bench_node_stages.py --worlds 8000 32000 96000 --nodes 16
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FIXED = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)
READ = 64 * 1024  # bytes a channel read gives at most (collectors/remote.py reads 256 KiB)
STAGES = ("frames", "store", "read back", "map", "json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, nargs="+", default=[8000, 32000, 96000])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.dev")
    import django

    django.setup()
    print("| tree | world | KB / node on the wire | " + " | ".join(STAGES) + " | all | digest |")
    print("|" + "---|" * (len(STAGES) + 5))
    for world in args.worlds:
        cpu, wire, digest = _world(world, args.nodes)
        cells = " | ".join(f"{1000 * cpu[s] / args.nodes:.2f} ms" for s in STAGES)
        total = 1000 * sum(cpu.values()) / args.nodes
        print(
            f"| {args.label} | {world} | {wire / 1000:.0f} | {cells} | **{total:.2f} ms** "
            f"| {digest[:12]} |",
            flush=True,
        )


def farm_answers(world: int, count: int) -> list[bytes]:
    """What `count` farm nodes of a `world`-rank job (rank-gone, 8 ranks a node) answer the
    probe, gzipped as it sends them, stamped at FIXED: the same bytes from every tree."""
    from lab import farm_nodes

    class _Fixed(datetime):  # the farm's stamps, so two trees' answers are the same bytes
        @classmethod
        def now(cls, tz=None):
            return FIXED

    farm_nodes.datetime = _Fixed
    addresses = [f"127.9.{i // 250}.{i % 250 + 1}" for i in range(max(world // 8, count + 1))]
    nodes = farm_nodes.farm_nodes("rank-gone", addresses)
    answers = farm_nodes.NodeAnswers(farm_nodes.Capture("rank-exit"), nodes, 8, dump_world=world)
    return [answers.probe(nodes[i], "n", zip_min=2048) for i in range(1, count + 1)]


def _world(world: int, count: int) -> tuple[dict[str, float], int, str]:
    from analysis import nodemap
    from analysis.evidence import EvidenceStatus
    from hangdesk.artifacts import artifacts_from_evidence, evidence_from_artifacts
    from hangdesk.frames import FrameReader, evidence_from_frames, frame_cap_of
    from hangdesk.plan import CollectionPlan

    outputs = farm_answers(world, count)
    plan = CollectionPlan()
    cpu = dict.fromkeys(STAGES, 0.0)
    digest = hashlib.sha256()
    for output in outputs:
        at = time.thread_time()

        def lap(stage: str) -> None:
            nonlocal at
            now = time.thread_time()
            cpu[stage] += now - at
            at = now

        reader = FrameReader("n", frame_cap=frame_cap_of(plan), total_cap=plan.max_total_bytes)
        for start in range(0, len(output), READ):
            reader.feed(output[start : start + READ])
        evidence = evidence_from_frames("node", reader)
        evidence.collected_at = FIXED
        lap("frames")
        pieces = list(artifacts_from_evidence(evidence))
        stored = [(n, reader.packed.find(c) or zlib.compress(c, 1)) for n, c, _ in pieces]
        lap("store")
        back = evidence_from_artifacts("node", pieces, status=EvidenceStatus())
        lap("read back")
        parse = nodemap.map_node(
            back, hosts={}, snapshot_collected_at=FIXED, assigned=None, scheduler_log=None,
            rank_pids=None, flight_recorder=True, step_summaries=True,
        )  # fmt: skip
        lap("map")
        raw = json.dumps(nodemap.to_json(parse), separators=(",", ":")).encode()
        lap("json")
        digest.update(raw)
        for name, stream in stored:
            digest.update(name.encode() + hashlib.sha256(stream).digest())
    return cpu, len(outputs[0]), digest.hexdigest()


if __name__ == "__main__":
    main()
