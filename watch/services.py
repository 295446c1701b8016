"""Every write of the watch: settings, heartbeats, one period of one cluster, raises, the
snapshots and the page that follow a raise, preflight results.

Each step is safe to run twice: a period runs only under its claim (a conditional UPDATE that
one task wins), a raise is a row under a partial unique index (one open raise per watch), and
a raise's second snapshot and its page are claimed the same way. What runs next is for
watch/tasks.py to say; this module queues nothing.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from analysis.evidence import SnapshotEvidence, not_gathered
from analysis.schedulers import slurm as slurm_ids
from clusters.models import Cluster, ClusterSource, Node
from collectors import remote
from collectors.models import Snapshot, SnapshotStatus
from core.errors import Forbidden, Invalid, NotFound
from core.roles import Role, has_role
from incidents.models import EventKind, Incident, Severity, Status
from incidents.services import incident_open, timeline_event_record

from . import audit, preflight, progress, reading, webhooks
from . import slurm as slurm_watch
from .models import (
    Heartbeat,
    NotifyStatus,
    PreflightRun,
    StepSample,
    Watch,
    WatchRaise,
    WatchState,
)

log = logging.getLogger(__name__)

SOURCE = "watch"
TOKEN_PREFIX = "hdw_"  # noqa: S105 - marks a watch heartbeat token, not a secret
CHART_KEEP = timedelta(hours=2)
# The node read's limits: every step on the node is bounded, and so is the whole visit.
READ_CONNECT_S = 5.0
READ_TOTAL_S = 15.0
READ_MAX_BYTES = 4 * 1024 * 1024
# One cluster's period, as the task's limits and the claim's lease see it.
TICK_SOFT_S = 90.0
TICK_HARD_S = 120.0
CLAIM_LEASE = timedelta(seconds=TICK_HARD_S + 30)
HEARTBEAT_MAX_AGE = timedelta(days=1)
ACTIVE_INCIDENT = (Status.OPEN, Status.INVESTIGATING, Status.MITIGATED)


# --- settings and tokens -----------------------------------------------------------------


def watch_for(cluster: Cluster) -> Watch:
    watch, _ = Watch.objects.get_or_create(cluster=cluster)
    return watch


@transaction.atomic
def watch_configure(
    *,
    cluster: Cluster,
    by: AbstractBaseUser | None,
    enabled: bool,
    step_time_multiplier: float,
    floor_s: float,
    checkpoint_allowance_s: float,
    webhook_url: str | None = None,
    step_nodes: list[str] | None = None,
    slurm_job: str | None = None,
    pagerduty_routing_key: str | None = None,
    opsgenie_api_key: str | None = None,
    via: str = "page",
    ip: str | None = None,
) -> Watch:
    """Turn a cluster's watch on or off and set its thresholds. Turning it on starts learning
    afresh; turning it off closes its open raise. `webhook_url`: None keeps it; only an admin
    changes where the page goes (docs/security.md, the role matrix). Audited."""
    watch = Watch.objects.select_for_update().get(pk=watch_for(cluster).pk)
    before = {"enabled": watch.enabled, "webhook_url": watch.webhook_url}
    if webhook_url is not None and webhook_url != watch.webhook_url:
        if not has_role(by, Role.ADMIN):
            raise Forbidden("Only an admin sets the webhook URL (where the watch's page goes).")
        watch.webhook_url = webhook_url
    _set_pager_keys(watch, by, pagerduty_routing_key, opsgenie_api_key)
    names = set(cluster.nodes.values_list("name", flat=True))
    unknown = sorted(set(step_nodes or ()) - names)
    if unknown:
        raise Invalid(f"no node named {', '.join(unknown)} in {cluster.name}", field="step_nodes")
    was = watch.enabled
    watch.step_time_multiplier = step_time_multiplier
    watch.floor_s = floor_s
    watch.checkpoint_allowance_s = checkpoint_allowance_s
    watch.step_nodes = sorted(step_nodes or ())
    if slurm_job is not None:
        watch.slurm_job = _watched_job(cluster, slurm_job)
    watch.enabled = enabled
    if enabled and not was:
        _reset_progress(watch)
        watch.enabled_at = timezone.now()
        watch.state = WatchState.WAITING
    if not enabled:
        watch.state = WatchState.OFF
        watch.claim, watch.claimed_until = "", None
        _close_open_raise(watch, why="the watch was turned off", by=by)
    watch.full_clean()
    watch.save()
    audit.watch_changed(watch=watch, by=by, before=before, via=via, ip=ip)
    return watch


def _set_pager_keys(watch: Watch, by, pagerduty: str | None, opsgenie: str | None) -> None:
    """None keeps a key; only an admin sets where the watch pages (as for the webhook)."""
    given = {"pagerduty_routing_key": pagerduty, "opsgenie_api_key": opsgenie}
    for name, value in given.items():
        if value is None or value == getattr(watch, name):
            continue
        if not has_role(by, Role.ADMIN):
            raise Forbidden("Only an admin sets the pager keys (where the watch's page goes).")
        setattr(watch, name, value.strip())


def _watched_job(cluster: Cluster, job: str) -> str:
    job = job.strip()
    if job and cluster.source != ClusterSource.SLURM:
        raise Invalid(
            f"{cluster.name} is not a Slurm cluster: it has no Slurm job", field="slurm_job"
        )
    if job and not slurm_ids.JOB_ID.match(job):
        raise Invalid(f"{job[:40]!r} is not a Slurm job id", field="slurm_job")
    return job


def _reset_progress(watch: Watch) -> None:
    watch.last_step = watch.last_step_at = watch.step_time_s = None
    watch.recent_step_time_s = watch.threshold_s = watch.checkpoint_since = None
    watch.step_times, watch.nodes, watch.state_reason = [], {}, ""
    watch.job_no_step_since = None


def heartbeat_token_issue(
    *, watch: Watch, by: AbstractBaseUser | None = None, via: str = "page", ip: str | None = None
) -> str:
    """A new token for the job's heartbeats (the old one stops working); shown once. Audited."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    Watch.objects.filter(pk=watch.pk).update(
        heartbeat_token_hash=token_hash(token), heartbeat_token_prefix=token[:12]
    )
    audit.heartbeat_token_issued(watch=watch, by=by, prefix=token[:12], via=via, ip=ip)
    return token


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def watch_by_token(token: str) -> Watch | None:
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return (
        Watch.objects.select_related("cluster")
        .filter(heartbeat_token_hash=token_hash(token))
        .first()
    )


