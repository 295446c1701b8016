"""The snapshot pipeline: its Celery tasks, and what the ways in (collectors/starts.py) queue.

Services do one step each and say what happened (outcomes.py); this module alone decides what
runs next — the node visits in batches after a snapshot is created (each batch visits its
nodes at once, collectors/fanout.py) and the GPU metrics' read beside them
(collectors/gpuclick.py), the analysis after the last node or after a bundle is stored.
Queues (settings.CELERY_TASK_ROUTES): node visits on "ssh", the final verdicts on
"analysis", the first verdict and the GPU metrics read from the click on "early" (processes
of their own: the final verdict never queues behind them), a large snapshot's parses read
as they arrive on "ahead" (collectors/read_ahead.py: that reader then makes its first and
final verdicts from them), the sweep on "default".
Limits: hangdesk/budget.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction

import core.celery  # noqa: F401  (the configured app, before any task is sent)
from clusters.models import ClusterSource
from hangdesk.budget import TIME_BUDGET

from . import (
    fanout,
    gpuclick,
    node_work,
    provisional,
    push,
    rayjob,
    read_ahead,
    scheduler,
    services,
)

NODE_LIMITS = TIME_BUDGET.node_task
ANALYSIS_LIMITS = TIME_BUDGET.analysis_task


# --- what the ways in queue (collectors/starts.py) ---------------------------------------


def snapshot_visits_queue(created: services.SnapshotCreated) -> None:
    """A new snapshot's node visits, queued once its transaction commits (and the check for a
    first verdict without the slowest nodes, past the deadline its own visits set), and the
    cluster's GPU metrics read beside them."""
    ids, snapshot_id = created.collection_ids, created.snapshot.pk
    gpu_metrics = gpuclick.click_fetch_due(created.snapshot, ids)
    transaction.on_commit(lambda: _visit_nodes(ids, snapshot_id, gpu_metrics))


def analysis_queue(snapshot_id: int) -> None:
    """The snapshot's analysis, queued once the transaction commits."""
    _analyse_once_committed(snapshot_id)


def _visit_nodes(
    collection_ids: tuple[int, ...], snapshot_id: int | None = None, gpu_metrics: bool = False
) -> None:
    if gpu_metrics:
        read_gpu_metrics.delay(snapshot_id)
    if snapshot_id is not None and read_ahead.worth_reading_ahead(len(collection_ids)):
        read_parses_ahead.delay(snapshot_id)
    for batch in fanout.batches(collection_ids, settings.HANGDESK_SSH_FANOUT):
        collect_nodes.delay(batch)
    if snapshot_id is not None:
        # The slowest nodes past the deadline: a first verdict without them.
        analyse_provisional_at_deadline.apply_async(
            (snapshot_id,), countdown=provisional.SLOW_FLOOR_S
        )


def _analyse_once_committed(snapshot_id: int) -> None:
    transaction.on_commit(lambda: analyse_snapshot.delay(snapshot_id))


# --- the tasks ---------------------------------------------------------------------------


@shared_task(bind=True, soft_time_limit=NODE_LIMITS.soft_s, time_limit=NODE_LIMITS.hard_s)
def collect_nodes(self, collection_ids: list[int]) -> str:
    """A batch of a snapshot's node visits, HANGDESK_SSH_FANOUT at a time (retries inside)."""
    outcome = fanout.batch_visit(
        collection_ids=tuple(collection_ids),
        task_id=self.request.id,
        fanout=settings.HANGDESK_SSH_FANOUT,
        steal_until=time.monotonic() + TIME_BUDGET.steal_s,
        after_store=_provisional_if_due,
    )
    for snapshot_id in outcome.analysis_due:
        _analyse_once_committed(snapshot_id)
    return f"{outcome.visited} nodes ({outcome.taken} taken from other batches)"


def _provisional_if_due(snapshot_id: int) -> None:
    """After a group of nodes is stored: 95 % in, a first verdict (once per snapshot)."""
    if provisional.provisional_due(snapshot_id=snapshot_id):
        analyse_provisional.delay(snapshot_id)


