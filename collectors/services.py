"""Snapshot writes, one step each: create, store a bundle, analyse, record a decision (a
snapshot's node visits, claimed, visited and stored, are node_work.py's).

Each step is safe to run twice and returns what happened as a value (outcomes.py); it never
queues work. What runs next, and when a step is retried, is for collectors/tasks.py to say:
this module does not import it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

import analysis
from analysis import rankview
from analysis.diagnosis import Diagnosis, no_cyclic_gc
from analysis.evidence import SnapshotEvidence
from analysis.snapshot_parse import ParsedSnapshot, merge_parses
from clusters.models import ClusterSource
from core.errors import Conflict, Invalid
from hangdesk.masking import mask_json, mask_text, masked_diagnosis
from incidents.models import EventKind, Incident
from incidents.services import incident_require_open, timeline_event_record
from readings import classes, guide

from . import node_work, nodeparse, selectors
from .models import (
    SNAPSHOT_FLOW,
    NodeCollection,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
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
    starts.snapshot_start does, once committed."""
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
            snapshot = _snapshot_row(
                incident,
                by=by,
                source=source,
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
    except IntegrityError as exc:
        return _the_running_one(incident, exc)
    return SnapshotCreated(snapshot, created=True, collection_ids=tuple(c.pk for c in collections))


def _the_running_one(incident: Incident, refused: IntegrityError) -> SnapshotCreated:
    """The partial unique index refused a second running snapshot of the incident: the one
    that runs (or the refusal itself, when none runs: then it was about something else)."""
    active = selectors.active_snapshot(incident)
    if active is None:
        raise refused
    return SnapshotCreated(active, created=False)


def _snapshot_row(incident: Incident, *, by: AbstractBaseUser | None, source: str, **more):
    """A new snapshot of the incident's cluster: who asked (a person, else the source)."""
    cluster = incident.cluster
    return Snapshot.objects.create(
        incident=incident,
        cluster=cluster,
        requested_by=by,
        source="" if by else (source or "system"),
        expected_world_size=cluster.expected_world_size,
        **more,
    )


def _waiting_snapshot_create(
    incident: Incident, *, by: AbstractBaseUser | None, source: str
) -> SnapshotCreated:
    """A push cluster's snapshot: no node to visit, it waits for the bundles its nodes send
    (collectors/push.py) for settings.PUSH_WAIT_S, or returns the one already waiting."""
    cluster = incident.cluster
    until = timezone.now() + timedelta(seconds=settings.PUSH_WAIT_S)
    expected = f"{cluster.expected_nodes} nodes" if cluster.expected_nodes else "its nodes"
    waits = {"expected_nodes": cluster.expected_nodes, "upload_until": until}
    try:
        with transaction.atomic():
            snapshot = _snapshot_row(incident, by=by, source=source, **waits)
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
    except IntegrityError as exc:
        return _the_running_one(incident, exc)
    return SnapshotCreated(snapshot, created=True)


def snapshot_store_bundle(
    *, incident: Incident, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> Snapshot:
    """Store a bundle's evidence as a snapshot of the incident, ready for analysis (which
    starts.snapshot_import_bundle queues)."""
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
            node_work.artifacts_insert(
                row
                for collection, node in zip(collections, evidence.nodes, strict=True)
                for row in node_work.artifact_rows(collection.pk, node)
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


@dataclass
class ReadAhead:
    """What was read before the last node (collectors/read_ahead.py), for the final verdict:
    the nodes' parses, and the merge of the snapshot compared with (while it is the one)."""

    parses: nodeparse.Held = field(default_factory=dict)
    previous_pk: int | None = None
    compared: ParsedSnapshot | None = None
    # What the verdict was made of (the merge, the facts, the typed diagnosis): freed with
    # the rest once the reader is done, not before the verdict's store.
    spent: list = field(default_factory=list)


def snapshot_analyse(*, snapshot_id: int, ahead: ReadAhead | None = None) -> Snapshot | None:
    """Diagnose a collected snapshot and store its diagnosis (per-rank table included)."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status != SnapshotStatus.ANALYSING:
        return None
    # What the verdict is made of is freed after its store (a reader's, after its own end).
    spent = ahead.spent if ahead is not None else []
    try:
        diagnosis, overview = snapshot_diagnosed(snapshot, ahead, spent=spent)
    except Exception as exc:  # the analysis must never leave a snapshot spinning
        log.exception("analysis of snapshot %s failed", snapshot_id)
        error = mask_text(f"analysis: {exc}")[:2000]
        return _snapshot_finish(snapshot, status=SnapshotStatus.FAILED, error=error)
    return _snapshot_finish(
        snapshot, status=SnapshotStatus.DONE, diagnosis=diagnosis, overview=overview
    )


def snapshot_diagnosed(
    snapshot: Snapshot, ahead: ReadAhead | None = None, *, spent: list | None = None
) -> tuple[dict, dict]:
    """The snapshot's diagnosis and rank overview as stored (masked), from what is stored
    (`ahead`: what of it was read already, used where it still holds). `spent`: what they
    were made of is added to it (millions of records: freeing them takes a tenth of a
    second at 32,000 ranks, better spent after the store than before)."""
    previous = compared_snapshot(snapshot, ahead)
    # The reduce: the nodes' stored parses merged (a node without one is parsed here).
    merge = nodeparse.snapshot_parses(snapshot, held=ahead.parses if ahead else None)
    diagnosis = analysis.diagnose_parses(
        merge.head, merge.parses, merge.reparse, previous=previous, kept=spent
    )
    if spent is not None:
        spent += (merge, diagnosis)
    # The overview from the diagnosis at hand (reading the stored JSON back into one cost
    # a second decode of the whole per-rank table: 0.5 s at 8,000 ranks). The cycle
    # collector off: the mask builds a few acyclic dicts a rank (90 collections at 32,000).
    with no_cyclic_gc():
        overview = masked_rank_overview(diagnosis)
        # Stored masked: every reader (pages, API, exports, post-mortems) sees no secret.
        return masked_diagnosis(diagnosis), overview


def compared_snapshot(snapshot: Snapshot, ahead: ReadAhead | None = None) -> ParsedSnapshot | None:
    """The previous snapshot (selectors.previous_snapshot) as the analysis compares with it,
    `parse_snapshot(evidence, flight_recorder=False)`, made from its nodes' stored parses: no
    node of it is parsed again unless its parse is missing or of another version (then from
    its artifacts, without their flight-recorder dumps: most of its bytes at 32,000 ranks).
    The comparison reads a few fields of each rank (node, pid, process seen, last step, stack
    signature: analysis/facts.py, progress.py), but where a rank is is the whole merge's."""
    previous = selectors.previous_snapshot(snapshot)
    if previous is None:
        return None
    if ahead is not None and ahead.compared is not None and ahead.previous_pk == previous.pk:
        return ahead.compared
    return compared_of(previous)


def compared_of(previous: Snapshot) -> ParsedSnapshot:
    """`compared_snapshot`'s merge of the snapshot it chose."""
    # The cycle collector off for the whole of it: a node parsed here from its artifacts
    # builds as many small acyclic records as the merge (at 32,000 ranks from artifacts:
    # 9.6 s CPU with it on, 6.1 s off).
    with no_cyclic_gc():
        merge = nodeparse.snapshot_parses(previous, compared=True)
        return merge_parses(
            merge.parses,
            expected_world_size=merge.head.expected_world_size,
            collected_at=merge.head.collected_at,
            scheduler=merge.head.scheduler,
            scheduler_lines=False,
            flight_recorder=False,
            reparse=merge.reparse,
        )


def rank_overview(diagnosis: dict | None) -> dict | None:
    """The overview the pages read instead of the whole per-rank table (analysis/rankview)."""
    if not diagnosis:
        return None
    return rankview.overview(Diagnosis.from_json(diagnosis)).to_json()


def masked_rank_overview(diagnosis: Diagnosis) -> dict:
    """`rank_overview` of the masked diagnosis, made from the unmasked one and masked after:
    the overview's strings are the diagnosis's own (rows, node names), masked one by one."""
    return mask_json(rankview.overview(diagnosis).to_json())


@transaction.atomic
def _snapshot_finish(
    snapshot: Snapshot,
    *,
    status: str,
    diagnosis: dict | None = None,
    overview: dict | None = None,
    error: str = "",
) -> Snapshot | None:
    now = timezone.now()
    if overview is None:
        overview = rank_overview(diagnosis)
    moved = SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk),
        status,
        diagnosis=diagnosis,
        rank_overview=overview,
        error=error,
        finished_at=now,
        provisional=None,  # the final verdict replaces the first one
    )
    if not moved:
        return None
    # What was just stored is at hand: read back, a 32,000-rank diagnosis is megabytes of JSON
    # fetched and decoded again for its summary.
    snapshot.refresh_from_db(fields=["status", "error", "finished_at", "provisional"])
    snapshot.diagnosis, snapshot.rank_overview = diagnosis, overview
    counts = selectors.node_counts(snapshot)
    summary = (
        f"Snapshot {snapshot.pk} finished: {counts['ok']} nodes ok, {counts['failed']} failed, "
        f"{snapshot.duration_s:.1f} s"
    )
    if diagnosis:
        summary += f" — {diagnosis.get('summary')}"
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
            "classification": diagnosis.get("classification") if diagnosis else None,
        },
        at=now,
    )
    return snapshot


def snapshot_record_decision(
    *, snapshot: Snapshot, by: AbstractBaseUser, classification: str, note: str = ""
):
    """A responder's call on a snapshot: agree with the verdict or override it, pinned."""
    incident_require_open(snapshot.incident_id)
    if classification not in classes.CLASSES:
        raise Invalid(f"classification must be one of {', '.join(classes.CLASSES)}")
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
