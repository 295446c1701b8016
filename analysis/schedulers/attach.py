"""A scheduler's words about a job joined to the evidence of the nodes they name.

The controller's view (Slurm: a node drained or down with its reason, a step that ended with
an exit code or a signal; Ray: a worker actor dead with Ray's death cause, a node Ray marks
dead) reaches the diagnosis as log lines of the node it is about, under the log path
SCHEDULER_LOGS[kind], so every reader of logs (the launcher exits, the signal readers) sees
them tied to that node and its ranks. The job's own output files (srun's `task 3: Killed`,
a Ray worker's stderr) are already logs of their node: the snapshot read them there.

A Ray job's workers do not carry their rank in their environment (Ray Train sets RANK in the
running process, which /proc/PID/environ never shows): the scheduler JSON's `ranks` (node ->
pid -> [world rank, local rank], from Ray Train's own worker-group line) says it, and
`scheduler_ranks` hands it to the rank reader.

The scheduler JSON may come from a bundle: it is read defensively and within bounds.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.evidence import NodeEvidence, SnapshotEvidence

SCHEDULER_LOGS = {"slurm": "slurm/controller.log", "ray": "ray/head.log"}
SCHEDULER_LOG = SCHEDULER_LOGS["slurm"]
MAX_LINES_PER_NODE = 200
MAX_LINE = 2000
MAX_RANKS_PER_NODE = 4096
MAX_WORLD = 131_072


def _kind(scheduler: object) -> str:
    kind = scheduler.get("kind") if isinstance(scheduler, dict) else None
    return kind if kind in SCHEDULER_LOGS else "slurm"


def scheduler_lines(scheduler: object) -> dict[str, list[str]]:
    if not isinstance(scheduler, dict):
        return {}
    lines = scheduler.get("lines")
    if not isinstance(lines, dict):
        return {}
    out: dict[str, list[str]] = {}
    for node, texts in list(lines.items())[:100_000]:
        if isinstance(node, str) and isinstance(texts, list):
            kept = [t[:MAX_LINE] for t in texts[:MAX_LINES_PER_NODE] if isinstance(t, str)]
            if kept:
                out[node[:255]] = kept
    return out


def with_scheduler_evidence(evidence: SnapshotEvidence) -> SnapshotEvidence:
    """The evidence with the scheduler's lines added to each named node's logs (a copy; the
    input is not changed). Nodes the snapshot does not hold are left out: a line must be tied
    to a node whose ranks it can speak of."""
    lines = scheduler_lines(evidence.scheduler)
    if not lines:
        return evidence
    nodes: list[NodeEvidence] = []
    for node in evidence.nodes:
        log = _node_log(evidence.scheduler, lines, node.node, node.hostname)
        if log is not None:
            node = replace(node, logs={**node.logs, log[0]: log[1]})
        nodes.append(node)
    return replace(evidence, nodes=nodes)


def scheduler_log(scheduler: object, node: str, hostname: str = "") -> tuple[str, str] | None:
    """The scheduler's lines about one node as the log `with_scheduler_evidence` adds to it,
    (path, text), or None."""
    lines = scheduler_lines(scheduler)
    return _node_log(scheduler, lines, node, hostname) if lines else None


def _node_log(scheduler, lines, node: str, hostname: str) -> tuple[str, str] | None:
    said = lines.get(node) or lines.get(hostname)
    return (SCHEDULER_LOGS[_kind(scheduler)], "\n".join(said) + "\n") if said else None


def scheduler_ranks(
    scheduler: object, node: str, hostname: str = ""
) -> dict[int, tuple[int, int | None]]:
    """pid -> (world rank, local rank) the scheduler gives for this node's processes."""
    if not isinstance(scheduler, dict) or not isinstance(scheduler.get("ranks"), dict):
        return {}
    table = scheduler["ranks"].get(node) or scheduler["ranks"].get(hostname)
    if not isinstance(table, dict):
        return {}
    out: dict[int, tuple[int, int | None]] = {}
    for pid, ranks in list(table.items())[:MAX_RANKS_PER_NODE]:
        if not (isinstance(pid, str) and pid.isdecimal() and len(pid) < 11):
            continue
        if not (isinstance(ranks, list) and ranks and isinstance(ranks[0], int)):
            continue
        rank = ranks[0]
        local = ranks[1] if len(ranks) > 1 and isinstance(ranks[1], int) else None
        if 0 <= rank < MAX_WORLD:
            out[int(pid)] = (rank, local if local is not None and local >= 0 else None)
    return out


def scheduler_world_size(scheduler: object) -> int | None:
    """A Ray job's world size: the workers of its latest worker group, when their ranks are
    known (every rank from 0 to N-1 has a worker)."""
    if not isinstance(scheduler, dict) or _kind(scheduler) != "ray":
        return None
    workers = scheduler.get("workers")
    if not isinstance(workers, list):
        return None
    ranks = {w.get("rank") for w in workers[:MAX_WORLD] if isinstance(w, dict)}
    ranks.discard(None)
    if not ranks or not all(isinstance(r, int) for r in ranks):
        return None
    return len(ranks) if ranks == set(range(len(ranks))) else None
