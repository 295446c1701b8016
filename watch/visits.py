"""The watch's SSH work: every node of a cluster visited side by side in a bounded thread pool,
one pinned connection each (collectors.remote): a period's cheap read (watch/probe.sh), a
preflight's full visit (the snapshot's probe). Runs in the tasks on the `ssh` queue."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from analysis.evidence import SnapshotEvidence, not_gathered
from clusters.models import Cluster, Node
from collectors.visits import run_script, ssh_visit
from core.errors import Invalid
from hangdesk.budget import TIME_BUDGET
from hangdesk.plan import CollectionPlan

from . import reading

log = logging.getLogger(__name__)
T = TypeVar("T")

# The node read's limits (hangdesk/budget.py): every step on the node is bounded, and so is
# the whole visit.
READ_MAX_BYTES = 4 * 1024 * 1024


def side_by_side(nodes: list[Node], visit: Callable[[Node], T]) -> list[T]:
    """`visit(node)` for every node, at most WATCH_NODE_THREADS at once, in the nodes' order."""
    threads = max(1, min(len(nodes), settings.WATCH_NODE_THREADS))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(visit, nodes))


def read_nodes(
    cluster: Cluster, nodes: list[Node], *, with_logs: set[str], with_stacks: bool = False
) -> list[reading.NodeReading]:
    """A period's read: one SSH connection per node, side by side (bounded), every step
    bounded; the log tails only of the nodes named in `with_logs`; each process's stack too
    when `with_stacks` (a job with no first step yet)."""
    if not nodes:
        return []
    plans = {
        node.name: reading.ReadPlan(
            process_pattern=cluster.process_pattern,
            log_globs=tuple(cluster.log_globs) if node.name in with_logs else (),
            tail_bytes=settings.WATCH_TAIL_BYTES,
            stacks=with_stacks,
            pyspy_command=cluster.pyspy_command,
        )
        for node in nodes
    }
    return side_by_side(nodes, lambda node: _read_node(node, plans[node.name]))


def _read_node(node: Node, plan: reading.ReadPlan) -> reading.NodeReading:
    limits = CollectionPlan(
        process_pattern=plan.process_pattern,
        connect_timeout_s=TIME_BUDGET.watch_connect_s,
        total_timeout_s=TIME_BUDGET.watch_read_s,
        command_timeout_s=plan.command_timeout_s,
        tail_bytes=plan.tail_bytes,
        artifact_cap_bytes=plan.tail_bytes,
        max_total_bytes=READ_MAX_BYTES,
    )
    try:
        run = run_script(
            node.ssh_target(), limits, lambda nonce: reading.render_script(plan, nonce)
        )
    except Exception as exc:  # a bug must fail this node's read, not the period
        log.exception("watch read of %s failed", node.name)
        return reading.NodeReading(node=node.name, ok=False, error=f"internal error: {exc!r}")
    error = run.failure.text if run.failure else ""
    return reading.reading_from_frames(
        node.name, run.frames, error=error, bytes_read=run.bytes_read, seconds=run.seconds
    )


def preflight_evidence_over_ssh(cluster: Cluster) -> SnapshotEvidence:
    """Every node visited as a snapshot visits it (one connection each, side by side)."""
    nodes = list(cluster.nodes.order_by("name"))
    if not nodes:
        raise Invalid(f"Cluster {cluster.name} has no nodes.")
    plan = CollectionPlan(
        process_pattern=cluster.process_pattern,
        log_globs=list(cluster.log_globs),
        flight_recorder_globs=[],  # not compared: the dumps are the costliest read
        pyspy_command=cluster.pyspy_command,
    )
    visits = side_by_side(nodes, lambda node: ssh_visit(node.ssh_target(), plan))
    for visit in visits:
        if visit.failure:
            visit.evidence.status = not_gathered(visit.failure.text)
    return SnapshotEvidence(
        nodes=[visit.evidence for visit in visits],
        expected_world_size=cluster.expected_world_size,
        collected_at=timezone.now(),
        cluster=cluster.name,
    )
