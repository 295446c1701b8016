"""The ways in: what the pages, the API, the watch and the command line call to start a
snapshot's work. Each does one service step (services.py, jobs.py, push.py), then queues what
runs next once the transaction commits (tasks.py): a new snapshot's node visits, a bundle's
analysis. Not tasks themselves: they run in the caller's process."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from analysis.evidence import SnapshotEvidence
from incidents.models import Incident

from . import jobs, push, services, tasks
from .models import Snapshot


def snapshot_start(
    *,
    incident: Incident,
    by: AbstractBaseUser | None = None,
    source: str = "",
    job_plan: dict | None = None,
) -> tuple[Snapshot, bool]:
    """Start a snapshot of the incident's cluster, or return the one already running.

    A cluster whose nodes a scheduler names snapshots the incident's job: `job_plan` is what
    a worker read from the scheduler (`tasks.job_plan_on_worker`); without it, it is read here.
    Returns (snapshot, created); a new snapshot's node visits are queued once committed."""
    cluster = incident.cluster
    if cluster.uses_scheduler:
        if job_plan is None:
            if not incident.scheduler_job:
                kind = tasks.job_kind(cluster)
                raise services.SnapshotRefused(
                    f"Cluster {cluster.name} snapshots a {kind} job: give its id."
                )
            job_plan = tasks.job_plan_here(cluster, incident.scheduler_job)
        created = jobs.job_snapshot_create(incident=incident, plan=job_plan, by=by, source=source)
    else:
        created = services.snapshot_create(incident=incident, by=by, source=source)
    if created.created:
        tasks.snapshot_visits_queue(created)
    return created.snapshot, created.created


def snapshot_import_bundle(
    *, incident: Incident, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> Snapshot:
    """Store a bundle's evidence as a snapshot of the incident and queue its analysis."""
    snapshot = services.snapshot_store_bundle(incident=incident, evidence=evidence, by=by)
    tasks.analysis_queue(snapshot.pk)
    return snapshot


def push_bundle_receive(
    *, snapshot: Snapshot, evidence: SnapshotEvidence, by: AbstractBaseUser | None = None
) -> push.Received:
    """Store a node's pushed bundle in the snapshot waiting for it; queue the analysis once
    the last expected node is in."""
    received = push.push_bundle_store(snapshot=snapshot, evidence=evidence, by=by)
    if received.analysis_due:
        tasks.analysis_queue(snapshot.pk)
    return received


def push_analyse_now(*, snapshot: Snapshot, by: AbstractBaseUser | None) -> bool:
    """A responder ends a push snapshot's wait: the nodes that sent their bundle are analysed."""
    started = push.push_snapshot_analyse_now(snapshot=snapshot, by=by)
    if started:
        tasks.analysis_queue(snapshot.pk)
    return started