def heartbeat_record(
    *, watch: Watch, step: int, rank: int | None = None, checkpoint: bool = False, node: str = ""
) -> Heartbeat:
    """The job says it completed `step` (two or three small queries)."""
    now = timezone.now()
    key = -1 if rank is None else rank
    previous = Heartbeat.objects.filter(watch=watch, rank=key).first()
    step_time = previous.step_time_s if previous else None
    if previous and step > previous.step:
        step_time = max(0.0, (now - previous.at).total_seconds() / (step - previous.step))
    heartbeat, _ = Heartbeat.objects.update_or_create(
        watch=watch,
        rank=key,
        defaults={
            "step": step,
            "at": now,
            "checkpoint": checkpoint,
            "step_time_s": step_time,
            "node": node[:128],
        },
    )
    return heartbeat


# --- the period: claim, read, judge ------------------------------------------------------


def watch_claim_due(*, now: datetime | None = None, limit: int = 500) -> list[tuple[int, str]]:
    """Claim every enabled watch that is not in flight and was not dispatched within half a
    period; (watch id, claim) for each one this caller won. A duplicate beat tick or a second
    dispatcher wins none of them."""
    now = now or timezone.now()
    due_before = now - timedelta(seconds=settings.WATCH_PERIOD_S * 0.5)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    due = Q(dispatched_at__isnull=True) | Q(dispatched_at__lte=due_before)
    candidates = (
        Watch.objects.filter(free, due, enabled=True)
        .order_by(F("dispatched_at").asc(nulls_first=True))
        .values_list("pk", flat=True)[:limit]
    )
    won = []
    for pk in list(candidates):
        claim = uuid.uuid4().hex
        claimed = Watch.objects.filter(free, due, pk=pk, enabled=True).update(
            claim=claim, claimed_until=now + CLAIM_LEASE, dispatched_at=now
        )
        if claimed:
            won.append((pk, claim))
    return won


