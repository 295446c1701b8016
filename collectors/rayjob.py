"""Ask a Ray head which processes a job's Ray Train workers are, over the same pinned SSH.

`ray_job_plan(cluster, job)` runs `ray.sh` (read-only: `ray list jobs / actors / nodes /
placement-groups`, `ray status`, Ray Train's controller log lines) on the cluster's head,
parses the answer (analysis/schedulers/ray.py) and turns the job's worker actors into what a
snapshot visits: each node that holds one, at the address Ray gives it, with its host key from
the operator's known_hosts file, and on it exactly the workers' pids (the probe's pid mode),
their session logs and the raylet's. Ray's own evidence (dead workers with Ray's death cause,
dead nodes) travels with the plan as lines of the nodes it is about. Every refusal is a
`JobRefused` on `ray_job`; nothing is written here.
"""

from __future__ import annotations

import math
from pathlib import Path

from analysis.schedulers import ray
from hangdesk import frames
from hangdesk.budget import TIME_BUDGET
from hangdesk.plan import CollectionPlan

from .scheduler import (
    MAX_OUTPUT_KEPT,
    MAX_READ_BYTES,
    JobNode,
    JobRefused,
    check_egress,
    controller_target,
    known_nodes,
)
from .visits import run_script

SCRIPT_PATH = Path(__file__).with_name("ray.sh")
FIELD = "ray_job"
# Entries of each `ray list`: a job's workers, its nodes and groups are far fewer.
LIST_LIMIT = 10_000
# Up to four `ray` CLI calls, one after the other (each a Python process: about a second
# of CPU, several seconds on a busy head): a longer visit than a node's (hangdesk/budget.py).
HEAD_VISIT_S = TIME_BUDGET.ray_head_visit_s


def _render(phase: dict[str, str], command: str, command_timeout_s: float):
    def render(nonce: str) -> bytes:
        settings = {
            **phase,
            "HD_RAY": command,
            "HD_LIMIT": str(LIST_LIMIT),
            "HD_CMD_TIMEOUT": str(max(1, math.ceil(command_timeout_s))),
            "HD_MAX_BYTES": str(MAX_READ_BYTES // 4),
            "HD_NONCE": nonce,
        }
        return frames.render_script(SCRIPT_PATH, settings)

    return render


def _valid(job: str) -> str:
    try:
        return ray.valid_job_id(job)
    except ray.RayError as exc:
        raise JobRefused(str(exc), FIELD) from exc


def ray_outputs(cluster, phase: dict[str, str]) -> dict[str, str]:
    """Run one phase of ray.sh on the head: its frames as text. JobRefused when it cannot."""
    if not cluster.controller_address or not cluster.controller_host_key:
        raise JobRefused(f"Cluster {cluster.name} has no Ray head configured.", FIELD)
    where = f"{cluster.controller_address}:{cluster.controller_port}"
    check_egress(
        cluster.controller_address, cluster.controller_port, what="the Ray head", field=FIELD
    )
    command = cluster.ray_command or "ray"
    if "\n" in command or "\0" in command:
        raise JobRefused(f"Cluster {cluster.name}: the ray command must be one line.", FIELD)
    plan = CollectionPlan(
        command_timeout_s=TIME_BUDGET.command_s,
        total_timeout_s=HEAD_VISIT_S,
        max_total_bytes=MAX_READ_BYTES,
    )
    run = run_script(
        controller_target(cluster, "Ray head"),
        plan,
        _render(phase, command, TIME_BUDGET.command_s),
    )
    if run.failure is not None:
        raise JobRefused(f"Cannot ask the Ray head ({where}): {run.failure.text}", FIELD)
    outputs = {k: v.decode("utf-8", "replace") for k, v in run.frames.items()}
    if "errors" in outputs and not ({"jobs", "workers"} & set(outputs)):
        raise JobRefused(f"The Ray head cannot answer: {outputs['errors'].strip()}", FIELD)
    return outputs


def ray_job_plan(cluster, job: str) -> dict:
    """Read the job from Ray and resolve every node of its workers: the plan as plain data
    ({"nodes": [...], "scheduler": {...}}, what a worker hands the web), or JobRefused."""
    job = _valid(job)
    found = ray_outputs(cluster, {"HD_PHASE": "find"})
    try:  # an unknown, pending or ended job costs one `ray` call
        asked = ray.job_asked(found, job)
        ray.refuse_unless_active(asked)
        detail = ray_outputs(cluster, {"HD_PHASE": "read", "HD_JOB_ID": asked.job_id})
        outputs = {**found, **detail}
        read = ray.read_job(outputs, job)
        ray.refuse_unless_running(read)
    except ray.RayError as exc:
        raise JobRefused(str(exc), FIELD) from exc
    named = [(node.name, node.address) for node in read.job_nodes]
    nodes = known_nodes(cluster, named, job=f"Ray job {job}", who="Ray's node", field=FIELD)
    kept = {k: v[:MAX_OUTPUT_KEPT] for k, v in outputs.items()}
    return {"nodes": [_node_json(n) for n in nodes], "scheduler": scheduler_json(read, kept)}


def _node_json(node: JobNode) -> dict:
    return {
        "name": node.name,
        "address": node.address,
        "port": node.port,
        "username": node.username,
        "key_path": node.key_path,
        "host_key": node.host_key,
    }


def scheduler_json(read: ray.RayRead, outputs: dict[str, str]) -> dict:
    """What the snapshot keeps of Ray's answer: the job, its workers and nodes, Ray's words
    per node (`lines`), and per node the pids to visit, the logs to read and the ranks."""
    pids: dict[str, list[int]] = {node.name: [] for node in read.job_nodes}
    for worker in read.workers:
        if worker.alive and worker.pid is not None:
            pids.setdefault(worker.node, []).append(worker.pid)
    return {
        "schema": 1,
        "kind": "ray",
        "job": read.summary(),
        "workers": [
            {
                "actor_id": w.actor_id,
                "state": w.state,
                "node": w.node,
                "address": w.address,
                "pid": w.pid,
                "rank": w.rank,
                "local_rank": w.local_rank,
                "node_rank": w.node_rank,
                "reason": w.reason,
                "death": w.death,
            }
            for w in read.workers
        ],
        "ray_nodes": [
            {"name": n.name, "address": n.address, "state": n.state, "message": n.message}
            for n in read.nodes.values()
        ][:1000],
        "placement_groups": read.placement_groups[:100],
        "failures": read.failures,
        "outputs": outputs,
        "lines": ray.evidence_lines(read),
        "extra_logs": ray.worker_logs(read),
        "pids": pids,
        "ranks": ray.rank_map(read),
    }
