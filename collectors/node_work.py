"""A snapshot's node visits, one step each: claim a batch, visit a node (SSH, no database),
store the visits a task finished, store a node's pushed evidence, fail the stale; the last
node in moves the snapshot to analysis.

Like services.py, each step is safe to run twice and returns what happened as a value; what
runs next is for collectors/tasks.py (and fanout.py, which drives a batch) to say.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from analysis.evidence import NodeEvidence
from clusters.sshspec import NodeTarget
from hangdesk.artifacts import artifacts_from_evidence
from hangdesk.budget import TIME_BUDGET
from hangdesk.frames import Packed
from hangdesk.masking import mask_text
from hangdesk.plan import CollectionPlan

from . import gpumetrics, nodeparse
from .models import (
    FINISHED_NODE_STATUSES,
    NODE_FLOW,
    SNAPSHOT_FLOW,
    Artifact,
    NodeCollection,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
)
from .outcomes import FailureKind, NodeFailure, NodeVisit, SweepOutcome
from .visits import SshVisit, ssh_visit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeWork:
    """A node visit a task has claimed, with everything the visit needs: read in the task's
    own thread, so the threads that visit nodes never touch the database."""

    collection_id: int
    snapshot_id: int
    node_name: str
    attempts: int  # this claim included
    target: NodeTarget | None  # None: the node left the cluster
    plan: CollectionPlan | None


def node_work_claim(
    *, task_id: str, collection_ids: tuple[int, ...] = (), snapshot_id: int = 0, limit: int = 0
) -> list[NodeWork]:
    """Claim node visits for the task `task_id`: its own `collection_ids` (pending, or already
    its own: a retried or redelivered copy resumes them), or up to `limit` still-pending
    visits of snapshot `snapshot_id` whose own task has not started yet: of its last ones
    (fewer than twice `limit` left) half, rounded up, so that the processes taking them end
    at about the same time instead of one visiting the fleet's last nodes alone while the
    others are idle. A visit is only ever claimed by one task: the UPDATE re-checks the
    status of each row it locks."""
    if collection_ids:
        rows = NodeCollection.objects.filter(pk__in=collection_ids).filter(
            Q(status=NodeStatus.PENDING) | Q(task_id=task_id)
        )
    else:
        pending = NodeCollection.objects.filter(snapshot_id=snapshot_id, status=NodeStatus.PENDING)
        left = tuple(pending.order_by("pk").values_list("pk", flat=True)[: 2 * limit])
        collection_ids = left[: limit if len(left) == 2 * limit else (len(left) + 1) // 2]
        rows = NodeCollection.objects.filter(pk__in=collection_ids, status=NodeStatus.PENDING)
    if not collection_ids:
        return []
    NODE_FLOW.move(
        rows,
        NodeStatus.RUNNING,
        task_id=task_id,
        attempts=F("attempts") + 1,
        started_at=timezone.now(),
    )
    claimed = NodeCollection.objects.filter(
        pk__in=collection_ids, status=NodeStatus.RUNNING, task_id=task_id
    ).select_related("node", "snapshot__cluster")
    return [_work(collection) for collection in claimed.order_by("node_name")]


def _work(collection: NodeCollection) -> NodeWork:
    target = plan = None
    if collection.node is not None:
        snapshot = collection.snapshot
        target = collection.node.ssh_target()
        plan = _plan_for(
            snapshot.cluster, **_scheduler_plan(snapshot.scheduler, collection.node_name)
        )
    return NodeWork(
        collection.pk, collection.snapshot_id, collection.node_name, collection.attempts,
        target, plan,
    )  # fmt: skip


def node_visit(work: NodeWork) -> NodeVisit:
    """Visit one claimed node over SSH (no database: safe in any thread). Never raises."""
    if work.target is None:
        failure = NodeFailure(FailureKind.NODE_REMOVED, "node removed from the cluster")
        return NodeVisit.failed(NodeEvidence(node=work.node_name), failure)
    try:
        return ssh_visit(work.target, work.plan)
    except Exception as exc:  # a bug here must fail the node, not leave it spinning
        log.exception("collecting %s failed", work.node_name)
        failure = NodeFailure(FailureKind.INTERNAL, f"probe failed: internal error: {exc!r}")
        return NodeVisit.failed(NodeEvidence(node=work.node_name), failure)


def node_visit_retryable(work: NodeWork, visit: NodeVisit) -> bool:
    """A transient failure with attempts left: visit again (nothing is stored meanwhile)."""
    return bool(visit.failure and visit.failure.transient and work.attempts < TIME_BUDGET.attempts)


def _scheduler_plan(scheduler: dict | None, node: str) -> dict:
    """What a scheduler's job adds to a node's visit: the job's own logs there, and for a Ray
    job exactly its workers' pids (none on a node whose workers all died: never the pattern)."""
    scheduler = scheduler or {}
    extra = (scheduler.get("extra_logs") or {}).get(node) or []
    pids = None
    if scheduler.get("kind") == "ray":
        pids = [p for p in (scheduler.get("pids") or {}).get(node) or [] if isinstance(p, int)]
    return {"extra_logs": [p for p in extra if isinstance(p, str)], "pids": pids}


