"""Push snapshots: a cluster the console cannot reach over SSH sends its evidence instead.

A push cluster's snapshot starts by waiting (`services.snapshot_create`): for
`expected_nodes` bundles, until `upload_until`. Each node runs `hangdesk collect | hangdesk
upload`, and the console stores what arrives through the same function an SSH visit's
evidence takes (`node_work.node_evidence_store`), one node per folder of the bundle. When the
last expected node is in, when a responder says "analyse now", or when the wait ends, the
snapshot moves to its analysis like any other; a wait that ended with nothing fails it.

Upload tokens (`UploadToken`) are the only credential a node needs: random, shown once to the
responder who asked, kept as their SHA-256, valid for this one snapshot while it waits.
Uploads are untrusted bundles read within the import's limits (collectors/bundles.py).
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from analysis.evidence import SnapshotEvidence
from core.errors import Conflict, Invalid
from hangdesk.masking import mask_text
from incidents.models import EventKind, Incident
from incidents.services import timeline_event_record

from .models import SNAPSHOT_FLOW, NodeCollection, NodeStatus, Snapshot, SnapshotStatus, UploadToken
from .node_work import node_evidence_store

TOKEN_PREFIX = "hds_"  # noqa: S105 - marks an upload token (greppable when leaked), not a secret
MAX_TOKEN_CHARS = 200


class UploadRefused(Conflict):
    """The snapshot takes no more bundles (it stopped waiting, or never waited)."""

    field = "bundle"


@dataclass(frozen=True)
class Received:
    """What one upload gave: the nodes it stored, how many are in, whether analysis is due."""

    snapshot: Snapshot
    nodes: tuple[str, ...]
    received: int
    expected: int | None
    analysis_due: bool

    @property
    def progress_text(self) -> str:
        return f"{self.received} of {self.expected}" if self.expected else f"{self.received}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def upload_token_issue(*, snapshot: Snapshot, by: AbstractBaseUser | None) -> str:
    """A new upload token for a waiting push snapshot, returned once: only its hash is kept.
    Tokens issued earlier (to other responders, or the same one) keep working."""
    if not snapshot.waits_for_uploads:
        raise UploadRefused(f"Snapshot {snapshot.pk} does not wait for bundles.")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    UploadToken.objects.create(
        snapshot=snapshot, key_hash=token_hash(token), prefix=token[:12], created_by=by
    )
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SYSTEM,
        summary=f"Upload token {token[:12]}… issued for snapshot {snapshot.pk} "
        f"(valid until {snapshot.upload_until:%H:%M} UTC)",
        author=by,
        details={"snapshot": snapshot.pk, "phase": "upload_token", "prefix": token[:12]},
    )
    return token


def upload_command(*, snapshot: Snapshot, token: str, base_url: str) -> str:
    """The line each node runs: the cluster's own process pattern, logs, dumps and py-spy
    (what an SSH visit would gather), piped to the upload. Every value shell-quoted."""
    cluster = snapshot.cluster
    collect = ["hangdesk", "collect"]
    for glob in cluster.log_globs:
        collect += ["--logs", glob]
    for glob in cluster.flight_recorder_globs:
        collect += ["--flight-recorder", glob]
    collect += ["--pattern", cluster.process_pattern]
    if cluster.pyspy_command != "py-spy":
        collect += ["--py-spy", cluster.pyspy_command]
    if cluster.expected_world_size:
        collect += ["--world-size", str(cluster.expected_world_size)]
    upload = ["hangdesk", "upload", "-", "--url", base_url, "--incident", str(snapshot.incident_id)]
    upload += ["--token", token]
    return f"{shlex.join(collect)} | {shlex.join(upload)}"


def snapshot_of_upload_token(token: str, *, now: datetime | None = None) -> Snapshot | None:
    """The waiting snapshot a token admits bundles to; None for anything else (unknown,
    malformed, or its snapshot no longer waits)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    found = (
        UploadToken.objects.select_related("snapshot__incident", "snapshot__cluster")
        .filter(key_hash=token_hash(token))
        .first()
    )
    if found is None:
        return None
    snapshot = found.snapshot
    if not snapshot.waits_for_uploads or snapshot.upload_until <= (now or timezone.now()):
        return None
    UploadToken.objects.filter(pk=found.pk).update(used_at=timezone.now())
    return snapshot


def waiting_snapshot(incident: Incident) -> Snapshot | None:
    return incident.snapshots.filter(
        status=SnapshotStatus.RUNNING, upload_until__gt=timezone.now()
    ).first()


