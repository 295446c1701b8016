"""One period of one watched cluster, under its claim (watch/claims.py): follow the Slurm job,
read the nodes (watch/visits.py), judge progress (watch/progress.py), store, and raise when
the job hangs (watch/raises.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Node
from incidents.models import Incident

from . import progress, raises, reading, visits
from . import slurm as slurm_watch
from .models import (
    Heartbeat,
    StepSample,
    Watch,
    WatchRaise,
    WatchState,
)

CHART_KEEP = timedelta(hours=2)
HEARTBEAT_MAX_AGE = timedelta(days=1)
SEARCH_EVERY_PERIODS = 10


@dataclass(frozen=True)
class TickOutcome:
    ran: bool
    state: str = ""
    raise_id: int | None = None
    raise_created: bool = False
    needs_first_snapshot: bool = False


def watch_tick(*, watch_id: int, claim: str) -> TickOutcome:
    """One period of one watched cluster, under its claim: read the nodes, judge, store, and
    raise when the job hangs. The claim is kept: the task releases it once the raise's first
    snapshot is started (watch_release), so the next period cannot start it twice."""
    watch = Watch.objects.select_related("cluster").filter(pk=watch_id, claim=claim).first()
    if watch is None or not watch.enabled:
        return TickOutcome(ran=False)
    job = slurm_watch.follow(watch, timezone.now()) if watch.slurm_job else None
    if job is not None and job.state:
        return _store_job_only(watch, claim, job)
    nodes = job.nodes if job is not None else list(watch.cluster.nodes.order_by("name"))
    searching = _searching(watch, nodes)
    readings = visits.read_nodes(
        watch.cluster, nodes, with_logs=log_nodes(watch, nodes), with_stacks=_starting(watch)
    )
    now = timezone.now()
    judgement = progress.judge(readings, _before(watch), _settings(watch), now, _heartbeats(watch))
    if job is not None and job.stalled and judgement.raise_reason is None:
        judgement = replace(
            judgement, state=WatchState.STALLED, reason=job.reason, raise_reason="stalled"
        )
    if job is not None:
        Watch.objects.filter(pk=watch.pk, claim=claim).update(job_no_step_since=job.no_step_since)
    with transaction.atomic():
        stored = _store(watch, claim, readings, judgement, now, searching)
        if not stored:
            return TickOutcome(ran=False)
        open_raise = WatchRaise.objects.filter(watch=watch, closed_at__isnull=True).first()
        if open_raise and judgement.progressed and _moved_past(judgement, open_raise):
            raises.close_open_raise(
                watch, why=f"the job progresses again (step {judgement.last_step})"
            )
        if judgement.raise_reason is None:
            return TickOutcome(ran=True, state=judgement.state)
    found, created = raises.raise_open(watch=watch, judgement=judgement, now=now)
    if watch.slurm_job:  # the raise's snapshots are of the job
        Incident.objects.filter(pk=found.incident_id, scheduler_job="").update(
            scheduler_job=watch.slurm_job
        )
    return TickOutcome(
        ran=True,
        state=judgement.state,
        raise_id=found.pk,
        raise_created=created,
        needs_first_snapshot=found.first_snapshot_id is None,
    )


def _store_job_only(watch: Watch, claim: str, job: slurm_watch.JobFollow) -> TickOutcome:
    """A period that read only the Slurm job: pending, unreadable, or ended. A job that ended
    is not hung: its open raise closes and the watch stops."""
    changes = {"checked_at": timezone.now(), "state": job.state, "state_reason": job.reason[:500]}
    if job.ended:
        changes.update(enabled=False, claim="", claimed_until=None, job_no_step_since=None)
    with transaction.atomic():
        if not Watch.objects.filter(pk=watch.pk, claim=claim).update(**changes):
            return TickOutcome(ran=False)
        if job.ended:
            raises.close_open_raise(watch, why=job.reason)
    return TickOutcome(ran=True, state=job.state)


def _moved_past(judgement: progress.Judgement, open_raise: WatchRaise) -> bool:
    if judgement.last_step is None:
        return False
    return open_raise.step is None or judgement.last_step > open_raise.step


def log_nodes(watch: Watch, nodes: list[Node], now: datetime | None = None) -> set[str]:
    """The nodes whose logs are read this period: the configured ones; else the node whose
    tail carried step lines last time (often one is enough: the ranks step together); else
    every node, to find it, but only every SEARCH_EVERY_PERIODS periods when the last search
    found none (a job that only pushes heartbeats)."""
    names = [n.name for n in nodes]
    if watch.step_nodes:
        return set(watch.step_nodes) & set(names)
    known = [name for name in names if (watch.nodes.get(name) or {}).get("steps")]
    if known:
        return {known[0]}
    now = now or timezone.now()
    every = timedelta(seconds=settings.WATCH_PERIOD_S * SEARCH_EVERY_PERIODS)
    if watch.log_search_at is None or now - watch.log_search_at >= every:
        return set(names)
    return set()


def _searching(watch: Watch, nodes: list[Node]) -> bool:
    """This period reads every node's logs to find the step node."""
    if watch.step_nodes or not nodes:
        return False
    if any((watch.nodes.get(n.name) or {}).get("steps") for n in nodes):
        return False
    return log_nodes(watch, nodes) == {n.name for n in nodes}


