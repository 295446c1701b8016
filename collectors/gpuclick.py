"""GPU metrics read from the click, beside the node visits, not after the last node.

The query's window is the hour before the snapshot, fixed by the click, so a snapshot of a
cluster that names a Prometheus reads it at once (tasks.read_gpu_metrics, on the early
queue: the ssh worker serves "ssh" and "default", so either would take a node's slot, and on
"analysis" a slow Prometheus would hold a process the final verdict needs) by the nodes'
names, while the nodes are visited. `Snapshot.gpu_metrics` says where it is:

    reading -> read      the fetch landed (the series stored, or its failure said)
    reading -> missed    the last node was in and the analysis waited WAIT_S for it: the
                         verdict was made without the series, and the timeline says so
    missed  -> read      the fetch landed after that verdict: the verdict is made again, once

Each move is one conditional UPDATE, so the analysis and the fetch never both think the
other has the series. A worker killed mid-fetch loses nothing: the task is redelivered (acks
late) and reads again; never redelivered, the analysis waited its WAIT_S and the verdict came.
A snapshot without a click (a bundle, a push snapshot) reads them before its analysis, as
before (state "").
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from incidents.models import EventKind

from . import gpumetrics, services
from .models import Snapshot, SnapshotStatus

log = logging.getLogger(__name__)

NONE, READING, READ, MISSED = "", "reading", "read", "missed"
POLL_S = 0.1

_sleep, _clock = time.sleep, time.monotonic


def click_fetch_due(snapshot: Snapshot, collection_ids: tuple[int, ...]) -> bool:
    """At the click, in its transaction: does this snapshot read its GPU metrics now? (Its
    cluster names a Prometheus and it has nodes to visit.) Marks it reading."""
    if not collection_ids or not snapshot.cluster.prometheus_url:
        return False
    return _move(snapshot.pk, NONE, READING)


def _move(snapshot_id: int, frm: str, to: str) -> bool:
    return bool(Snapshot.objects.filter(pk=snapshot_id, gpu_metrics=frm).update(gpu_metrics=to))


def fetch_at_click(*, snapshot_id: int) -> bool:
    """The fetch task's work: read and store the series (never raises: a Prometheus that
    fails is said on the timeline, anything else is logged). True when a verdict was made
    without them meanwhile and the series landed: it is to be made again."""
    if not Snapshot.objects.filter(pk=snapshot_id, gpu_metrics__in=[READING, MISSED]).exists():
        return False  # read already (a redelivered task), or not read at the click
    stored = 0
    try:
        stored = gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot_id, at_click=True)
    except Exception:  # the GPU metrics are a bonus: the verdict never waits on this
        log.exception("GPU metrics of snapshot %s not read", snapshot_id)
    if _move(snapshot_id, READING, READ):
        return False
    return _move(snapshot_id, MISSED, READ) and stored > 0


def series_before_analysis(*, snapshot_id: int, wait_s: float | None = None) -> None:
    """What the analysis after the last node does first: a snapshot without a click reads
    its series now (as before); else the fetch's series are used if in, waited for at most
    `wait_s` (GPU_METRICS_WAIT_S) if not, and missed (said on the timeline) past that."""
    state = Snapshot.objects.filter(pk=snapshot_id).values_list("gpu_metrics", flat=True).first()
    if state == NONE:
        gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot_id)
        return
    wait_s = settings.GPU_METRICS_WAIT_S if wait_s is None else wait_s
    until = _clock() + wait_s
    while state == READING and _clock() < until:
        _sleep(POLL_S)
        state = Snapshot.objects.filter(pk=snapshot_id).values_list("gpu_metrics", flat=True)[0]
    if state == READING and _move(snapshot_id, READING, MISSED):
        _say(snapshot_id, "GPU metrics still being read: this verdict is made without them, "
             "and made again once they are in")  # fmt: skip
    elif state == READ:
        gpumetrics.snapshot_gpu_metrics_top_up(snapshot_id=snapshot_id)


def reanalyse_with_series(*, snapshot_id: int) -> str:
    """The verdict made without the series, made again now that they are in: "done",
    "later" (its first analysis still running), or "no" (failed, or no verdict to replace)."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status == SnapshotStatus.ANALYSING:
        return "later"
    if snapshot.status != SnapshotStatus.DONE:
        return "no"
    gpumetrics.snapshot_gpu_metrics_top_up(snapshot_id=snapshot_id)
    try:
        diagnosis, overview = services.snapshot_diagnosed(snapshot)
    except Exception:  # the first verdict stands
        log.exception("analysis of snapshot %s with its GPU metrics failed", snapshot_id)
        return "no"
    moved = Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.DONE).update(
        diagnosis=diagnosis, rank_overview=overview
    )
    if moved:
        _say(snapshot_id, f"verdict made again with the GPU metrics — {diagnosis.get('summary')}",
             kind=EventKind.SNAPSHOT, phase="gpu_metrics_verdict")  # fmt: skip
    return "done" if moved else "no"


def _say(snapshot_id: int, text: str, **how) -> None:
    snapshot = Snapshot.objects.select_related("incident").get(pk=snapshot_id)
    gpumetrics.say(snapshot, text, **how)
