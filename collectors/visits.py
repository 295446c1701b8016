"""One visit over SSH and what it gave. `ssh_visit()` runs the probe on a node through
the transport (collectors/remote.py: one pinned connection, one `sh -s`, read under a byte cap
and a deadline) and turns the frames into a `NodeVisit`: the `NodeEvidence`, and a typed
`NodeFailure` (outcomes.py) when the visit failed, whose kind says whether a retry may help.
`run_script()` does the same for another framed script (the watch's read, the scheduler
reads). Expected failures never raise. `hangdesk collect` runs the same probe on the node
itself (hangdesk/collect.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from analysis.evidence import GATHERED, EvidenceStatus, NodeEvidence, stopped_short
from clusters.sshspec import NodeTarget
from hangdesk.evidence_kinds import as_text
from hangdesk.frames import Packed, evidence_from_frames, mark_unfinished
from hangdesk.plan import CollectionPlan

from .outcomes import FailureKind, NodeFailure, NodeVisit
from .remote import CollectionError, ProbeRun, probe_node


def _failure(run: ProbeRun) -> NodeFailure | None:
    """Why the probe gave no usable evidence; None when it gave some, whole or partial."""
    if run.reader.ended:
        return None
    if run.lost:
        text = f"{run.stopped} (partial evidence kept)" if run.reader.frames else run.stopped
        return NodeFailure(FailureKind.CONNECTION_LOST, text or "connection lost")
    if run.reader.started:
        return None
    if run.out_of_time:
        return NodeFailure(
            FailureKind.UNREACHABLE, f"unreachable: no probe output before the {run.stopped}"
        )
    detail = as_text(run.stderr).strip()[-500:]
    noise = as_text(bytes(run.reader.noise)).strip()[:200]
    return NodeFailure(
        FailureKind.PROBE,
        f"probe failed: exit status {run.exit_status}: {detail or noise or 'no output'}",
    )


def _gathered_status(run: ProbeRun) -> EvidenceStatus:
    """Gathered, whole or stopped short (and why)."""
    if run.reader.ended:
        return GATHERED
    if run.stopped:
        return stopped_short(run.stopped)
    if run.exit_status in (124, 137):  # `timeout` on the node stopped the probe
        return stopped_short(f"the probe used up its {run.remote_budget}s on the node")
    detail = as_text(run.stderr).strip()[-500:]
    return stopped_short(f"probe exited with status {run.exit_status} before finishing: {detail}")


@dataclass
class SshVisit(NodeVisit):
    """A visit over SSH, with the frames the node sent compressed (stored as they came)."""

    packed: Packed | None = None


def ssh_visit(target: NodeTarget, plan: CollectionPlan | None = None) -> NodeVisit:
    """Visit one node: its evidence, and why the visit failed if it did (never raised)."""
    plan = plan or CollectionPlan()
    started = time.monotonic()
    collected_at = datetime.now(UTC)
    try:
        run = probe_node(target, plan, started + plan.total_timeout_s)
    except CollectionError as exc:
        evidence = NodeEvidence(node=target.name, collected_at=collected_at)
        return NodeVisit.failed(evidence, exc.failure)
    evidence = evidence_from_frames(target.name, run.reader)
    evidence.collected_at = collected_at
    mark_unfinished(evidence, run.reader)
    if run.stderr.strip():
        evidence.system["probe stderr"] = as_text(run.stderr)
    evidence.system["collection"] = (
        f"{time.monotonic() - started:.2f}s, {run.reader.total} bytes, "
        f"remote exit status {run.exit_status}"
    )
    failure = _failure(run)
    if failure is not None:
        visit = SshVisit.failed(evidence, failure)
        visit.packed = run.reader.packed  # its whole frames: partial evidence is kept too
        return visit
    evidence.status = _gathered_status(run)
    return SshVisit(evidence, packed=run.reader.packed)


@dataclass
class ScriptRun:
    """What a small framed script (the watch's probe) gave: its frames, and why it failed."""

    frames: dict[str, bytes]
    failure: NodeFailure | None
    complete: bool  # the script's end frame arrived
    bytes_read: int
    seconds: float


def run_script(
    target: NodeTarget, plan: CollectionPlan, render: Callable[[str], bytes]
) -> ScriptRun:
    """Run another framed script over the same pinned, bounded connection as ssh_visit():
    `render(nonce)` returns the whole script for `sh -s` (its settings shell-quoted by the
    caller); the plan gives the limits (timeouts, byte caps). Never raises for a node's
    failure."""
    started = time.monotonic()
    try:
        run = probe_node(target, plan, started + plan.total_timeout_s, render)
    except CollectionError as exc:
        return ScriptRun({}, exc.failure, False, 0, time.monotonic() - started)
    failure = _failure(run)
    if failure is None and not run.reader.ended:
        failure = NodeFailure(FailureKind.PROBE, _gathered_status(run).note)
    return ScriptRun(
        dict(run.reader.frames),
        failure,
        run.reader.ended,
        run.reader.total,
        time.monotonic() - started,
    )