def _starting(watch: Watch) -> bool:
    """No first step known yet (and no heartbeat): the period reads the stacks too, to tell a
    job stuck in init from one still starting (a py-spy dump per process, only until then)."""
    return watch.last_step is None and not watch.heartbeats.exists()


def _before(watch: Watch) -> progress.Before:
    return progress.Before(
        last_step=watch.last_step,
        last_step_at=watch.last_step_at,
        step_times=tuple(float(x) for x in watch.step_times),
        pids={name: tuple(info.get("pids", ())) for name, info in watch.nodes.items()},
    )


def _settings(watch: Watch) -> progress.Settings:
    return progress.Settings(
        multiplier=watch.step_time_multiplier,
        floor_s=watch.floor_s,
        checkpoint_allowance_s=watch.checkpoint_allowance_s,
        init_threshold_s=watch.init_threshold_s,
    )


def _heartbeats(watch: Watch) -> list[progress.HeartbeatView]:
    since = max(
        filter(None, [watch.enabled_at, timezone.now() - HEARTBEAT_MAX_AGE]),
    )
    return [
        progress.HeartbeatView(h.rank, h.step, h.at, h.checkpoint, h.step_time_s)
        for h in Heartbeat.objects.filter(watch=watch, at__gte=since)
    ]


def _store(
    watch: Watch,
    claim: str,
    readings: list[reading.NodeReading],
    judgement: progress.Judgement,
    now: datetime,
    searching: bool,
) -> bool:
    nodes = dict(watch.nodes)
    for r in readings:
        entry = dict(nodes.get(r.node) or {})
        entry.update(error=r.error, bytes=r.bytes_read, seconds=round(r.seconds, 3))
        if r.ok:
            entry.update(
                seen_at=now.isoformat(),
                pids=list(judgement.pids.get(r.node, ())),
                processes=len(r.live_pids),
                read_logs=bool(r.logs),
            )
            if r.logs or judgement.step_nodes:
                entry["steps"] = r.node in judgement.step_nodes
        nodes[r.node] = entry
    searched = {"log_search_at": now} if searching else {}
    updated = Watch.objects.filter(pk=watch.pk, claim=claim).update(
        **searched,
        checked_at=now,
        state=judgement.state,
        state_reason=judgement.reason[:500],
        last_step=judgement.last_step,
        last_step_at=judgement.last_step_at,
        step_times=list(judgement.step_times),
        step_time_s=judgement.step_time_s,
        recent_step_time_s=judgement.recent_step_time_s,
        threshold_s=judgement.threshold_s,
        checkpoint_since=judgement.checkpoint_since,
        nodes=nodes,
    )
    if not updated:
        return False
    if judgement.last_step is not None:
        StepSample.objects.create(watch=watch, at=now, step=judgement.last_step)
    StepSample.objects.filter(watch=watch, at__lt=now - CHART_KEEP).delete()
    return True
