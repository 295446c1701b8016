"""What Ray says about one job, read from its own CLI's output on the head (pure: no Django).

The frames of collectors/ray.sh:
- `ray list jobs --detail --format json`: submission id, job id (hex, `02000000`), status
  (PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED), message, entrypoint, driver.
- `ray list actors --detail --format json --filter class_name=RayTrainWorker`: Ray Train's
  worker actors: state (ALIVE, DEAD, RESTARTING, ...), job id, node id, pid, placement group,
  and for a dead one `death_cause.actor_died_error_context` (reason WORKER_DIED / NODE_DIED,
  Ray's message).
- `ray list nodes --detail --format json`: node id, address, ALIVE / DEAD, state message.
- `ray list placement-groups --detail --format json`: state (CREATED, PENDING, RESCHEDULING,
  REMOVED), bundles and their nodes.
- `ray status`: the autoscaler's view (active, pending nodes, recent failures).
- Ray Train's controller log records (JSON lines): a run's name and job id, and `Started
  training worker group of size N: - (ip=A, pid=P) world_rank=R, local_rank=L, node_rank=K`,
  the only place that ties a worker's pid to its world rank (its environment does not: Ray
  Train sets RANK in the running process, which /proc/PID/environ never shows).

A job is asked for by its submission id (`raysubmit_...` or the one given to `ray job
submit`), its Ray job id, or its Ray Train run name. Everything is bounded: JSON up to the
collector's byte cap, records and lines cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# 64: what an incident keeps (Incident.scheduler_job).
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:=+-]{0,63}")
MAX_RECORDS = 100_000
MAX_LINE = 256 * 1024
MAX_TEXT = 2000
WORKER_CLASS = "RayTrainWorker"
ACTIVE_STATES = frozenset({"RUNNING"})
PENDING_STATES = frozenset({"PENDING"})
_GROUP = "Started training worker group"
_GROUP_ENTRY = re.compile(
    r"\(ip=([\w.:-]{1,255}), pid=(\d{1,10})\) world_rank=(\d{1,7}), local_rank=(\d{1,7}), "
    r"node_rank=(\d{1,7})"
)
_SPACE = re.compile(r"\s+")


class RayError(ValueError):
    """Ray's answer says the job cannot be snapshot; the message says why, for an SRE."""


def valid_job_id(text: str) -> str:
    job = text.strip()
    if not JOB_ID.fullmatch(job):
        raise RayError(
            f"{text[:40]!r} is not a Ray job: give its submission id (raysubmit_...), its Ray "
            "job id (02000000) or its Ray Train run name (letters, digits and _ . : = + -, up "
            "to 64)."
        )
    return job


def json_list(text: str) -> list[dict]:
    """The JSON list a `--format json` command printed (anything before it skipped); [] when
    there is none or it does not parse."""
    start = text.find("[")
    if start < 0:
        return []
    try:
        value = json.loads(text[start:])
    except (ValueError, RecursionError):
        return []
    if not isinstance(value, list):
        return []
    return [item for item in value[:MAX_RECORDS] if isinstance(item, dict)]


def _text(value: object, cap: int = MAX_TEXT) -> str:
    return _SPACE.sub(" ", value).strip()[:cap] if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdecimal() and len(value) < 19:
        return int(value)
    return None


@dataclass(frozen=True)
class RayNode:
    node_id: str
    address: str
    name: str
    state: str
    message: str = ""
    head: bool = False

    @property
    def dead(self) -> bool:
        return self.state == "DEAD"

    def line(self) -> str:
        why = f": {self.message}" if self.message else ""
        return f"ray: node {self.name} ({self.address}) is {self.state}{why}"


def nodes_from(text: str) -> dict[str, RayNode]:
    out = {}
    for item in json_list(text):
        node_id = _text(item.get("node_id"), 64)
        if not node_id:
            continue
        address = _text(item.get("node_ip"), 253)
        out[node_id] = RayNode(
            node_id=node_id,
            address=address,
            name=_text(item.get("node_name"), 128) or address,
            state=_text(item.get("state"), 32).upper(),
            message=_text(item.get("state_message"), 500),
            head=item.get("is_head_node") is True,
        )
    return out


