"""Ask a cluster's scheduler which nodes a job runs on, over the same pinned SSH as a node.

`slurm_job_plan(cluster, job_id)` runs `slurm.sh` (read-only: scontrol show, squeue, sacct)
on the cluster's controller or login host, parses the answer (analysis/schedulers/slurm.py)
and turns the job's nodes into the SSH targets the snapshot visits: each node's address is
Slurm's NodeAddr, its host key comes from the operator's known_hosts file on this worker
(never from a first connection), its login from the cluster's node defaults. Every refusal
is a `JobRefused` saying why; nothing is written here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from analysis.schedulers import slurm
from clusters.sshspec import MAX_KNOWN_HOSTS_FILE, KnownHostsError, NodeTarget, known_host_key
from clusters.validators import validate_remote_host
from core import egress
from core.errors import Invalid
from hangdesk import frames
from hangdesk.budget import TIME_BUDGET
from hangdesk.plan import CollectionPlan

from .visits import run_script

SCRIPT_PATH = Path(__file__).with_name("slurm.sh")
# Slurm's answer for one job: a 1,000-node job's `scontrol show node -o` is ~1 MB.
MAX_READ_BYTES = 16 * 1024 * 1024
MAX_OUTPUT_KEPT = 256 * 1024  # of each command's output, in the snapshot and its bundle


class JobRefused(Invalid):
    """The job cannot be snapshot as asked (unknown, pending, ended, unreachable controller,
    a node without a known host key); the message says which, for an SRE. `field` names the
    input it is about: the Slurm job (`slurm_job`) or the Ray job (`ray_job`)."""

    def __init__(self, message: str, field: str = "slurm_job") -> None:
        super().__init__(message, field=field)


@dataclass(frozen=True)
class JobNode:
    name: str
    address: str
    port: int
    username: str
    key_path: str
    host_key: str


@dataclass
class JobSnapshotPlan:
    """What a snapshot of the job needs: its nodes, Slurm's evidence, extra log paths."""

    read: slurm.JobRead
    nodes: list[JobNode]
    outputs: dict[str, str]
    # node name -> the job's own StdOut / StdErr files on it (read as the training log)
    extra_logs: dict[str, list[str]]

    def to_json(self) -> dict:
        """What the snapshot needs, as plain data (a worker hands it to the web)."""
        return {
            "nodes": [asdict(n) for n in self.nodes],
            "scheduler": self.scheduler_json(),
        }

    def scheduler_json(self) -> dict:
        return {
            "schema": 1,
            "kind": "slurm",
            "job": self.read.job.summary(),
            "accounting": self.read.accounting,
            "running_steps": self.read.running,
            "outputs": self.outputs,
            "lines": slurm.evidence_lines(self.read),
            "extra_logs": self.extra_logs,
        }


def controller_target(cluster, what: str = "controller") -> NodeTarget:
    return NodeTarget(
        name=f"{cluster.name} {what}",
        address=cluster.controller_address,
        port=cluster.controller_port,
        username=cluster.controller_username or "root",
        key_path=cluster.controller_key_path or None,
        host_key=cluster.controller_host_key,
    )