def _plan_for(
    cluster, *, extra_logs: list[str] = (), pids: list[int] | None = None
) -> CollectionPlan:
    return CollectionPlan(
        process_pattern=cluster.process_pattern,
        pids=pids,
        log_globs=[*cluster.log_globs, *(p for p in extra_logs if p not in cluster.log_globs)],
        flight_recorder_globs=list(cluster.flight_recorder_globs),
        pyspy_command=cluster.pyspy_command,
    )


@dataclass(frozen=True)
class Prepared:
    """A finished visit's rows made before its store (`node_result_prepare`)."""

    artifacts: list[ArtifactRow]
    parse: nodeparse.Made | None


def node_result_prepare(work: NodeWork, visit: NodeVisit, ahead: nodeparse.Ahead) -> Prepared:
    """What storing a finished visit writes, made ahead in the task's own thread while other
    visits are out: its artifacts' rows and its parse (reads the database, never writes it).
    The store writes these as they are, or makes again what no longer holds there."""
    final, reason = _outcome(visit)
    # The evidence as artifacts once: the parse reads them back, the rows store them.
    pieces = list(artifacts_from_evidence(visit.evidence))
    parse = ahead.make(
        snapshot_id=work.snapshot_id, collection_id=work.collection_id, node=work.node_name,
        evidence=visit.evidence, status=nodeparse.stored_status(final, reason), pieces=pieces,
    )  # fmt: skip
    rows = artifact_rows(work.collection_id, visit.evidence, _packed(visit), pieces)
    return Prepared(list(rows), parse)


def _outcome(visit: NodeVisit) -> tuple[str, str]:
    final = NodeStatus.FAILED if visit.failure else NodeStatus.OK
    # A failure's text can quote the node's stderr: shown to every viewer, so masked.
    return final, mask_text(visit.evidence.status.note)


def node_results_record(
    *,
    task_id: str,
    results: list[tuple[NodeWork, NodeVisit]],
    prepared: dict[int, Prepared] | None = None,
) -> tuple[int, ...]:
    """Store the visits a task finished, together: each node's status (one UPDATE per kind of
    outcome, not per node), its evidence (one delete and one insert stream for all of them).
    `prepared`: by collection id, what `node_result_prepare` made of them. Rows the task no
    longer owns are left alone. Returns the snapshots whose analysis this made due (the last
    node of each is in)."""
    if not results:
        return ()
    prepared = prepared or {}
    with transaction.atomic():
        ids = [work.collection_id for work, _ in results]
        owned = set(
            NodeCollection.objects.filter(pk__in=ids, status=NodeStatus.RUNNING, task_id=task_id)
            .select_for_update()
            .values_list("pk", flat=True)
        )
        mine = [(work, visit) for work, visit in results if work.collection_id in owned]
        now = timezone.now()
        moves: dict[tuple, list[int]] = {}
        for work, visit in mine:
            final, reason = _outcome(visit)
            moves.setdefault((final, reason, work.attempts), []).append(work.collection_id)
        for (final, reason, attempts), pks in moves.items():
            NODE_FLOW.move(
                NodeCollection.objects.filter(pk__in=pks),
                final,
                reason=reason,
                attempts=attempts,
                finished_at=now,
            )
        # The GPU series read from the click (collectors/gpuclick.py) are not the visit's: kept
        # for a node in, dropped with a node that gave no evidence (as when read after).
        Artifact.objects.filter(collection_id__in=[w.collection_id for w, _ in mine]).exclude(
            name=gpumetrics.DCGM_ARTIFACT, collection__status=NodeStatus.OK
        ).delete()
        artifacts_insert(
            row
            for work, visit in mine
            for row in (
                prepared[work.collection_id].artifacts
                if work.collection_id in prepared
                else artifact_rows(work.collection_id, visit.evidence, _packed(visit))
            )
        )
        # The map half of the analysis, here on the worker that has the nodes in hand, in the
        # same transaction: a node is never in without its parse. (Stored after the commit,
        # another process's last node could start the analysis first, which then parsed
        # these nodes again itself: 250 nodes, 2 processes, 1.5 s of analysis CPU, not 0.5.)
        for snapshot_id in sorted({work.snapshot_id for work, _ in mine}):
            made = {pk: ahead.parse for pk, ahead in prepared.items() if ahead.parse is not None}
            _node_parses_store(
                snapshot_id,
                [(w.collection_id, w.node_name, v.evidence) for w, v in mine
                 if w.snapshot_id == snapshot_id],
                made,
            )  # fmt: skip
    snapshots = sorted({work.snapshot_id for work, _ in mine})
    return tuple(i for i in snapshots if snapshot_finish_if_complete(snapshot_id=i))


def _node_parses_store(snapshot_id: int, nodes: list, made: dict) -> None:
    """In a savepoint: a database error storing the parses loses them (the merge parses those
    nodes itself), never the nodes' statuses and evidence around it."""
    try:
        with transaction.atomic():
            nodeparse.node_parses_store(snapshot_id=snapshot_id, nodes=nodes, made=made)
    except DatabaseError:
        log.exception("storing the parses of snapshot %s's nodes failed", snapshot_id)