@shared_task(soft_time_limit=ANALYSIS_LIMITS.soft_s, time_limit=ANALYSIS_LIMITS.hard_s)
def analyse_snapshot(snapshot_id: int) -> None:
    turn = read_ahead.final_turn(snapshot_id)
    if turn == "reader":  # it holds the parses; looked at again (a dead one's lease expires)
        analyse_snapshot.apply_async((snapshot_id,), countdown=read_ahead.HANDOVER_CHECK_S)
        return
    if turn == "done":
        return
    # The GPU's hour from the cluster's Prometheus (read from the click and waited for a
    # bounded time, or read now: bounded, never fatal), then the verdict.
    gpuclick.series_before_analysis(snapshot_id=snapshot_id)
    services.snapshot_analyse(snapshot_id=snapshot_id)


@shared_task(soft_time_limit=read_ahead.LIMITS.soft_s, time_limit=read_ahead.LIMITS.hard_s)
def read_parses_ahead(snapshot_id: int) -> str:
    """A large snapshot's parses read as its nodes arrive, and its final verdict made."""
    outcome = read_ahead.parses_read_ahead(snapshot_id=snapshot_id)
    if outcome == "read long enough":  # still collecting: a new reader, in a new budget
        read_parses_ahead.delay(snapshot_id)
    return outcome


@shared_task(soft_time_limit=ANALYSIS_LIMITS.soft_s, time_limit=ANALYSIS_LIMITS.hard_s)
def read_gpu_metrics(snapshot_id: int) -> None:
    """From the click: the GPU's hour, stored for the verdict; landed after a verdict made
    without it, that verdict made again (once)."""
    if gpuclick.fetch_at_click(snapshot_id=snapshot_id):
        analyse_with_gpu_metrics.delay(snapshot_id)


