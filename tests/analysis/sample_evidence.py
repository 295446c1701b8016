"""Build SnapshotEvidence from the captured sample directories (see samples/README.md)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path

import analysis
from analysis.evidence import NodeEvidence, SnapshotEvidence

SAMPLES = Path(__file__).parent / "samples"


def read_public(name: str) -> str:
    return (SAMPLES / "public" / name).read_text()


def load_node(directory: Path, node: str = "lab-node-0", fr_kind: str = "pickle") -> NodeEvidence:
    """One node's evidence from a captured directory, as the collector would hand it over."""
    evidence = NodeEvidence(node=node, hostname="vm")
    ps = directory / "ps.txt"
    if ps.exists():
        evidence.ps = ps.read_text()
    for path in sorted(directory.glob("environ_*")):
        evidence.environ[int(path.name.split("_")[1])] = path.read_bytes()
    for path in sorted(directory.glob("pyspy_*.json")):
        pid = int(path.stem.split("_")[1])
        text = path.read_text()
        if text.strip():
            evidence.pyspy[pid] = text
    for path in sorted(directory.glob("samples_*.txt")):
        evidence.pyspy_samples[int(path.stem.split("_")[1])] = path.read_text()
    for path in sorted(directory.glob("*.log")):
        evidence.logs[f"/var/log/train/{path.name}"] = path.read_text()
    fr_dir = directory / "fr" if (directory / "fr").exists() else directory.parent / "fr"
    for path in sorted(fr_dir.glob("trace_rank_*")) if fr_dir.exists() else []:
        is_json = path.name.endswith(".json")
        if (fr_kind == "json") == is_json:
            evidence.flight_recorder[f"/var/log/train/fr/{path.name}"] = path.read_bytes()
    stamp = directory / "snapshot.json"
    if stamp.exists():
        stamped = json.loads(stamp.read_text())["collected_at"]
        evidence.collected_at = datetime.fromisoformat(stamped)
    return evidence


def load_snapshot(scenario: str, snap: str | None = None, **kwargs) -> SnapshotEvidence:
    directory = SAMPLES / scenario / snap if snap else SAMPLES / scenario
    node = load_node(directory, **kwargs)
    return SnapshotEvidence(
        nodes=[node], expected_world_size=4, collected_at=node.collected_at, cluster="lab"
    )


def pid_of_rank(node: NodeEvidence, rank: int) -> int:
    for pid, raw in node.environ.items():
        if f"\0RANK={rank}\0".encode() in b"\0" + raw:
            return pid
    raise KeyError(rank)


def drop_rank_process(snapshot: SnapshotEvidence, rank: int) -> SnapshotEvidence:
    """The same snapshot with one rank's process gone (killed): no environ, stack or ps row."""
    changed = copy.deepcopy(snapshot)
    node = changed.nodes[0]
    pid = pid_of_rank(node, rank)
    node.environ.pop(pid)
    node.pyspy.pop(pid, None)
    if node.ps:
        node.ps = (
            "\n".join(line for line in node.ps.splitlines() if line.split()[:1] != [str(pid)])
            + "\n"
        )
    return changed


def split_nodes(snapshot: SnapshotEvidence, ranks_per_node: int = 2) -> SnapshotEvidence:
    """Spread one captured node over several nodes by rank, as a multi-node job looks."""
    source = snapshot.nodes[0]
    nodes: dict[int, NodeEvidence] = {}
    for pid, raw in source.environ.items():
        rank = int(raw.split(b"\0RANK=")[1].split(b"\0")[0]) if b"\0RANK=" in raw else 0
        index = rank // ranks_per_node
        node = nodes.setdefault(
            index, NodeEvidence(node=f"lab-node-{index}", hostname=f"lab-node-{index}")
        )
        node.environ[pid] = raw
        if pid in source.pyspy:
            node.pyspy[pid] = source.pyspy[pid]
        node.collected_at = source.collected_at
    for path, text in source.logs.items():
        name = path.rsplit("/", 1)[-1]
        if name.startswith("rank"):
            rank = int(name[4:].split(".")[0])
            nodes[rank // ranks_per_node].logs[path] = text
    for path, data in source.flight_recorder.items():
        rank = int(path.rsplit("_", 1)[1].split(".")[0])
        nodes[rank // ranks_per_node].flight_recorder[path] = data
    return SnapshotEvidence(
        nodes=[nodes[i] for i in sorted(nodes)],
        expected_world_size=snapshot.expected_world_size,
        collected_at=snapshot.collected_at,
    )


def diagnosis_json(evidence: SnapshotEvidence, previous: SnapshotEvidence | None = None) -> dict:
    """The diagnosis in the form the API serves and the pages store."""
    return analysis.diagnose(evidence, previous=previous).to_json()
