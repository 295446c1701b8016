"""Snapshot writes, one step each: create, collect one node, sweep, analyse.

Each step is safe to run twice and returns what happened as a value (outcomes.py); it never
queues work. What runs next, and when a step is retried, is for collectors/tasks.py to say:
this module does not import it.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

import analysis
from analysis import guide
from analysis.evidence import NodeEvidence, SnapshotEvidence
from clusters.models import ClusterSource
from core.errors import Conflict, Invalid
from hangdesk.artifacts import artifacts_from_evidence
from hangdesk.budget import TIME_BUDGET
from hangdesk.masking import mask_json, mask_text, masked_diagnosis
from incidents.models import EventKind, Incident
from incidents.services import incident_require_open, timeline_event_record

from . import nodeparse, remote, selectors
from .models import (
    FINISHED_NODE_STATUSES,
    NODE_FLOW,
    SNAPSHOT_FLOW,
    Artifact,
    NodeCollection,
    NodeParseRecord,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
)
from .outcomes import (
    Collected,
    Failed,
    FailureKind,
    NodeFailure,
    NodeOutcome,
    NodeVisit,
    NotClaimed,
    Retryable,
    SweepOutcome,
)

log = logging.getLogger(__name__)


class SnapshotRefused(Conflict):
    """The snapshot cannot start (for example: the cluster has no nodes)."""


@dataclass(frozen=True)
class SnapshotCreated:
    snapshot: Snapshot
    # False: one was already running for the incident, and this is it.
    created: bool
    # The node visits to make (empty when not created).
    collection_ids: tuple[int, ...] = ()


def snapshot_create(
    *,
    incident: Incident,
    by: AbstractBaseUser | None = None,
    source: str = "",
    nodes: list | None = None,
    scheduler: dict | None = None,
) -> SnapshotCreated:
    """Create a snapshot of the incident's cluster with one pending visit per node (or per
    node of `nodes`: a scheduler's job), or return the one already running. Queues nothing:
    tasks.snapshot_start does, once committed."""
    incident_require_open(incident)
    cluster = incident.cluster
    if cluster.source == ClusterSource.PUSH:
        return _waiting_snapshot_create(incident, by=by, source=source)
    if nodes is None and cluster.uses_scheduler:
        raise SnapshotRefused(
            f"Cluster {cluster.name} finds its nodes through {cluster.get_source_display()}: "
            "a snapshot starts from the job (its id on the incident)."
        )
    if nodes is None:
        nodes = list(cluster.nodes.order_by("name"))
    else:
        nodes = sorted(nodes, key=lambda n: n.name)
    if not nodes:
        raise SnapshotRefused(f"Cluster {cluster.name} has no nodes: add them on its page first.")
    try:
        with transaction.atomic():
            snapshot = Snapshot.objects.create(
                incident=incident,
                cluster=cluster,
                requested_by=by,
                source="" if by else (source or "system"),
                expected_world_size=cluster.expected_world_size,
                # Slurm's output may carry a job's Comment= or Command= arguments: masked.
                scheduler=mask_json(scheduler) if scheduler else None,
            )
            collections = NodeCollection.objects.bulk_create(
                NodeCollection(snapshot=snapshot, node=n, node_name=n.name, address=n.address)
                for n in nodes
            )
            timeline_event_record(
                incident=incident,
                kind=EventKind.SNAPSHOT,
                summary=f"Snapshot {snapshot.pk} started: {len(nodes)} nodes",
                author=by,
                source=source,
                details={"snapshot": snapshot.pk, "nodes": len(nodes), "phase": "started"},
            )
    except IntegrityError:
        # The partial unique index says one is already running for this incident.
        active = selectors.active_snapshot(incident)
        if active is None:
            raise
        return SnapshotCreated(active, created=False)
    return SnapshotCreated(snapshot, created=True, collection_ids=tuple(c.pk for c in collections))


def _waiting_snapshot_create(
    incident: Incident, *, by: AbstractBaseUser | None, source: str
) -> SnapshotCreated:
    """A push cluster's snapshot: no node to visit, it waits for the bundles its nodes send
    (collectors/push.py) for settings.PUSH_WAIT_S, or returns the one already waiting."""
    cluster = incident.cluster
    until = timezone.now() + timedelta(seconds=settings.PUSH_WAIT_S)
    expected = f"{cluster.expected_nodes} nodes" if cluster.expected_nodes else "its nodes"
    try:
        with transaction.atomic():
            snapshot = Snapshot.objects.create(
                incident=incident,
                cluster=cluster,
                requested_by=by,
                source="" if by else (source or "system"),
                expected_world_size=cluster.expected_world_size,
                expected_nodes=cluster.expected_nodes,
                upload_until=until,
            )
            timeline_event_record(
                incident=incident,
                kind=EventKind.SNAPSHOT,
                summary=f"Snapshot {snapshot.pk} started: waiting for {expected} to send "
                f"their bundles (hangdesk collect | hangdesk upload) until {until:%H:%M} UTC",
                author=by,
                source=source,
                details={"snapshot": snapshot.pk, "phase": "started", "push": True,
                         "expected_nodes": cluster.expected_nodes},
            )  # fmt: skip
    except IntegrityError:
        active = selectors.active_snapshot(incident)
        if active is None:
            raise
        return SnapshotCreated(active, created=False)
    return SnapshotCreated(snapshot, created=True)


def snapshot_store_bundle(
    *, incident: Incident, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> Snapshot:
    """Store a bundle's evidence as a snapshot of the incident, ready for analysis (which
    tasks.snapshot_import_bundle queues)."""
    incident_require_open(incident)
    if not evidence.nodes:
        raise SnapshotRefused("The bundle holds no node directories: nothing to analyse.")
    now = timezone.now()
    try:
        with transaction.atomic():
            snapshot = Snapshot.objects.create(
                incident=incident,
                cluster=incident.cluster,
                requested_by=by,
                source="bundle",
                status=SnapshotStatus.ANALYSING,
                collected_at=evidence.collected_at,
                expected_world_size=evidence.expected_world_size
                or incident.cluster.expected_world_size,
                scheduler=mask_json(evidence.scheduler) if evidence.scheduler else None,
            )
            collections = NodeCollection.objects.bulk_create(
                NodeCollection(
                    snapshot=snapshot,
                    node_name=node.node,
                    address="(bundle)",
                    status=NodeStatus.OK if node.status.gathered else NodeStatus.FAILED,
                    reason=mask_text(node.status.note),
                    started_at=now,
                    finished_at=now,
                )
                for node in evidence.nodes
            )
            # One insert stream for every node's artifacts, not two queries per node.
            Artifact.objects.bulk_create(
                (
                    artifact
                    for collection, node in zip(collections, evidence.nodes, strict=True)
                    for artifact in _artifacts(collection, node)
                ),
                batch_size=1000,
            )
            timeline_event_record(
                incident=incident,
                kind=EventKind.SNAPSHOT,
                summary=f"Snapshot {snapshot.pk} imported from a bundle: "
                f"{len(evidence.nodes)} nodes",
                author=by,
                source="bundle",
                details={
                    "snapshot": snapshot.pk,
                    "nodes": len(evidence.nodes),
                    "phase": "imported",
                },
            )
    except IntegrityError as exc:
        raise SnapshotRefused(
            "A snapshot of this incident is still running; import the bundle once it is done."
        ) from exc
    return snapshot


def node_collection_run(*, collection_id: int, task_id: str) -> NodeOutcome:
    """Visit one node and store what it gave, under a claim only this task id holds (its own
    retried or redelivered copy may resume it). `Retryable` stores nothing and keeps the
    claim; `Collected` and `Failed` say whether the snapshot's analysis is now due."""
    claimed = NODE_FLOW.move(
        NodeCollection.objects.filter(pk=collection_id).filter(
            Q(status=NodeStatus.PENDING) | Q(task_id=task_id)
        ),
        NodeStatus.RUNNING,
        task_id=task_id,
        attempts=F("attempts") + 1,
        started_at=timezone.now(),
    )
    if not claimed:
        return NotClaimed()
    collection = NodeCollection.objects.select_related("node", "snapshot__cluster").get(
        pk=collection_id
    )
    visit = _visit(collection)
    failure = visit.failure
    if failure and failure.transient and collection.attempts < TIME_BUDGET.attempts:
        return Retryable(failure, attempt=collection.attempts)
    final = NodeStatus.FAILED if failure else NodeStatus.OK
    if not _record_node_result(collection, task_id, final, visit.evidence):
        return NotClaimed()
    due = snapshot_finish_if_complete(snapshot_id=collection.snapshot_id)
    if failure:
        return Failed(failure, snapshot_id=collection.snapshot_id, analysis_due=due)
    return Collected(snapshot_id=collection.snapshot_id, analysis_due=due)


