"""A raise: the watch's call that the job hangs, once per hang (a partial unique index: one
open raise per watch), as an incident opened or joined, its snapshots and its verdict on the
incident's timeline, and closed when the job moves again or the watch stops."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from collectors.models import Snapshot, SnapshotStatus
from incidents.models import EventKind, Incident, Severity, Status
from incidents.services import incident_open, timeline_event_record

from . import progress, selectors
from .models import (
    NotifyStatus,
    Watch,
    WatchRaise,
)

SOURCE = "watch"
ACTIVE_INCIDENT = (Status.OPEN, Status.INVESTIGATING, Status.MITIGATED)


def raise_open(
    *, watch: Watch, judgement: progress.Judgement, now: datetime
) -> tuple[WatchRaise, bool]:
    """Open an incident for the cluster, or join its active one, and record the raise: once,
    whatever the number of ticks, workers or redeliveries (the partial unique index)."""
    existing = WatchRaise.objects.filter(watch=watch, closed_at__isnull=True).first()
    if existing:
        return existing, False
    cluster = watch.cluster
    summary = f"Watch: {cluster.name} {judgement.reason}"[:500]
    try:
        with transaction.atomic():
            incident = (
                Incident.objects.filter(cluster=cluster, status__in=ACTIVE_INCIDENT)
                .order_by("-opened_at")
                .first()
            )
            joined = incident is not None
            if incident is None:
                incident = incident_open(
                    opened_by=None,
                    title=_title(cluster.name, judgement),
                    cluster=cluster,
                    severity=Severity.SEV2,
                    description=f"Opened by the watch: {judgement.reason}",
                    source="watch",
                )
            found = WatchRaise.objects.create(
                watch=watch,
                incident=incident,
                reason=judgement.raise_reason,
                summary=summary,
                raised_at=now,
                step=judgement.last_step,
                step_at=judgement.last_step_at,
                threshold_s=judgement.threshold_s,
                notify_status=NotifyStatus.WAITING if watch.webhook_url else NotifyStatus.NONE,
            )
            Watch.objects.filter(pk=watch.pk).update(last_raise_at=now)
            timeline_event_record(
                incident=incident,
                kind=EventKind.SYSTEM,
                summary=f"{summary} — {'joined this incident' if joined else 'incident opened'}",
                source=SOURCE,
                details={
                    "watch_raise": found.pk,
                    "phase": "raised",
                    "reason": judgement.raise_reason,
                    "step": judgement.last_step,
                    "step_at": judgement.last_step_at.isoformat()
                    if judgement.last_step_at
                    else None,
                    "threshold_s": judgement.threshold_s,
                    "step_time_s": judgement.step_time_s,
                    "gone": {node: list(p) for node, p in judgement.gone.items()},
                },
                at=now,
            )
    except IntegrityError:
        existing = WatchRaise.objects.filter(watch=watch, closed_at__isnull=True).first()
        if existing is None:
            raise
        return existing, False
    return found, True


def _title(cluster: str, judgement: progress.Judgement) -> str:
    if judgement.last_step is None:  # an init hang: there is no step to name
        return f"{cluster}: {judgement.state}, no first step"[:200]
    return f"{cluster}: {judgement.state} at step {judgement.last_step}"[:200]


def close_open_raise(watch: Watch, *, why: str, by: AbstractBaseUser | None = None) -> None:
    open_raise = WatchRaise.objects.filter(watch=watch, closed_at__isnull=True).first()
    if open_raise is None:
        return
    closed = WatchRaise.objects.filter(pk=open_raise.pk, closed_at__isnull=True).update(
        closed_at=timezone.now()
    )
    if closed:
        timeline_event_record(
            incident=open_raise.incident,
            kind=EventKind.SYSTEM,
            summary=f"Watch: raise closed, {why}",
            author=by,
            source=SOURCE,
            details={"watch_raise": open_raise.pk, "phase": "closed"},
        )


def raise_record_snapshot(*, raise_id: int, snapshot: Snapshot, which: str) -> bool:
    """Remember the raise's first or second snapshot (once)."""
    field = f"{which}_snapshot"
    updated = WatchRaise.objects.filter(pk=raise_id, **{f"{field}__isnull": True}).update(
        **{field: snapshot}
    )
    if updated:
        raised = selectors.raise_get(raise_id)
        timeline_event_record(
            incident=raised.incident,
            kind=EventKind.SYSTEM,
            summary=f"Watch: {which} snapshot {snapshot.pk} taken"
            + (" (slow or dead: compared with the first)" if which == "second" else ""),
            source=SOURCE,
            details={
                "watch_raise": raise_id,
                "phase": f"{which} snapshot",
                "snapshot": snapshot.pk,
            },
        )
    return bool(updated)


def raise_record_verdict(*, raise_id: int) -> WatchRaise | None:
    """Once the snapshots are done: the verdict (the second's, else the first's) on the raise
    and the timeline. None when it was already recorded."""
    raised = selectors.raise_get(raise_id)
    if raised.verdict_at is not None:
        return None
    verdict = _verdict(raised)
    now = timezone.now()
    updated = WatchRaise.objects.filter(pk=raise_id, verdict_at__isnull=True).update(
        verdict=verdict, verdict_at=now
    )
    if not updated:
        return None
    delay = (now - raised.step_at).total_seconds() if raised.step_at else None
    if verdict:
        summary = f"Watch: verdict {verdict.get('classification')}: {verdict.get('summary', '')}"
    else:
        summary = "Watch: no verdict (the snapshots did not give one)"
    timeline_event_record(
        incident=raised.incident,
        kind=EventKind.SYSTEM,
        summary=summary[:500],
        source=SOURCE,
        details={"watch_raise": raise_id, "phase": "verdict", "hang_to_verdict_s": delay},
        at=now,
    )
    raised.refresh_from_db()
    return raised


def _verdict(raised: WatchRaise) -> dict | None:
    for snapshot_id in (raised.second_snapshot_id, raised.first_snapshot_id):
        if snapshot_id is None:
            continue
        snapshot = Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.DONE).first()
        d = snapshot.read_diagnosis() if snapshot else None
        if d is not None:
            return {
                "snapshot": snapshot.pk,
                "classification": d.classification,
                "summary": d.summary,
                "suspect_ranks": list(d.suspect_ranks[:64]),
                "suspect_nodes": list(d.suspect_nodes[:16]),
                "missing_ranks": list(d.missing_ranks[:64]),
            }
    return None