@shared_task(
    bind=True,
    max_retries=int(ANALYSIS_LIMITS.hard_s // 2),
    soft_time_limit=ANALYSIS_LIMITS.soft_s,
    time_limit=ANALYSIS_LIMITS.hard_s,
)
def analyse_with_gpu_metrics(self, snapshot_id: int) -> None:
    if gpuclick.reanalyse_with_series(snapshot_id=snapshot_id) == "later":
        raise self.retry(countdown=2)  # the verdict without them is still being made


@shared_task(soft_time_limit=ANALYSIS_LIMITS.soft_s, time_limit=ANALYSIS_LIMITS.hard_s)
def analyse_provisional(snapshot_id: int) -> None:
    """The claimed first verdict: made here, or by a live reader from what it holds; one that
    dies before it made it (killed, its database gone) stops renewing its lease, and the look
    after the lease's time makes it here (the final verdict task waits for a reader so too)."""
    if not read_ahead.reader_alive(snapshot_id):
        provisional.snapshot_provisional_analyse(snapshot_id=snapshot_id)
    elif provisional.provisional_awaited(snapshot_id):
        analyse_provisional.apply_async((snapshot_id,), countdown=read_ahead.LEASE_S)


@shared_task(soft_time_limit=ANALYSIS_LIMITS.soft_s, time_limit=ANALYSIS_LIMITS.hard_s)
def analyse_provisional_at_deadline(snapshot_id: int) -> None:
    """Are the slowest past the deadline (collectors/provisional.py)? Then the first verdict;
    not yet, the same check again when they may be; never, nothing more."""
    deadline = provisional.provisional_past_deadline(snapshot_id=snapshot_id)
    if deadline.due:
        analyse_provisional(snapshot_id)  # claimed here: made here, or watched while a reader lives
    elif deadline.recheck_s is not None:
        analyse_provisional_at_deadline.apply_async((snapshot_id,), countdown=deadline.recheck_s)


@shared_task
def fail_stale_collections() -> int:
    """Beat's sweep (limits: the housekeeping defaults in settings; the age: the budget's
    stale_after, as settings.SNAPSHOT_STALE_AFTER_SECONDS)."""
    older_than = timedelta(seconds=settings.SNAPSHOT_STALE_AFTER_SECONDS)
    outcome = node_work.node_collection_fail_stale(older_than=older_than)
    # Push snapshots whose wait is over: analysed with what arrived (failed with nothing).
    for snapshot_id in (*outcome.analysis_due, *push.push_waits_end()):
        _analyse_once_committed(snapshot_id)
    return outcome.failed


# --- node checks (a page waits for the answer) --------------------------------------------

NODE_CHECK_WAIT_S = TIME_BUDGET.node_check_wait_s
NODE_CHECK_LIMITS = TIME_BUDGET.node_check_task


@shared_task(
    ignore_result=False,
    soft_time_limit=NODE_CHECK_LIMITS.soft_s,
    time_limit=NODE_CHECK_LIMITS.hard_s,
    acks_late=False,
)
def node_check(spec: dict, what: str) -> dict:
    """On a worker of the ssh queue, where the keys are: `what` is "key" (the key file) or
    "connection" (the collector's SSH handshake and login)."""
    from . import connection

    result = connection.check_key(spec) if what == "key" else connection.check_connection(spec)
    return result.to_json()


@shared_task(soft_time_limit=NODE_CHECK_LIMITS.soft_s, time_limit=NODE_CHECK_LIMITS.hard_s)
def node_check_record(node_pk: int) -> None:
    """A node added or changed: its connection checked in the background, the answer kept on
    it for the node list (safe to run twice: the second check replaces the first)."""
    from . import connection

    connection.check_and_record(node_pk)


def node_check_queue(*, sender, node, **kwargs) -> None:
    """clusters' node_connection_changed (sent after the commit): queue the check."""
    node_check_record.delay(node.pk)


def node_check_on_worker(spec: dict, what: str) -> dict:
    """Ask a worker and wait a few seconds; without an answer, say that nothing is known."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    wait = NODE_CHECK_WAIT_S[what]
    pending = node_check.apply_async((spec, what))
    try:
        return pending.get(timeout=wait, disable_sync_subtasks=False)
    except CeleryTimeout:
        pending.forget()
        return {
            "ok": None,
            "text": f"no worker answered within {wait:g} s: not checked (is a worker running?)",
            "seconds": wait,
            "worker": "",
        }


# --- a scheduler's job, read on a worker (where the keys and known_hosts are) -------------

JOB_READ_WAIT_S = TIME_BUDGET.job_read_wait_s["slurm"]
RAY_JOB_READ_WAIT_S = TIME_BUDGET.job_read_wait_s["ray"]
JOB_READ_LIMITS = TIME_BUDGET.job_read_task


def job_kind(cluster) -> str:
    return "Ray" if cluster.source == ClusterSource.RAY else "Slurm"


def job_field(cluster) -> str:
    return rayjob.FIELD if cluster.source == ClusterSource.RAY else "slurm_job"


def job_plan_here(cluster, job_id: str) -> dict:
    """The scheduler's answer, read from this process: a Slurm controller's or a Ray head's."""
    if cluster.source == ClusterSource.RAY:
        return rayjob.ray_job_plan(cluster, job_id)
    return scheduler.slurm_job_plan(cluster, job_id).to_json()


@shared_task(
    ignore_result=False,
    soft_time_limit=JOB_READ_LIMITS.soft_s,
    time_limit=JOB_READ_LIMITS.hard_s,
    acks_late=False,
)
def job_plan_read(cluster_id: int, job_id: str) -> dict:
    """{"plan": ...} for the job, or {"error": why}: a refusal is an answer, not a failure."""
    from clusters.models import Cluster

    cluster = Cluster.objects.get(pk=cluster_id)
    try:
        return {"plan": job_plan_here(cluster, job_id)}
    except scheduler.JobRefused as exc:
        return {"error": str(exc)}


def job_plan_on_worker(cluster, job_id: str) -> dict:
    """Ask a worker of the ssh queue to read the job, and wait for its answer; raises
    JobRefused with the reason (the scheduler's, or that no worker answered)."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    job_id = _valid_job_id(cluster, job_id)  # a malformed id never waits for a worker
    wait = RAY_JOB_READ_WAIT_S if cluster.source == ClusterSource.RAY else JOB_READ_WAIT_S
    pending = job_plan_read.apply_async((cluster.pk, job_id))
    try:
        answer = pending.get(timeout=wait, disable_sync_subtasks=False)
    except CeleryTimeout:
        pending.forget()
        raise scheduler.JobRefused(
            f"No worker answered within {wait:g} s: the {job_kind(cluster)} job was not read "
            "(is a worker of the ssh queue running?).",
            job_field(cluster),
        ) from None
    if "error" in answer:
        raise scheduler.JobRefused(answer["error"], job_field(cluster))
    return answer["plan"]


def _valid_job_id(cluster, job_id: str) -> str:
    from analysis.schedulers import ray, slurm

    try:
        if cluster.source == ClusterSource.RAY:
            return ray.valid_job_id(job_id)
        return slurm.valid_job_id(job_id)
    except (ray.RayError, slurm.SlurmError) as exc:
        raise scheduler.JobRefused(str(exc), job_field(cluster)) from exc