def watch_release(*, watch_id: int, claim: str) -> bool:
    """The period is over (its raise and first snapshot included): the next one may start."""
    return bool(Watch.objects.filter(pk=watch_id, claim=claim).update(claim="", claimed_until=None))


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
    readings = read_nodes(watch, nodes)
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
            _close_open_raise(watch, why=f"the job progresses again (step {judgement.last_step})")
        if judgement.raise_reason is None:
            return TickOutcome(ran=True, state=judgement.state)
    found, created = raise_open(watch=watch, judgement=judgement, now=now)
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
            _close_open_raise(watch, why=job.reason)
    return TickOutcome(ran=True, state=job.state)


def _moved_past(judgement: progress.Judgement, open_raise: WatchRaise) -> bool:
    if judgement.last_step is None:
        return False
    return open_raise.step is None or judgement.last_step > open_raise.step


SEARCH_EVERY_PERIODS = 10


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


def read_nodes(watch: Watch, nodes: list[Node]) -> list[reading.NodeReading]:
    """One SSH connection per node, side by side (bounded), every step bounded."""
    if not nodes:
        return []
    cluster = watch.cluster
    with_logs = log_nodes(watch, nodes)
    plans = {
        node.name: reading.ReadPlan(
            process_pattern=cluster.process_pattern,
            log_globs=tuple(cluster.log_globs) if node.name in with_logs else (),
            tail_bytes=settings.WATCH_TAIL_BYTES,
        )
        for node in nodes
    }
    threads = max(1, min(len(nodes), settings.WATCH_NODE_THREADS))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda node: _read_node(node, plans[node.name]), nodes))


def _read_node(node: Node, plan: reading.ReadPlan) -> reading.NodeReading:
    limits = remote.CollectionPlan(
        process_pattern=plan.process_pattern,
        connect_timeout_s=READ_CONNECT_S,
        total_timeout_s=READ_TOTAL_S,
        command_timeout_s=plan.command_timeout_s,
        tail_bytes=plan.tail_bytes,
        artifact_cap_bytes=plan.tail_bytes,
        max_total_bytes=READ_MAX_BYTES,
    )
    try:
        run = remote.run_script(
            _target(node), limits, lambda nonce: reading.render_script(plan, nonce)
        )
    except Exception as exc:  # a bug must fail this node's read, not the period
        log.exception("watch read of %s failed", node.name)
        return reading.NodeReading(node=node.name, ok=False, error=f"internal error: {exc!r}")
    error = run.failure.text if run.failure else ""
    return reading.reading_from_frames(
        node.name, run.frames, error=error, bytes_read=run.bytes_read, seconds=run.seconds
    )


def _target(node: Node) -> remote.NodeTarget:
    return remote.NodeTarget(
        name=node.name,
        address=node.address,
        port=node.port,
        username=node.username,
        key_path=node.key_path or None,
        host_key=node.host_key,
    )


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


# --- raises ------------------------------------------------------------------------------


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
                    title=f"{cluster.name}: {judgement.state} at step {judgement.last_step}"[:200],
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


def _close_open_raise(watch: Watch, *, why: str, by: AbstractBaseUser | None = None) -> None:
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


def raise_get(raise_id: int) -> WatchRaise:
    found = WatchRaise.objects.select_related("watch__cluster", "incident").filter(pk=raise_id)
    raised = found.first()
    if raised is None:
        raise NotFound(f"no watch raise {raise_id}")
    return raised


def raise_record_snapshot(*, raise_id: int, snapshot: Snapshot, which: str) -> bool:
    """Remember the raise's first or second snapshot (once)."""
    field = f"{which}_snapshot"
    updated = WatchRaise.objects.filter(pk=raise_id, **{f"{field}__isnull": True}).update(
        **{field: snapshot}
    )
    if updated:
        raised = raise_get(raise_id)
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


def raise_claim_first(*, raise_id: int, task_id: str) -> bool:
    """Only one task (or its redelivered copy) starts the first snapshot."""
    return bool(
        WatchRaise.objects.filter(pk=raise_id, first_snapshot__isnull=True)
        .filter(Q(first_claim="") | Q(first_claim=task_id))
        .update(first_claim=task_id)
    )


def raise_claim_second(*, raise_id: int, task_id: str) -> bool:
    """Only one task (or its redelivered copy) takes the second snapshot."""
    return bool(
        WatchRaise.objects.filter(pk=raise_id, second_snapshot__isnull=True)
        .filter(Q(second_claim="") | Q(second_claim=task_id))
        .update(second_claim=task_id)
    )