@dataclass(frozen=True)
class RayWorker:
    """One Ray Train worker actor of the job."""

    actor_id: str
    state: str
    node_id: str
    pid: int | None
    address: str = ""
    node: str = ""  # the node's name as Ray knows it (its address by default)
    rank: int | None = None
    local_rank: int | None = None
    node_rank: int | None = None
    placement_group: str = ""
    reason: str = ""  # WORKER_DIED, NODE_DIED, ...
    death: str = ""  # Ray's own words on why it died

    @property
    def alive(self) -> bool:
        return self.state == "ALIVE"

    def line(self) -> str:
        who = f"world_rank={self.rank} " if self.rank is not None else ""
        what = f": {self.death}" if self.death else ""
        return (
            f"ray: Ray Train worker {who}pid={self.pid} (actor {self.actor_id[:16]}) on "
            f"{self.node} is {self.state}{what}"
        )


def _death(item: dict) -> tuple[str, str]:
    cause = item.get("death_cause")
    if not isinstance(cause, dict):
        return "", ""
    for context in cause.values():  # actor_died_error_context, creation_task_failure_context
        if isinstance(context, dict):
            return _text(context.get("reason"), 64), _text(context.get("error_message"))
    return "", ""


def workers_from(text: str, job_id: str, nodes: dict[str, RayNode]) -> list[RayWorker]:
    """The job's Ray Train worker actors (the collector asked for that class only)."""
    out = []
    for item in json_list(text):
        if item.get("class_name") != WORKER_CLASS or item.get("job_id") != job_id:
            continue
        node_id = _text(item.get("node_id"), 64)
        node = nodes.get(node_id)
        reason, death = _death(item)
        out.append(
            RayWorker(
                actor_id=_text(item.get("actor_id"), 64),
                state=_text(item.get("state"), 32).upper(),
                node_id=node_id,
                pid=_int(item.get("pid")),
                address=node.address if node else "",
                node=node.name if node else node_id[:16],
                placement_group=_text(item.get("placement_group_id"), 64),
                reason=reason,
                death=death,
            )
        )
    return out


@dataclass(frozen=True)
class TrainRun:
    """A Ray Train run as its controller logged it: name, job, its latest worker group."""

    name: str
    job_id: str
    # (address, pid) -> (world rank, local rank, node rank)
    group: dict[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)


def train_runs(text: str) -> list[TrainRun]:
    """Ray Train's controller records, one run per controller; the last worker group wins."""
    runs: dict[tuple[str, str], dict] = {}
    for line in text.splitlines()[:MAX_RECORDS]:
        if not line.startswith("{") or len(line) > MAX_LINE:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        name, job = _text(record.get("run_name"), 200), _text(record.get("job_id"), 64)
        if not name or not job:
            continue
        run = runs.setdefault((name, job), {})
        message = record.get("message")
        if isinstance(message, str) and _GROUP in message:
            run.clear()
            for m in _GROUP_ENTRY.finditer(message[:MAX_LINE]):
                run[(m.group(1), int(m.group(2)))] = (
                    int(m.group(3)),
                    int(m.group(4)),
                    int(m.group(5)),
                )
    return [TrainRun(name, job, dict(group)) for (name, job), group in runs.items()]


@dataclass(frozen=True)
class RayJob:
    asked: str
    submission_id: str
    job_id: str
    status: str
    message: str = ""
    entrypoint: str = ""
    run_name: str = ""
    kind: str = ""  # SUBMISSION or DRIVER
    start_time: int | None = None  # ms since the epoch
    end_time: int | None = None
    driver_exit_code: int | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATES

    @property
    def pending(self) -> bool:
        return self.status in PENDING_STATES


def _job(item: dict, asked: str, run_name: str) -> RayJob:
    return RayJob(
        asked=asked,
        submission_id=_text(item.get("submission_id"), 128),
        job_id=_text(item.get("job_id"), 64),
        status=_text(item.get("status"), 32).upper(),
        message=_text(item.get("message"), 500),
        entrypoint=_text(item.get("entrypoint"), 500),
        run_name=run_name,
        kind=_text(item.get("type"), 32),
        start_time=_int(item.get("start_time")),
        end_time=_int(item.get("end_time")),
        driver_exit_code=_int(item.get("driver_exit_code")),
    )