def _visit(collection: NodeCollection) -> NodeVisit:
    if collection.node is None:
        failure = NodeFailure(FailureKind.NODE_REMOVED, "node removed from the cluster")
        return NodeVisit.failed(NodeEvidence(node=collection.node_name), failure)
    try:
        snapshot = collection.snapshot
        plan = _plan_for(
            snapshot.cluster, **_scheduler_plan(snapshot.scheduler, collection.node_name)
        )
        return remote.collect_node(collection.node.ssh_target(), plan)
    except Exception as exc:  # a bug here must fail the node, not leave it spinning
        log.exception("collecting %s failed", collection.node_name)
        failure = NodeFailure(FailureKind.INTERNAL, f"probe failed: internal error: {exc!r}")
        return NodeVisit.failed(NodeEvidence(node=collection.node_name), failure)


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
) -> remote.CollectionPlan:
    return remote.CollectionPlan(
        process_pattern=cluster.process_pattern,
        pids=pids,
        log_globs=[*cluster.log_globs, *(p for p in extra_logs if p not in cluster.log_globs)],
        flight_recorder_globs=list(cluster.flight_recorder_globs),
        pyspy_command=cluster.pyspy_command,
    )


@transaction.atomic
def _record_node_result(
    collection: NodeCollection, task_id: str, final: str, evidence: NodeEvidence
) -> bool:
    finished = NODE_FLOW.move(
        NodeCollection.objects.filter(pk=collection.pk, status=NodeStatus.RUNNING, task_id=task_id),
        final,
        # A failure's text can quote the node's stderr: shown to every viewer, so masked.
        reason=mask_text(evidence.status.note),
        finished_at=timezone.now(),
    )
    if not finished:
        return False
    node_evidence_store(collection=collection, evidence=evidence)
    return True


