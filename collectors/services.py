"""Snapshot writes: start, collect one node, analyse. Each step is safe to run twice."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

import analysis
from analysis import guide
from analysis.evidence import NodeEvidence, SnapshotEvidence
from incidents.models import EventKind, Incident
from incidents.services import timeline_event_record

from . import remote, selectors
from .artifacts import artifacts_from_evidence
from .models import (
    FINISHED_NODE_STATUSES,
    Artifact,
    NodeCollection,
    NodeStatus,
    RankRecord,
    Snapshot,
    SnapshotStatus,
)

log = logging.getLogger(__name__)

# One retry for a node that timed out or reset: enough for a blip, short enough for 3 a.m.
MAX_ATTEMPTS = 2


class SnapshotRefused(Exception):
    """The snapshot cannot start (for example: the cluster has no nodes)."""


def snapshot_start(
    *, incident: Incident, by: AbstractBaseUser | None = None, source: str = ""
) -> tuple[Snapshot, bool]:
    """Start a snapshot of the incident's cluster, or return the one already running.

    Returns (snapshot, created). The node tasks are queued once the rows are committed.
    """
    cluster = incident.cluster
    nodes = list(cluster.nodes.order_by("name"))
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
        return active, False
    ids = [c.pk for c in collections]
    transaction.on_commit(lambda: _queue_node_tasks(ids))
    return snapshot, True


def snapshot_import_bundle(
    *, incident: Incident, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> Snapshot:
    """Store a bundle's evidence as a snapshot of the incident, then analyse it like any other."""
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
            )
            collections = NodeCollection.objects.bulk_create(
                NodeCollection(
                    snapshot=snapshot,
                    node_name=node.node,
                    address="(bundle)",
                    status=NodeStatus.FAILED if remote.error_kind(node.status) else NodeStatus.OK,
                    reason=node.status,
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
    from .tasks import analyse_snapshot

    transaction.on_commit(lambda: analyse_snapshot.delay(snapshot.pk))
    return snapshot


def _queue_node_tasks(collection_ids: list[int]) -> None:
    from .tasks import collect_node

    for collection_id in collection_ids:
        collect_node.delay(collection_id)


def node_collection_run(*, collection_id: int, task_id: str) -> str | None:
    """Visit one node and store what it gave. Returns the node's final status, or None
    when the work belongs to another task or is already done.

    Raises remote.TransientCollectionError when a retry is worth it (the task retries with
    the same task id, which may resume its own claim).
    """
    claimed = (
        NodeCollection.objects.filter(pk=collection_id)
        .filter(Q(status=NodeStatus.PENDING) | Q(status=NodeStatus.RUNNING, task_id=task_id))
        .update(
            status=NodeStatus.RUNNING,
            task_id=task_id,
            attempts=F("attempts") + 1,
            started_at=timezone.now(),
        )
    )
    if not claimed:
        return None
    collection = NodeCollection.objects.select_related("node", "snapshot__cluster").get(
        pk=collection_id
    )
    if collection.node is None:
        evidence = NodeEvidence(node=collection.node_name, status="node removed from the cluster")
    else:
        try:
            evidence = remote.collect_node(
                _target_for(collection.node), _plan_for(collection.snapshot.cluster)
            )
        except Exception as exc:  # a bug here must fail the node, not leave it spinning
            log.exception("collecting %s failed", collection.node_name)
            evidence = NodeEvidence(
                node=collection.node_name, status=f"probe failed: internal error: {exc!r}"
            )
        if remote.error_kind(evidence.status) == "transient" and collection.attempts < MAX_ATTEMPTS:
            remote.raise_for_status(evidence)
    final = NodeStatus.FAILED if remote.error_kind(evidence.status) else NodeStatus.OK
    if not _record_node_result(collection, task_id, final, evidence):
        return None
    snapshot_finish_if_complete(snapshot_id=collection.snapshot_id)
    return final


def _target_for(node) -> remote.NodeTarget:
    return remote.NodeTarget(
        name=node.name,
        address=node.address,
        port=node.port,
        username=node.username,
        key_path=node.key_path or None,
        host_key=node.host_key,
    )


def _plan_for(cluster) -> remote.CollectionPlan:
    return remote.CollectionPlan(
        process_pattern=cluster.process_pattern,
        log_globs=list(cluster.log_globs),
        flight_recorder_globs=list(cluster.flight_recorder_globs),
        pyspy_command=cluster.pyspy_command,
    )


@transaction.atomic
def _record_node_result(
    collection: NodeCollection, task_id: str, final: str, evidence: NodeEvidence
) -> bool:
    finished = NodeCollection.objects.filter(
        pk=collection.pk, status=NodeStatus.RUNNING, task_id=task_id
    ).update(status=final, reason=evidence.status, finished_at=timezone.now())
    if not finished:
        return False
    # Replace, never append: a redelivered task stores the node's evidence exactly once.
    Artifact.objects.filter(collection=collection).delete()
    _store_artifacts(collection, evidence)
    return True


def _store_artifacts(collection: NodeCollection, evidence: NodeEvidence) -> None:
    Artifact.objects.bulk_create(_artifacts(collection, evidence))


def _artifacts(collection: NodeCollection, evidence: NodeEvidence) -> Iterator[Artifact]:
    for name, content, truncated in artifacts_from_evidence(evidence):
        yield Artifact(
            collection=collection,
            name=name[:1024],
            compressed=zlib.compress(content, 6),
            size=len(content),
            truncated=truncated,
        )


def node_collection_fail_stale(*, older_than: timedelta) -> int:
    """Mark collections whose worker vanished long ago as failed; returns how many."""
    cutoff = timezone.now() - older_than
    stale = NodeCollection.objects.filter(
        Q(status=NodeStatus.RUNNING, started_at__lt=cutoff)
        | Q(status=NodeStatus.PENDING, snapshot__started_at__lt=cutoff)
    )
    snapshot_ids = set(stale.values_list("snapshot_id", flat=True))
    count = stale.update(
        status=NodeStatus.FAILED,
        reason="no worker finished this node in time (worker lost?)",
        finished_at=timezone.now(),
    )
    for snapshot_id in snapshot_ids:
        snapshot_finish_if_complete(snapshot_id=snapshot_id)
    return count


def snapshot_finish_if_complete(*, snapshot_id: int) -> bool:
    """When the last node is in, move the snapshot to analysis (exactly once)."""
    unfinished = NodeCollection.objects.filter(snapshot_id=snapshot_id).exclude(
        status__in=FINISHED_NODE_STATUSES
    )
    if unfinished.exists():
        return False
    moved = Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).update(
        status=SnapshotStatus.ANALYSING
    )
    if moved:
        from .tasks import analyse_snapshot

        transaction.on_commit(lambda: analyse_snapshot.delay(snapshot_id))
    return bool(moved)


def snapshot_analyse(*, snapshot_id: int) -> Snapshot | None:
    """Diagnose a collected snapshot and store the verdict and per-rank rows."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status != SnapshotStatus.ANALYSING:
        return None
    evidence = selectors.snapshot_evidence(snapshot)
    previous = selectors.previous_snapshot(snapshot)
    previous_evidence = selectors.snapshot_evidence(previous) if previous else None
    try:
        diagnosed = analysis.diagnose(evidence, previous=previous_evidence)
        diagnosis, ranks = diagnosed.to_json(), diagnosed.rank_states
    except Exception as exc:  # the analysis must never leave a snapshot spinning
        log.exception("analysis of snapshot %s failed", snapshot_id)
        return _snapshot_finish(snapshot, status=SnapshotStatus.FAILED, error=f"analysis: {exc}")
    return _snapshot_finish(snapshot, status=SnapshotStatus.DONE, diagnosis=diagnosis, ranks=ranks)


@transaction.atomic
def _snapshot_finish(
    snapshot: Snapshot,
    *,
    status: str,
    diagnosis: dict | None = None,
    ranks: list | None = None,
    error: str = "",
) -> Snapshot | None:
    now = timezone.now()
    moved = Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.ANALYSING).update(
        status=status, diagnosis=diagnosis, error=error, finished_at=now
    )
    if not moved:
        return None
    RankRecord.objects.filter(snapshot=snapshot).delete()
    RankRecord.objects.bulk_create(_rank_record(snapshot, r) for r in ranks or [])
    snapshot.refresh_from_db()
    counts = selectors.node_counts(snapshot)
    summary = (
        f"Snapshot {snapshot.pk} finished: {counts['ok']} nodes ok, {counts['failed']} failed, "
        f"{snapshot.duration_s:.1f} s"
    )
    if diagnosis:
        summary += f" — {diagnosis.get('summary', '')}"
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
            "classification": (diagnosis or {}).get("classification"),
        },
        at=now,
    )
    return snapshot


def _rank_record(snapshot: Snapshot, rank) -> RankRecord:
    return RankRecord(
        snapshot=snapshot,
        rank=rank.rank,
        node_name=rank.node or "",
        pid=rank.pid,
        local_rank=rank.local_rank,
        state=rank.state or "",
        stack_signature=rank.stack_signature or "",
        innermost_frame=(rank.innermost_frame or "")[:255],
        last_step=rank.last_step,
        last_step_at=rank.last_step_at,
        exit_code=rank.exit_code,
    )


def snapshot_record_decision(
    *, snapshot: Snapshot, by: AbstractBaseUser, classification: str, note: str = ""
):
    """A responder's call on a snapshot: agree with the verdict or override it, pinned."""
    if classification not in guide.CLASS_NAMES:
        raise ValueError(f"classification must be one of {', '.join(guide.CLASS_NAMES)}")
    suggested = (snapshot.diagnosis or {}).get("classification")
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