def find_job(jobs: list[dict], runs: list[TrainRun], asked: str) -> RayJob:
    """The job asked for: by submission id, by Ray job id, then by Ray Train run name (the
    latest of several: a running one first)."""
    by_name = [run for run in runs if run.name == asked]
    named_jobs = {run.job_id for run in by_name}
    for test in (
        lambda j: j.get("submission_id") == asked,
        lambda j: j.get("job_id") == asked,
        lambda j: j.get("job_id") in named_jobs,
    ):
        found = [j for j in jobs if test(j)]
        if found:
            best = max(
                found, key=lambda j: (j.get("status") == "RUNNING", _int(j.get("start_time")) or 0)
            )
            job_id = best.get("job_id")
            run = next((r.name for r in reversed(runs) if r.job_id == job_id), "")
            return _job(best, asked, run)
    raise RayError(
        f"Ray knows no job {asked}: no submission id, job id or Ray Train run of that name on "
        "the head (ray list jobs)."
    )


@dataclass
class RayRead:
    """Everything one read of the head gave, parsed."""

    job: RayJob
    workers: list[RayWorker]
    nodes: dict[str, RayNode]
    placement_groups: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # `ray status`'s recent failures
    logdir: str = ""

    @property
    def job_nodes(self) -> list[RayNode]:
        """The nodes that hold (or held) a worker of the job, in Ray's order."""
        ids = dict.fromkeys(w.node_id for w in self.workers)
        return [self.nodes[i] for i in ids if i in self.nodes]

    def summary(self) -> dict:
        """The job as the incident head, the timeline and exports show it."""
        job = self.job
        names = [n.name for n in self.job_nodes]
        return {
            "kind": "ray",
            "id": job.asked,
            "submission_id": job.submission_id,
            "job_id": job.job_id,
            "name": job.run_name,
            "state": job.status,
            "message": job.message,
            "entrypoint": job.entrypoint,
            "start_time": job.start_time,
            "workers": len(self.workers),
            "alive": sum(w.alive for w in self.workers),
            "dead": sum(w.state == "DEAD" for w in self.workers),
            "nodes": len(names),
            "node_list": ", ".join(names)[:2000],
            "placement_groups": [f"{p['id'][:12]} {p['state']}" for p in self.placement_groups],
        }


def _groups(text: str, job_id: str) -> list[dict]:
    out = []
    for item in json_list(text):
        if item.get("creator_job_id") != job_id:
            continue
        bundles = item.get("bundles") if isinstance(item.get("bundles"), list) else []
        stats = item.get("stats") if isinstance(item.get("stats"), dict) else {}
        out.append(
            {
                "id": _text(item.get("placement_group_id"), 64),
                "state": _text(item.get("state"), 32).upper(),
                "bundles": len(bundles),
                "unplaced": sum(1 for b in bundles if isinstance(b, dict) and not b.get("node_id")),
                "scheduling": _text(stats.get("scheduling_state"), 64),
            }
        )
    return out


def status_failures(text: str) -> list[str]:
    """`ray status`'s `Recent failures:` entries (nodes the autoscaler saw die)."""
    lines = text.splitlines()[:MAX_RECORDS]
    out: list[str] = []
    inside = False
    for line in lines:
        if line.strip().startswith("Recent failures:"):
            inside = True
            continue
        if inside:
            entry = line.strip()
            if not entry or entry.endswith(":") or entry.startswith("---"):
                break
            if entry != "(no failures)":
                out.append(entry[:500])
    return out[:100]


HEX_JOB_ID = re.compile(r"[0-9a-f]{1,64}")


def job_asked(outputs: dict[str, str], asked: str) -> RayJob:
    """The job asked for, from the find phase's frames (jobs, Ray Train's runs); RayError
    when the head cannot say or knows no such job."""
    if outputs.get("jobs.rc", "0").strip() not in ("", "0"):
        said = (outputs.get("jobs.err") or outputs.get("jobs") or "").strip()[-300:]
        raise RayError(f"ray list jobs failed on the head: {said or 'no output'}")
    runs = train_runs(outputs.get("train", ""))
    return find_job(json_list(outputs.get("jobs", "")), runs, asked)