def node_evidence_store(*, collection: NodeCollection, evidence: NodeEvidence) -> None:
    """Store one node's evidence for its snapshot: the one way a node's evidence enters the
    console, whether an SSH visit gathered it or the node pushed a bundle. Replaces, never
    appends: a redelivered task or a node that sends again stores its evidence once."""
    Artifact.objects.filter(collection=collection).delete()
    Artifact.objects.bulk_create(_artifacts(collection, evidence))
    try:
        # The map half of the analysis, here on the worker that has the node in hand.
        nodeparse.node_parse_store(collection=collection, evidence=evidence)
    except Exception:  # the merge parses a node without a record itself: never fatal here
        log.exception("parsing %s's evidence failed", collection.node_name)
        NodeParseRecord.objects.filter(collection=collection).delete()


def _artifacts(collection: NodeCollection, evidence: NodeEvidence) -> Iterator[Artifact]:
    for name, content, truncated in artifacts_from_evidence(evidence):
        yield Artifact(
            collection=collection,
            name=name[:1024],
            compressed=zlib.compress(content, 6),
            size=len(content),
            truncated=truncated,
        )


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
    return bool(moved)


def snapshot_analyse(*, snapshot_id: int) -> Snapshot | None:
    """Diagnose a collected snapshot and store its diagnosis (per-rank table included)."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status != SnapshotStatus.ANALYSING:
        return None
    previous = selectors.previous_snapshot(snapshot)
    previous_evidence = selectors.snapshot_evidence(previous) if previous else None
    try:
        # The reduce: the nodes' stored parses merged (a node without one is parsed here).
        merge = nodeparse.snapshot_parses(snapshot)
        diagnosis = analysis.diagnose_parses(
            merge.head, merge.parses, merge.reparse, previous=previous_evidence
        )
        # Stored masked: every reader (pages, API, exports, post-mortems) sees no secret.
        diagnosis = masked_diagnosis(diagnosis)
    except Exception as exc:  # the analysis must never leave a snapshot spinning
        log.exception("analysis of snapshot %s failed", snapshot_id)
        error = mask_text(f"analysis: {exc}")[:2000]
        return _snapshot_finish(snapshot, status=SnapshotStatus.FAILED, error=error)
    return _snapshot_finish(snapshot, status=SnapshotStatus.DONE, diagnosis=diagnosis)


@transaction.atomic
def _snapshot_finish(
    snapshot: Snapshot,
    *,
    status: str,
    diagnosis: dict | None = None,
    error: str = "",
) -> Snapshot | None:
    now = timezone.now()
    moved = SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk),
        status,
        diagnosis=diagnosis,
        error=error,
        finished_at=now,
        provisional=None,  # the final verdict replaces the first one
    )
    if not moved:
        return None
    snapshot.refresh_from_db()
    counts = selectors.node_counts(snapshot)
    summary = (
        f"Snapshot {snapshot.pk} finished: {counts['ok']} nodes ok, {counts['failed']} failed, "
        f"{snapshot.duration_s:.1f} s"
    )
    stored = snapshot.read_diagnosis()
    if stored:
        summary += f" — {stored.summary}"
    if error:
        summary += f" — {error}"
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SNAPSHOT,
        summary=summary,
        source="worker",
        details={
            "snapshot": snapshot.pk,
            "phase": "finished",
            "nodes_ok": counts["ok"],
            "nodes_failed": counts["failed"],
            "duration_s": snapshot.duration_s,
            "classification": stored.classification if stored else None,
        },
        at=now,
    )
    return snapshot


def snapshot_record_decision(
    *, snapshot: Snapshot, by: AbstractBaseUser, classification: str, note: str = ""
):
    """A responder's call on a snapshot: agree with the verdict or override it, pinned."""
    incident_require_open(snapshot.incident_id)
    if classification not in guide.CLASS_NAMES:
        raise Invalid(f"classification must be one of {', '.join(guide.CLASS_NAMES)}")
    diagnosis = snapshot.read_diagnosis()
    suggested = diagnosis.classification if diagnosis else None
    agreed = classification == suggested
    verb = "confirmed" if agreed else f"overrode {suggested or 'no verdict'} with"
    summary = f"Decision on snapshot {snapshot.pk}: {verb} {guide.class_name(classification)}"
    return timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.DECISION,
        summary=f"{summary} — {note}" if note else summary,
        author=by,
        details={
            "snapshot": snapshot.pk,
            "classification": classification,
            "suggested": suggested,
            "agreed": agreed,
            "note": note,
        },
        pinned=True,
    )
