"""Snapshots of a scheduler's job: the nodes it names registered, then exactly those visited.

`job_snapshot_create` takes the plan a worker read from the scheduler (Slurm's
`scheduler.JobSnapshotPlan.to_json()`, or a Ray head's `rayjob.ray_job_plan()`) and, in one
transaction, registers or updates the job's nodes under the cluster, keeps the job on the
incident (head and timeline), and creates the snapshot of those nodes with the scheduler's
evidence attached. Like services.py it queues nothing; tasks.py does.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from clusters.services import job_nodes_register
from incidents.models import EventKind, Incident
from incidents.services import timeline_event_record

from .scheduler import JobRefused
from .services import SnapshotCreated, snapshot_create


def job_line(job: dict) -> str:
    """`Slurm job 4417203 (pretrain, alice, partition gpu): RUNNING 2:01:13 of 1-00:00:00,
    2 nodes gpu[001-002]`; a Ray job's, see ray_job_line."""
    if job.get("kind") == "ray":
        return ray_job_line(job)
    partition = f"partition {job['partition']}" if job.get("partition") else ""
    who = ", ".join(x for x in (job.get("name"), job.get("user"), partition) if x)
    limit = f" of {job['time_limit']}" if job.get("time_limit") else ""
    head = f"Slurm job {job.get('id')}" + (f" ({who})" if who else "")
    ran = f"{job.get('state')} {job.get('elapsed', '')}{limit}"
    return f"{head}: {ran}, {job.get('nodes')} nodes {job.get('node_list', '')}"


def ray_job_line(job: dict) -> str:
    """`Ray job hdlab-job (Ray Train run hdlab-job, job 02000000): RUNNING, 4 workers (1
    dead) on 2 nodes 127.0.1.1, 127.0.1.2`"""
    about = [f"Ray Train run {job['name']}" if job.get("name") else ""]
    if job.get("submission_id") and job.get("submission_id") != job.get("id"):
        about.append(f"submission {job['submission_id']}")
    if job.get("job_id") and job.get("job_id") != job.get("id"):
        about.append(f"job {job['job_id']}")
    who = ", ".join(a for a in about if a)
    dead = f" ({job['dead']} dead)" if job.get("dead") else ""
    head = f"Ray job {job.get('id')}" + (f" ({who})" if who else "")
    workers = f"{job.get('workers')} workers{dead} on {job.get('nodes')} nodes"
    return f"{head}: {job.get('state')}, {workers} {job.get('node_list', '')}".rstrip()


def job_snapshot_create(
    *, incident: Incident, plan: dict, by: AbstractBaseUser | None = None, source: str = ""
) -> SnapshotCreated:
    scheduler = plan["scheduler"]
    job = scheduler["job"]
    with transaction.atomic():
        try:
            nodes = job_nodes_register(cluster=incident.cluster, nodes=plan["nodes"])
        except ValidationError as exc:
            kind, field = ("Ray", "ray_job") if job.get("kind") == "ray" else ("Slurm", "slurm_job")
            raise JobRefused(
                f"{kind} job {job['id']}: a node cannot be registered: {exc}", field
            ) from exc
        changed = incident.scheduler_job_info != job
        Incident.objects.filter(pk=incident.pk).update(
            scheduler_job=job["id"], scheduler_job_info=job
        )
        incident.scheduler_job, incident.scheduler_job_info = job["id"], job
        if changed:
            timeline_event_record(
                incident=incident,
                kind=EventKind.SYSTEM,
                summary=job_line(job),
                author=by,
                source=source or job.get("kind", "slurm"),
                details={f"{job.get('kind', 'slurm')}_job": job},
            )
        return snapshot_create(
            incident=incident, by=by, source=source, nodes=nodes, scheduler=scheduler
        )
