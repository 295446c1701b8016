"""Slurm's words about a job joined to the evidence of the nodes they name.

The controller's view (a node drained or down with its reason, a step that ended with an exit
code or a signal) reaches the diagnosis as log lines of the node it is about, under the log
path SCHEDULER_LOG, so every reader of logs (the launcher exits, the signal readers) sees them
tied to that node and its ranks. The job's own StdOut / StdErr (srun's `task 3: Killed`,
slurmstepd's OOM lines) are already logs of the batch host: the snapshot read them there.

The scheduler JSON may come from a bundle: it is read defensively and within bounds.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.evidence import NodeEvidence, SnapshotEvidence

SCHEDULER_LOG = "slurm/controller.log"
MAX_LINES_PER_NODE = 200
MAX_LINE = 2000


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
        said = lines.get(node.node) or lines.get(node.hostname)
        if said:
            node = replace(node, logs={**node.logs, SCHEDULER_LOG: "\n".join(said) + "\n"})
        nodes.append(node)
    return replace(evidence, nodes=nodes)