def push_bundle_store(
    *, snapshot: Snapshot, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> Received:
    """Store every node of one pushed bundle in the snapshot waiting for it (a node that
    sends again replaces what it sent), and move the snapshot to analysis once the last
    expected node is in. Refused when the snapshot no longer waits."""
    if not evidence.nodes:
        raise Invalid("The bundle holds no node directory: nothing to store.", field="bundle")
    now = timezone.now()
    with transaction.atomic():
        # One upload at a time per snapshot: the count that decides "all in" is exact.
        locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
        if not locked.waits_for_uploads or locked.upload_until <= now:
            state = locked.get_status_display()
            raise UploadRefused(
                f"Snapshot {locked.pk} no longer waits for bundles ({state}): start a new "
                "snapshot on the incident and upload to it."
            )
        names = tuple(_store_node(locked, node, now) for node in evidence.nodes)
        if locked.expected_world_size is None and evidence.expected_world_size:
            Snapshot.objects.filter(pk=locked.pk).update(
                expected_world_size=evidence.expected_world_size
            )
        received = locked.collections.count()
        expected = locked.expected_nodes
        due = bool(expected) and received >= expected and _start_analysis(locked)
        if due:
            locked.status = SnapshotStatus.ANALYSING
        if due or received == len(names):  # the first bundle, and the last: on the timeline
            _record_arrival(locked, names, received, expected, due, by)
    return Received(locked, names, received, expected, due)


def _store_node(snapshot: Snapshot, node, now: datetime) -> str:
    name = node.node[:128]
    collection, _ = NodeCollection.objects.update_or_create(
        snapshot=snapshot,
        node_name=name,
        defaults={
            "address": "(pushed)",
            "status": NodeStatus.OK if node.status.gathered else NodeStatus.FAILED,
            "reason": mask_text(node.status.note),  # shown to every viewer
            "started_at": node.collected_at or now,
            "finished_at": now,
        },
    )
    node_evidence_store(collection=collection, evidence=node)
    return name


def _start_analysis(snapshot: Snapshot) -> bool:
    """RUNNING -> ANALYSING, once (True for the one caller that moved it)."""
    moved = SNAPSHOT_FLOW.move(Snapshot.objects.filter(pk=snapshot.pk), SnapshotStatus.ANALYSING)
    return bool(moved)


def _record_arrival(snapshot, names, received, expected, due, by) -> None:
    count = f"{received} of {expected}" if expected else f"{received}"
    tail = "; analysing" if due else ""
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SNAPSHOT,
        summary=f"Snapshot {snapshot.pk}: {', '.join(names[:3])} sent "
        f"{'its' if len(names) == 1 else 'their'} bundle ({count} nodes in){tail}",
        author=by,
        source="push",
        details={"snapshot": snapshot.pk, "phase": "pushed", "received": received,
                 "expected_nodes": expected},
    )  # fmt: skip


def push_snapshot_analyse_now(*, snapshot: Snapshot, by: AbstractBaseUser | None) -> bool:
    """A responder's "analyse what arrived": the wait ends now. False when it had ended."""
    received = snapshot.collections.count()
    if not snapshot.waits_for_uploads:
        return False
    if not received:
        raise Conflict("No node has sent its bundle yet: there is nothing to analyse.")
    if not _start_analysis(snapshot):
        return False
    count = f"{received} of {snapshot.expected_nodes}" if snapshot.expected_nodes else received
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SNAPSHOT,
        summary=f"Snapshot {snapshot.pk}: analysing the {count} nodes that sent their bundle",
        author=by,
        details={"snapshot": snapshot.pk, "phase": "analyse_now", "received": received},
    )
    return True


def push_waits_end(*, now: datetime | None = None) -> tuple[int, ...]:
    """The sweep: push snapshots whose wait is over move to their analysis with what arrived,
    or fail when nothing did. Returns the snapshots whose analysis is now due."""
    now = now or timezone.now()
    over = Snapshot.objects.filter(status=SnapshotStatus.RUNNING, upload_until__lte=now)
    due = []
    for snapshot in over.select_related("incident"):
        received = snapshot.collections.count()
        if received and _start_analysis(snapshot):
            due.append(snapshot.pk)
            text = f"{received} node{'s' if received != 1 else ''} sent their bundle; analysing"
        elif not received and _fail_empty(snapshot, now):
            text = "no node sent its bundle"
        else:
            continue
        timeline_event_record(
            incident=snapshot.incident,
            kind=EventKind.SNAPSHOT,
            summary=f"Snapshot {snapshot.pk} stopped waiting at {snapshot.upload_until:%H:%M} "
            f"UTC: {text}",
            source="worker",
            details={"snapshot": snapshot.pk, "phase": "wait_over", "received": received},
            at=now,
        )
    return tuple(due)


def _fail_empty(snapshot: Snapshot, now: datetime) -> bool:
    moved = SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk, collections__isnull=True),
        SnapshotStatus.FAILED,
        error="No node sent its bundle before the snapshot stopped waiting.",
        finished_at=now,
    )
    return bool(moved)