def read_job(outputs: dict[str, str], asked: str) -> RayRead:
    """Parse the frames of collectors/ray.sh (both phases); RayError when the job cannot be
    found."""
    job = job_asked(outputs, asked)
    runs = train_runs(outputs.get("train", ""))
    nodes = nodes_from(outputs.get("nodes", ""))
    workers = workers_from(outputs.get("workers", ""), job.job_id, nodes) if job.job_id else []
    workers = _with_ranks(workers, [r for r in runs if r.job_id == job.job_id])
    return RayRead(
        job=job,
        workers=workers,
        nodes=nodes,
        placement_groups=_groups(outputs.get("pgs", ""), job.job_id) if job.job_id else [],
        failures=status_failures(outputs.get("status", "")),
        logdir=outputs.get("logdir", "").strip()[:1024],
    )


def _with_ranks(workers: list[RayWorker], runs: list[TrainRun]) -> list[RayWorker]:
    """Each worker's world rank from its run's latest worker group; when a group is known,
    only its workers (earlier attempts' dead actors are history, not this hang)."""
    group = next((run.group for run in reversed(runs) if run.group), {})
    if not group:
        return workers
    out = []
    for worker in workers:
        ranks = group.get((worker.address, worker.pid)) if worker.pid is not None else None
        if ranks is None:
            continue
        rank, local, node_rank = ranks
        out.append(_replace(worker, rank=rank, local_rank=local, node_rank=node_rank))
    return sorted(out, key=lambda w: w.rank if w.rank is not None else -1)


def _replace(worker: RayWorker, **changes) -> RayWorker:
    from dataclasses import replace

    return replace(worker, **changes)


def refuse_unless_active(job: RayJob) -> None:
    """A snapshot is of a job that runs now: one that is pending or over is refused, saying
    which and why."""
    name = job.asked
    if job.pending:
        raise RayError(f"Ray job {name} is PENDING: it has no workers to snapshot yet.")
    if not job.active:
        why = f" ({job.message})" if job.message else ""
        raise RayError(
            f"Ray job {name} is {job.status or 'in no known state'}{why}: it has ended, so "
            "there is nothing running to snapshot (its logs stay in the Ray session's log "
            "directory)."
        )
    if not HEX_JOB_ID.fullmatch(job.job_id):
        raise RayError(f"Ray job {name} is {job.status} but has no Ray job id yet (no driver).")


def refuse_unless_running(read: RayRead) -> None:
    """A snapshot is of a job that runs now, with Ray Train workers to look at."""
    refuse_unless_active(read.job)
    if not read.workers:
        name = read.job.asked
        raise RayError(
            f"Ray job {name} is RUNNING but Ray lists no Ray Train worker of it "
            f"({WORKER_CLASS} actors): the console snapshots a Ray Train job's workers."
        )


def evidence_lines(read: RayRead) -> dict[str, list[str]]:
    """Ray's own words per node, as log lines the readers of every log understand: each dead
    worker (its world rank, pid and Ray's death cause) and each dead node, on that node."""
    lines: dict[str, list[str]] = {}
    for worker in read.workers:
        if not worker.alive:
            lines.setdefault(worker.node, []).append(worker.line())
    for node in read.job_nodes:
        if node.dead:
            lines.setdefault(node.name, []).append(node.line())
    return lines


def rank_map(read: RayRead) -> dict[str, dict[str, list[int]]]:
    """node -> {pid: [world rank, local rank]} for the job's workers with a known rank (a
    worker's environment does not carry its rank: the analysis takes it from here)."""
    out: dict[str, dict[str, list[int]]] = {}
    for worker in read.workers:
        if worker.rank is not None and worker.pid is not None:
            local = worker.local_rank if worker.local_rank is not None else -1
            out.setdefault(worker.node, {})[str(worker.pid)] = [worker.rank, local]
    return out


def worker_logs(read: RayRead) -> dict[str, list[str]]:
    """node -> the session log files of its workers (stdout, stderr, by pid and job id) and
    its raylet's log, read on that node like any log there."""
    if not read.logdir.startswith("/") or any(c in read.logdir for c in "*?[\n\0"):
        return {}
    job = read.job.job_id
    out: dict[str, list[str]] = {}
    for worker in read.workers:
        if worker.pid is None or not HEX_JOB_ID.fullmatch(job):
            continue
        paths = out.setdefault(worker.node, [f"{read.logdir}/raylet.out"])
        paths += [f"{read.logdir}/worker-*-{job}-{worker.pid}.{ext}" for ext in ("out", "err")]
    return out
