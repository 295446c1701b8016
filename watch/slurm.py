"""The watch on a Slurm job: each period asks the controller first (collectors/scheduler.py).

- a job that ended (or that Slurm no longer knows) is not hung: the watch says so and stops;
- a pending job waits;
- a RUNNING job with no step (only its batch script) for longer than the watch's floor is
  stalled (the script is stuck before or between its `srun`s);
- otherwise the job's nodes, registered from Slurm as for a snapshot, are the nodes this
  period reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from analysis.schedulers import slurm
from clusters.models import Node
from clusters.services import job_nodes_register
from collectors import scheduler

from .models import Watch, WatchState


@dataclass(frozen=True)
class JobFollow:
    nodes: list[Node] | None = None  # the nodes to read this period (None: read none)
    state: str | None = None  # the period's state when no node is read
    reason: str = ""
    ended: bool = False
    stalled: bool = False
    no_step_since: datetime | None = None


def follow(watch: Watch, now: datetime) -> JobFollow:
    cluster, job_id = watch.cluster, watch.slurm_job
    try:
        read = slurm.read_job(scheduler.slurm_outputs(cluster, job_id), job_id)
    except slurm.SlurmError as exc:
        if "knows no job" in str(exc):  # past MinJobAge a finished job is forgotten
            return JobFollow(state=WatchState.IDLE, reason=f"{exc} It has ended.", ended=True)
        return JobFollow(state=WatchState.UNREACHABLE, reason=str(exc))
    except scheduler.JobRefused as exc:
        return JobFollow(state=WatchState.UNREACHABLE, reason=str(exc))
    job = read.job
    if job.pending:
        return JobFollow(state=WatchState.WAITING, reason=f"Slurm job {job_id} is {job.state}")
    if not job.active:
        code = f" (exit code {job.exit_code})" if job.exit_code else ""
        return JobFollow(
            state=WatchState.IDLE,
            reason=f"Slurm job {job_id} ended: {job.state}{code}; the watch stops.",
            ended=True,
        )
    try:
        targets = scheduler.job_nodes(cluster, read)
    except scheduler.JobRefused as exc:
        return JobFollow(state=WatchState.UNREACHABLE, reason=str(exc))
    nodes = job_nodes_register(cluster=cluster, nodes=[vars(t) for t in targets])
    if read.running:
        return JobFollow(nodes=nodes)
    since = watch.job_no_step_since or now
    idle = (now - since).total_seconds()
    stalled = now - since >= timedelta(seconds=watch.floor_s)
    return JobFollow(
        nodes=nodes,
        reason=f"Slurm job {job_id} is RUNNING with no step for {idle:.0f} s "
        "(its batch script started no srun, or is stuck between them)",
        stalled=stalled,
        no_step_since=since,
    )