def snapshot_is_active(snapshot_id: int | None) -> bool:
    if snapshot_id is None:
        return False
    status = Snapshot.objects.filter(pk=snapshot_id).values_list("status", flat=True).first()
    return status in (SnapshotStatus.RUNNING, SnapshotStatus.ANALYSING)


def raise_record_verdict(*, raise_id: int) -> WatchRaise | None:
    """Once the snapshots are done: the verdict (the second's, else the first's) on the raise
    and the timeline. None when it was already recorded."""
    raised = raise_get(raise_id)
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


def incident_url(incident: Incident) -> str:
    return settings.HANGDESK_BASE_URL + reverse("incidents:detail", args=[incident.pk])


def raise_notify(*, raise_id: int, attempt: int, last_attempt: bool) -> webhooks.Delivery | None:
    """POST the page once; record the attempt on the raise and the incident's timeline.
    None when there is nothing (more) to send."""
    raised = raise_get(raise_id)
    url = raised.watch.webhook_url
    if not url or raised.notify_status == NotifyStatus.SENT:
        return None
    body = webhooks.page_body(
        cluster=raised.watch.cluster.name,
        reason=raised.summary.removeprefix("Watch: "),
        verdict=raised.verdict,
        incident_ref=raised.incident.reference,
        incident_url=incident_url(raised.incident),
    )
    WatchRaise.objects.filter(pk=raise_id).exclude(notify_status=NotifyStatus.SENT).update(
        notify_status=NotifyStatus.SENDING
    )
    delivery = webhooks.post_json(url, body, timeout_s=settings.WATCH_WEBHOOK_TIMEOUT_S)
    now = timezone.now()
    if delivery.ok:
        status, summary = NotifyStatus.SENT, f"Watch: webhook delivered ({delivery.detail})"
    elif last_attempt or not delivery.retryable:
        status = NotifyStatus.FAILED
        attempts = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        summary = f"Watch: webhook failed for good after {attempts}: {delivery.detail}"
    else:
        status = NotifyStatus.SENDING
        summary = f"Watch: webhook attempt {attempt} failed ({delivery.detail}); retrying"
    WatchRaise.objects.filter(pk=raise_id).exclude(notify_status=NotifyStatus.SENT).update(
        notify_status=status,
        notify_attempts=attempt,
        notify_error="" if delivery.ok else delivery.detail[:500],
        notified_at=now if delivery.ok else None,
    )
    timeline_event_record(
        incident=raised.incident,
        kind=EventKind.SYSTEM,
        summary=summary[:500],
        source=SOURCE,
        details={"watch_raise": raise_id, "phase": "webhook", "attempt": attempt,
                 "ok": delivery.ok, "detail": delivery.detail},
        at=now,
    )  # fmt: skip
    return delivery


# --- preflight ---------------------------------------------------------------------------


def preflight_store(*, cluster: Cluster, report: dict, source: str) -> PreflightRun:
    return PreflightRun.objects.create(
        cluster=cluster, at=timezone.now(), source=source, ok=report["ok"], report=report
    )


def preflight_evidence_over_ssh(cluster: Cluster) -> SnapshotEvidence:
    """Every node visited as a snapshot visits it (one connection each, side by side)."""
    nodes = list(cluster.nodes.order_by("name"))
    if not nodes:
        raise Invalid(f"Cluster {cluster.name} has no nodes.")
    plan = remote.CollectionPlan(
        process_pattern=cluster.process_pattern,
        log_globs=list(cluster.log_globs),
        flight_recorder_globs=[],  # not compared: the dumps are the costliest read
        pyspy_command=cluster.pyspy_command,
    )
    threads = max(1, min(len(nodes), settings.WATCH_NODE_THREADS))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        visits = list(pool.map(lambda node: remote.collect_node(_target(node), plan), nodes))
    for visit in visits:
        if visit.failure:
            visit.evidence.status = not_gathered(visit.failure.text)
    return SnapshotEvidence(
        nodes=[visit.evidence for visit in visits],
        expected_world_size=cluster.expected_world_size,
        collected_at=timezone.now(),
        cluster=cluster.name,
    )


def preflight_over_ssh(*, cluster_id: int) -> PreflightRun:
    cluster = Cluster.objects.get(pk=cluster_id)
    report = preflight.preflight_report(preflight_evidence_over_ssh(cluster))
    return preflight_store(cluster=cluster, report=report, source="ssh")