def node_evidence_store(*, collection: NodeCollection, evidence: NodeEvidence) -> None:
    """Store one node's evidence for its snapshot: the one way a node's evidence enters the
    console, whether an SSH visit gathered it or the node pushed a bundle. Replaces, never
    appends: a redelivered task or a node that sends again stores its evidence once."""
    Artifact.objects.filter(collection=collection).delete()
    artifacts_insert(artifact_rows(collection.pk, evidence))
    nodeparse.node_parses_store(
        snapshot_id=collection.snapshot_id, nodes=[(collection.pk, collection.node_name, evidence)]
    )


# Stored compressed once, at level 1: on a farm node's 131 KB of evidence 6 % larger than
# level 6 (38.6 against 36.3 KB) for a quarter less of the worker's CPU (2.4 against 3.3 ms).
ARTIFACT_ZLIB_LEVEL = 1
ArtifactRow = tuple[int, str, bytes, int, bool]  # collection id, name, compressed, size, truncated


def artifact_rows(
    collection_id: int,
    evidence: NodeEvidence,
    packed: Packed | None = None,
    pieces: list[tuple[str, bytes, bool]] | None = None,
) -> Iterator[ArtifactRow]:
    """The artifacts' rows, each compressed: as the node sent it when it came compressed with
    exactly this content (`packed`: inflated and checked whole on the way in), else here.
    `pieces`: `artifacts_from_evidence(evidence)` when the caller has it already."""
    pieces = artifacts_from_evidence(evidence) if pieces is None else pieces
    for name, content, truncated in pieces:
        compressed = packed.find(content) if packed is not None else None
        if compressed is None:
            compressed = zlib.compress(content, ARTIFACT_ZLIB_LEVEL)
        yield collection_id, name[:1024], compressed, len(content), truncated


def _packed(visit: NodeVisit) -> Packed | None:
    return visit.packed if isinstance(visit, SshVisit) else None


def artifacts_insert(rows: Iterable[ArtifactRow]) -> None:
    """One insert stream for many nodes' artifacts: PostgreSQL's COPY (the ORM's INSERT of a
    node's ~50 artifacts cost the worker ~10 ms a node in its per-row and per-parameter
    work, more than the SSH visit), else the ORM's bulk insert."""
    if connection.vendor != "postgresql":
        Artifact.objects.bulk_create(
            (Artifact(collection_id=c, name=n, compressed=z, size=s, truncated=t)
             for c, n, z, s, t in rows),
            batch_size=1000,
        )  # fmt: skip
        return
    meta = Artifact._meta
    fields = [meta.get_field(f) for f in ("collection", "name", "compressed", "size", "truncated")]
    columns = ", ".join(f.column for f in fields)
    # Binary: the compressed bytes go as they are (the text format writes bytea as hex, twice
    # the bytes, escaped in the worker: 3.4 against 0.25 ms a node at 32,000 ranks).
    statement = f"COPY {meta.db_table} ({columns}) FROM STDIN (FORMAT BINARY)"
    types = [f.db_type(connection).split("(", 1)[0] for f in fields]  # varchar(1024): varchar
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def node_collection_fail_stale(*, older_than: timedelta = TIME_BUDGET.stale_after) -> SweepOutcome:
    """Fail the visits whose worker vanished long ago; the outcome names the snapshots whose
    analysis that made due."""
    cutoff = timezone.now() - older_than
    stale = NodeCollection.objects.filter(
        Q(status=NodeStatus.RUNNING, started_at__lt=cutoff)
        | Q(status=NodeStatus.PENDING, snapshot__started_at__lt=cutoff)
    )
    snapshot_ids = set(stale.values_list("snapshot_id", flat=True))
    count = NODE_FLOW.move(
        stale,
        NodeStatus.FAILED,
        reason="no worker finished this node in time (worker lost?)",
        finished_at=timezone.now(),
    )
    due = tuple(i for i in sorted(snapshot_ids) if snapshot_finish_if_complete(snapshot_id=i))
    return SweepOutcome(failed=count, analysis_due=due)


def snapshot_finish_if_complete(*, snapshot_id: int) -> bool:
    """When the last node is in, move the snapshot to analysis (exactly once): True for the
    one caller that moved it, whose task then queues the analysis."""
    unfinished = NodeCollection.objects.filter(snapshot_id=snapshot_id).exclude(
        status__in=FINISHED_NODE_STATUSES
    )
    if unfinished.exists():
        return False
    moved = SNAPSHOT_FLOW.move(Snapshot.objects.filter(pk=snapshot_id), SnapshotStatus.ANALYSING)
    if moved and connection.vendor == "postgresql":
        # Heard by the snapshot's reader (read_ahead.py), which would see it at its next look;
        # in a transaction, sent with its commit.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [last_node_channel(snapshot_id)])
    return bool(moved)


def last_node_channel(snapshot_id: int) -> str:
    """PostgreSQL's channel on which a snapshot's move to analysis is announced."""
    return f"hangdesk_snapshot_{snapshot_id}_in"
