"""What the audit log records about evidence: raw reads and exports (core.services.audit_record)."""

from __future__ import annotations

from django.http import HttpRequest

from core.models import AuditAction
from core.services import audit_record, client_ip

from .models import Artifact, Snapshot


def raw_evidence_read(request: HttpRequest, artifact: Artifact, *, via: str = "page") -> None:
    collection = artifact.collection
    snapshot = collection.snapshot
    audit_record(
        user=request.user,
        action=AuditAction.RAW_EVIDENCE_READ,
        target=f"snapshot {snapshot.pk} · {collection.node_name} · {artifact.name}",
        incident_id=snapshot.incident_id,
        snapshot_id=snapshot.pk,
        via=via,
        ip=client_ip(request),
    )


def evidence_exported(request: HttpRequest, snapshot: Snapshot, *, raw: bool, via: str) -> None:
    audit_record(
        user=request.user,
        action=AuditAction.RAW_BUNDLE_EXPORT if raw else AuditAction.BUNDLE_EXPORT,
        target=f"snapshot {snapshot.pk} of {snapshot.incident.reference}"
        + (" (raw)" if raw else " (masked)"),
        incident_id=snapshot.incident_id,
        snapshot_id=snapshot.pk,
        via=via,
        ip=client_ip(request),
    )
