"""Reads of the watch: the cluster page's panel, a raise, a heartbeat token's watch."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.models import Cluster
from collectors.models import Snapshot, SnapshotStatus
from core.errors import NotFound

from .figures import WINDOW, step_progress_figure
from .heartbeats import TOKEN_PREFIX, token_hash
from .models import Heartbeat, PreflightRun, StepSample, Watch, WatchRaise


def _age(at: datetime | None, now: datetime) -> float | None:
    return None if at is None else max(0.0, (now - at).total_seconds())


def watch_panel(cluster: Cluster, *, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    watch = Watch.objects.filter(cluster=cluster).first()
    preflight = PreflightRun.objects.filter(cluster=cluster).first()
    if watch is None:
        return {"watch": None, "preflight": preflight, "nodes": [], "heartbeats": []}
    nodes = []
    for node in cluster.nodes.order_by("name"):
        info = watch.nodes.get(node.name) or {}
        seen = parse_datetime(info["seen_at"]) if info.get("seen_at") else None
        nodes.append(
            {
                "name": node.name,
                "age_s": _age(seen, now),
                "processes": info.get("processes"),
                "steps": info.get("steps", False),
                "read_logs": info.get("read_logs", False),
                "error": info.get("error", ""),
                "bytes": info.get("bytes"),
                "seconds": info.get("seconds"),
            }
        )
    heartbeats = [
        {"rank": h.rank if h.rank >= 0 else None, "step": h.step, "age_s": _age(h.at, now),
         "checkpoint": h.checkpoint, "step_time_s": h.step_time_s, "node": h.node}
        for h in Heartbeat.objects.filter(watch=watch).order_by("rank")[:64]
    ]  # fmt: skip
    samples = StepSample.objects.filter(watch=watch, at__gte=now - WINDOW).values_list("at", "step")
    raises = WatchRaise.objects.filter(watch=watch).select_related("incident")
    last_raise = raises.first()
    figure = step_progress_figure(list(samples), now=now, raises=[r.raised_at for r in raises[:20]])
    return {
        "watch": watch,
        "nodes": nodes,
        "heartbeats": heartbeats,
        "last_step_age_s": _age(watch.last_step_at, now),
        "checked_age_s": _age(watch.checked_at, now),
        "last_raise": last_raise,
        "preflight": preflight,
        "figure": figure,
        "has_samples": bool(figure["data"][0]["x"]),
    }


def raise_get(raise_id: int) -> WatchRaise:
    found = WatchRaise.objects.select_related("watch__cluster", "incident").filter(pk=raise_id)
    raised = found.first()
    if raised is None:
        raise NotFound(f"no watch raise {raise_id}")
    return raised


def snapshot_is_active(snapshot_id: int | None) -> bool:
    if snapshot_id is None:
        return False
    status = Snapshot.objects.filter(pk=snapshot_id).values_list("status", flat=True).first()
    return status in (SnapshotStatus.RUNNING, SnapshotStatus.ANALYSING)


def watch_by_token(token: str) -> Watch | None:
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return (
        Watch.objects.select_related("cluster")
        .filter(heartbeat_token_hash=token_hash(token))
        .first()
    )