def _render(job_id: str, command_timeout_s: float):
    def render(nonce: str) -> bytes:
        settings = {
            "HD_JOB": job_id,
            "HD_CMD_TIMEOUT": str(max(1, math.ceil(command_timeout_s))),
            "HD_MAX_BYTES": str(MAX_READ_BYTES // 4),
            "HD_NONCE": nonce,
        }
        return frames.render_script(SCRIPT_PATH, settings)

    return render


def slurm_outputs(cluster, job_id: str) -> dict[str, str]:
    """Run slurm.sh on the controller: its frames as text. JobRefused when it cannot."""
    job_id = _valid(job_id)
    if not cluster.controller_address or not cluster.controller_host_key:
        raise JobRefused(f"Cluster {cluster.name} has no Slurm controller configured.")
    check_egress(cluster.controller_address, cluster.controller_port)
    plan = CollectionPlan(
        command_timeout_s=TIME_BUDGET.command_s,
        max_total_bytes=MAX_READ_BYTES,
    )
    run = run_script(controller_target(cluster), plan, _render(job_id, TIME_BUDGET.command_s))
    if run.failure is not None:
        where = f"{cluster.controller_address}:{cluster.controller_port}"
        raise JobRefused(f"Cannot ask the Slurm controller ({where}): {run.failure.text}")
    outputs = {k: v.decode("utf-8", "replace") for k, v in run.frames.items()}
    if "errors" in outputs and "job" not in outputs:
        raise JobRefused(f"The Slurm controller cannot answer: {outputs['errors'].strip()}")
    return outputs


def _valid(job_id: str) -> str:
    try:
        return slurm.valid_job_id(job_id)
    except slurm.SlurmError as exc:
        raise JobRefused(str(exc)) from exc


def check_egress(
    host: str, port: int, *, what: str = "the Slurm controller", field: str = "slurm_job"
) -> None:
    """The one egress policy (core/egress.py), purpose "ssh": private and loopback addresses
    are fine for a cluster, link-local (cloud metadata), multicast and unspecified are not."""
    try:
        egress.check_destination(host, port, purpose="ssh")
    except egress.EgressRefused as exc:
        raise JobRefused(f"{what} ({host}:{port}): {exc.reason}", field) from exc
    except egress.DeliveryError as exc:  # the name does not resolve
        raise JobRefused(
            f"{what} ({host}:{port}): {exc.kind}: the name does not resolve", field
        ) from exc


def slurm_job_plan(cluster, job_id: str) -> JobSnapshotPlan:
    """Read the job from Slurm and resolve every node; JobRefused if any step fails."""
    job_id = _valid(job_id)
    outputs = slurm_outputs(cluster, job_id)
    try:
        read = slurm.read_job(outputs, job_id)
        slurm.refuse_unless_running(read)
    except slurm.SlurmError as exc:
        raise JobRefused(str(exc)) from exc
    nodes = job_nodes(cluster, read)
    logs = _job_logs(read)
    kept = {k: v[:MAX_OUTPUT_KEPT] for k, v in outputs.items()}
    return JobSnapshotPlan(read=read, nodes=nodes, outputs=kept, extra_logs=logs)


def _job_logs(read: slurm.JobRead) -> dict[str, list[str]]:
    """The batch script's StdOut / StdErr (where srun's `task N: Killed` lines land) are
    read on the batch host, like any log there."""
    job = read.job
    paths = sorted({p for p in (job.stdout, job.stderr) if _readable_path(p)})
    if not paths or not job.batch_host:
        return {}
    return {job.batch_host: paths}


def _readable_path(path: str) -> bool:
    """An absolute path on one line, with no `%` pattern Slurm left unexpanded: anything
    else would make the batch host's whole visit an invalid plan."""
    return path.startswith("/") and not any(c in path for c in "%\n\0")


def job_nodes(cluster, read: slurm.JobRead) -> list[JobNode]:
    """Every node of the job as an SSH target, or JobRefused naming the nodes that lack a
    host key in the known_hosts file (or an address)."""
    named = []
    for name in read.job.nodes:
        state = read.nodes.get(name)
        named.append((name, (state.address if state and state.address else name).strip()))
    return known_nodes(cluster, named, job=f"Slurm job {read.job.job_id}", who="Slurm's node")


def known_nodes(
    cluster, named: list[tuple[str, str]], *, job: str, who: str, field: str = "slurm_job"
) -> list[JobNode]:
    """(name, address) pairs a scheduler gave as SSH targets with the cluster's node login and
    the host keys of the operator's known_hosts file; JobRefused naming every node without
    one (or without a usable address)."""
    known = _known_hosts(cluster.known_hosts_path, field)
    nodes, missing = [], []
    for name, address in named:
        try:
            validate_remote_host(address)
        except Exception:
            missing.append(f"{name} (address {address[:60]!r} is not a host)")
            continue
        check_egress(address, cluster.node_port, what=f"{who} {name}", field=field)
        try:
            key = _key_for(known, name, address, cluster.node_port)
        except KnownHostsError:
            missing.append(name)
            continue
        nodes.append(
            JobNode(
                name=name,
                address=address,
                port=cluster.node_port,
                username=cluster.node_username or "root",
                key_path=cluster.node_key_path,
                host_key=key,
            )
        )
    if missing:
        shown = ", ".join(missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        raise JobRefused(
            f"{job}: no host key in {cluster.known_hosts_path} for {shown}. Add them "
            "(ssh-keyscan, checked by hand) and try again; the console never trusts a key on "
            "first use.",
            field,
        )
    return nodes


def _key_for(known: str, name: str, address: str, port: int) -> str:
    try:
        return known_host_key(known, address, port)
    except KnownHostsError:
        return known_host_key(known, name, port)


def _known_hosts(path: str, field: str = "slurm_job") -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(MAX_KNOWN_HOSTS_FILE)
    except OSError as exc:
        raise JobRefused(
            f"Cannot read the nodes' known_hosts file {path} on this worker: "
            f"{exc.strerror or exc}.",
            field,
        ) from exc
