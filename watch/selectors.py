"""Reads of the watch: the cluster page's panel, a raise, a heartbeat token's watch."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.models import Cluster
from collectors.models import Snapshot, SnapshotStatus
from core.errors import NotFound

from .figures import WINDOW, step_progress_figure
from .forms import WatchForm
from .heartbeats import TOKEN_PREFIX, token_hash
from .models import Heartbeat, PreflightRun, StepSample, Watch, WatchRaise


def _age(at: datetime | None, now: datetime) -> float | None:
    return None if at is None else max(0.0, (now - at).total_seconds())


@dataclass(frozen=True)
class WatchPanel:
    """The watch's panel on the cluster page: the watch and what it last read of each node,
    the pushed heartbeats, the step chart, the last raise and the last preflight."""

    cluster: Cluster
    watch: Watch | None  # None: the cluster was never watched (only `preflight` is shown)
    preflight: PreflightRun | None
    nodes: list[dict] = field(default_factory=list)
    heartbeats: list[dict] = field(default_factory=list)
    last_step_age_s: float | None = None
    checked_age_s: float | None = None
    last_raise: WatchRaise | None = None
    figure: dict | None = None
    has_samples: bool = False

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def watch_panel(cluster: Cluster, *, now: datetime | None = None) -> WatchPanel:
    """Six queries whatever the number of nodes, heartbeats or raises."""
    now = now or timezone.now()
    watch = Watch.objects.filter(cluster=cluster).first()
    preflight = PreflightRun.objects.filter(cluster=cluster).first()
    if watch is None:
        return WatchPanel(cluster=cluster, watch=None, preflight=preflight)
    samples = StepSample.objects.filter(watch=watch, at__gte=now - WINDOW).values_list("at", "step")
    raises = list(WatchRaise.objects.filter(watch=watch).select_related("incident")[:20])
    figure = step_progress_figure(list(samples), now=now, raises=[r.raised_at for r in raises])
    return WatchPanel(
        cluster=cluster,
        watch=watch,
        preflight=preflight,
        nodes=_node_reads(cluster, watch, now),
        heartbeats=_heartbeats(watch, now),
        last_step_age_s=_age(watch.last_step_at, now),
        checked_age_s=_age(watch.checked_at, now),
        last_raise=raises[0] if raises else None,
        figure=figure,
        has_samples=bool(figure["data"][0]["x"]),
    )


def _node_reads(cluster: Cluster, watch: Watch, now: datetime) -> list[dict]:
    """Each node as the watch last read it (stored on the watch, one query for the names)."""
    nodes = []
    for name in cluster.nodes.order_by("name").values_list("name", flat=True):
        info = watch.nodes.get(name) or {}
        seen = parse_datetime(info["seen_at"]) if info.get("seen_at") else None
        nodes.append(
            {
                "name": name,
                "age_s": _age(seen, now),
                "processes": info.get("processes"),
                "steps": info.get("steps", False),
                "read_logs": info.get("read_logs", False),
                "error": info.get("error", ""),
                "bytes": info.get("bytes"),
                "seconds": info.get("seconds"),
            }
        )
    return nodes


def _heartbeats(watch: Watch, now: datetime) -> list[dict]:
    return [
        {"rank": h.rank if h.rank >= 0 else None, "step": h.step, "age_s": _age(h.at, now),
         "checkpoint": h.checkpoint, "step_time_s": h.step_time_s, "node": h.node}
        for h in Heartbeat.objects.filter(watch=watch).order_by("rank")[:64]
    ]  # fmt: skip


@dataclass(frozen=True)
class WatchSettings:
    """The watch's settings form on the cluster page (responders; None for a viewer), and
    the page it is shown on again when a save is refused."""

    cluster: Cluster
    form: WatchForm | None

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def watch_settings(cluster: Cluster, *, responder: bool, admin: bool, data=None) -> WatchSettings:
    """The form set to the watch as it stands (a cluster never watched: the defaults, and
    nothing is written); bound to `data` when posted. One query."""
    if not responder:
        return WatchSettings(cluster=cluster, form=None)
    watch = Watch.objects.filter(cluster=cluster).first() or Watch(cluster=cluster)
    return WatchSettings(
        cluster=cluster, form=WatchForm(data, initial=_initial(watch), admin=admin)
    )


def _initial(watch: Watch) -> dict:
    return {
        "enabled": watch.enabled,
        "step_time_multiplier": watch.step_time_multiplier,
        "floor_s": watch.floor_s,
        "checkpoint_allowance_s": watch.checkpoint_allowance_s,
        "init_threshold_s": watch.init_threshold_s,
        "webhook_url": watch.webhook_url,
        "step_nodes": ", ".join(watch.step_nodes),
        "slurm_job": watch.slurm_job,
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
