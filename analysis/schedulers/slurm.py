"""What Slurm says about one job, read from its own commands' output (pure: no Django).

- `scontrol show job -o ID`: one line per job (several for a heterogeneous job), `Key=Value`
  fields separated by spaces; values such as Command= or Comment= may hold spaces.
- `scontrol show node -o LIST`: one line per node, State (IDLE, ALLOCATED, MIXED, DOWN, DRAIN,
  FAIL, NOT_RESPONDING as flags: `DOWN+DRAIN+NOT_RESPONDING`, a trailing `*` for "not
  responding") and Reason (`Kill task failed [root@2026-11-30T09:12:00]`).
- `sacct -P -n -o JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,NTasks,Elapsed,Start,End`:
  the job and each step (`123.batch`, `123.0`), ExitCode as `code:signal`.
- `scontrol show step -o ID`: the steps running now.

Job ids: a plain id (`4417203`), an array task (`4417203_7`), a het-job component
(`4417203+1`). Everything is bounded: lines and fields are cut, host lists are expanded with
a cap (hostlist.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .hostlist import HostListError, expand

JOB_ID = re.compile(r"^[0-9]{1,10}(?:_[0-9]{1,10}|\+[0-9]{1,4})?$")
MAX_LINE = 64 * 1024
MAX_RECORDS = 10_000
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/.()]{0,63})=")

# Job states a snapshot makes sense in, and those that mean the job is over.
ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING"})
PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING"})
# Node state flags that take a node's ranks out of the job (or say why they left).
BAD_NODE_FLAGS = frozenset(
    {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "POWER_DOWN"}
)


class SlurmError(ValueError):
    """Slurm's answer says the job cannot be snapshot; the message says why, for an SRE."""


def valid_job_id(text: str) -> str:
    job = text.strip()
    if not JOB_ID.match(job):
        raise SlurmError(
            f"{text[:40]!r} is not a Slurm job id: digits, with _N for an array task or +N "
            "for a heterogeneous job component (4417203, 4417203_7, 4417203+1)."
        )
    return job


def records(text: str) -> list[dict[str, str]]:
    """`Key=Value ...` lines (scontrol -o) -> one dict per line."""
    out = []
    for line in text.splitlines()[:MAX_RECORDS]:
        line = line[:MAX_LINE].strip()
        if not line:
            continue
        marks = list(_FIELD.finditer(line))
        record = {}
        for index, mark in enumerate(marks):
            end = marks[index + 1].start() if index + 1 < len(marks) else len(line)
            record.setdefault(mark.group(1), line[mark.end() : end].strip())
        if record:
            out.append(record)
    return out


@dataclass(frozen=True)
class SlurmJob:
    job_id: str  # as asked for
    name: str = ""
    user: str = ""
    partition: str = ""
    state: str = ""
    reason: str = ""
    elapsed: str = ""
    time_limit: str = ""
    start_time: str = ""
    node_list: str = ""  # compressed, as Slurm writes it
    nodes: tuple[str, ...] = ()
    batch_host: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: str = ""
    num_tasks: int | None = None
    het_components: int = 1

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    def summary(self) -> dict:
        """The job as the incident head, the timeline and exports show it."""
        return {
            "id": self.job_id,
            "name": self.name,
            "user": self.user,
            "partition": self.partition,
            "state": self.state,
            "reason": self.reason,
            "elapsed": self.elapsed,
            "time_limit": self.time_limit,
            "start_time": self.start_time,
            "node_list": self.node_list,
            "nodes": len(self.nodes),
            "batch_host": self.batch_host,
            "exit_code": self.exit_code,
        }


def _user(value: str) -> str:
    return value.split("(", 1)[0]


def _state(value: str) -> str:
    return value.split(" ", 1)[0].upper()


def job_from_scontrol(text: str, job_id: str) -> SlurmJob:
    """The job `job_id` from `scontrol show job -o` (all components of a het job merged)."""
    found = records(text)
    if not found:
        raise SlurmError(f"Slurm knows no job {job_id} (scontrol show job printed nothing).")
    first = found[0]
    nodes: dict[str, None] = {}
    lists = []
    for record in found:
        node_list = record.get("NodeList", "")
        if node_list and node_list != "(null)":
            lists.append(node_list)
            try:
                nodes.update(dict.fromkeys(expand(node_list)))
            except HostListError as exc:
                raise SlurmError(f"job {job_id}: NodeList={node_list[:200]}: {exc}") from exc
    tasks = first.get("NumTasks", "")
    # A het job's state is its leader's; its components' tasks add up.
    total_tasks = sum(int(r["NumTasks"]) for r in found if r.get("NumTasks", "").isdecimal())
    return SlurmJob(
        job_id=job_id,
        name=first.get("JobName", "")[:200],
        user=_user(first.get("UserId", ""))[:64],
        partition=first.get("Partition", "")[:64],
        state=_state(first.get("JobState", "")),
        reason=first.get("Reason", "")[:200],
        elapsed=first.get("RunTime", "")[:32],
        time_limit=first.get("TimeLimit", "")[:32],
        start_time=first.get("StartTime", "")[:32],
        node_list=",".join(lists)[:2000],
        nodes=tuple(nodes),
        batch_host=first.get("BatchHost", "")[:255],
        stdout=first.get("StdOut", "")[:1024],
        stderr=first.get("StdErr", "")[:1024],
        exit_code=first.get("ExitCode", "")[:16],
        num_tasks=total_tasks or (int(tasks) if tasks.isdecimal() else None),
        het_components=len(found),
    )


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # as Slurm writes it: DOWN+DRAIN, IDLE*, ALLOCATED
    reason: str = ""
    address: str = ""
    hostname: str = ""

    @property
    def flags(self) -> frozenset[str]:
        text = self.state.upper()
        flags = set(text.rstrip("*~#!%$@^-").split("+"))
        if text.endswith("*"):
            flags.add("NOT_RESPONDING")
        return frozenset(flags)

    @property
    def bad(self) -> bool:
        return bool(self.flags & BAD_NODE_FLAGS)

    def line(self) -> str:
        reason = f" Reason={self.reason}" if self.reason else ""
        return f"slurm: node {self.name} State={self.state}{reason}"


def node_states(text: str) -> dict[str, NodeState]:
    out = {}
    for record in records(text):
        name = record.get("NodeName", "")
        if not name:
            continue
        out[name] = NodeState(
            name=name[:255],
            state=record.get("State", "")[:128],
            reason=record.get("Reason", "")[:500],
            address=record.get("NodeAddr", "")[:253],
            hostname=record.get("NodeHostName", "")[:253],
        )
    return out


@dataclass(frozen=True)
class Step:
    step_id: str  # 123, 123.batch, 123.0, 123+1.0
    name: str
    state: str
    exit_code: int | None
    signal: int | None
    node_list: str = ""
    tasks: int | None = None
    elapsed: str = ""
    line: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.exit_code or self.signal) or self.state in {
            "FAILED",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "TIMEOUT",
            "CANCELLED",
        }


def _code_signal(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdecimal() else None, int(sig) if sig.isdecimal() else None)


def sacct_steps(text: str) -> list[Step]:
    """`sacct -P -n -o JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,NTasks,Elapsed,...`"""
    out = []
    for line in text.splitlines()[:MAX_RECORDS]:
        cells = line[:MAX_LINE].split("|")
        if len(cells) < 4 or not cells[0]:
            continue
        code, sig = _code_signal(cells[3])
        tasks = cells[6] if len(cells) > 6 else ""
        out.append(
            Step(
                step_id=cells[0][:64],
                name=cells[1][:200],
                state=_state(cells[2]),
                exit_code=code,
                signal=sig,
                node_list=cells[5][:2000] if len(cells) > 5 else "",
                tasks=int(tasks) if tasks.isdecimal() else None,
                elapsed=cells[7][:32] if len(cells) > 7 else "",
                line=line[:500],
            )
        )
    return out


def running_steps(text: str) -> list[str]:
    """Step ids from `scontrol show step -o` (the batch and extern steps are not work)."""
    steps = []
    for record in records(text):
        step = record.get("StepId", "")
        if step and not step.endswith((".batch", ".extern")):
            steps.append(step[:64])
    return steps


@dataclass
class JobRead:
    """Everything one read of the controller gave, parsed."""

    job: SlurmJob
    nodes: dict[str, NodeState] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    accounting: str = ""  # why sacct gave nothing, when it did not


def read_job(outputs: dict[str, str], job_id: str) -> JobRead:
    """Parse the frames of collectors/slurm.sh; SlurmError when the job cannot be used."""
    if outputs.get("job.rc", "0").strip() not in ("", "0"):
        said = (outputs.get("job.err") or outputs.get("job") or "").strip()[:300]
        if "Invalid job id" in said:
            raise SlurmError(f"Slurm knows no job {job_id} ({said}).")
        raise SlurmError(f"scontrol show job {job_id} failed: {said or 'no output'}")
    job = job_from_scontrol(outputs.get("job", ""), job_id)
    accounting = ""
    if outputs.get("sacct.rc", "0").strip() not in ("", "0") or "sacct" not in outputs:
        accounting = (outputs.get("sacct.err") or "sacct is not installed").strip()[:300]
    return JobRead(
        job=job,
        nodes=node_states(outputs.get("nodes", "")),
        steps=sacct_steps(outputs.get("sacct", "")),
        running=running_steps(outputs.get("steps", "")),
        accounting=accounting,
    )


def refuse_unless_running(read: JobRead) -> None:
    """A snapshot is of a job that runs now: one that is pending or over is refused, saying
    which and why."""
    job = read.job
    if job.pending:
        why = f" ({job.reason})" if job.reason and job.reason != "None" else ""
        raise SlurmError(
            f"Slurm job {job.job_id} is {job.state}{why}: it has no nodes to snapshot yet."
        )
    if not job.active:
        code = f", exit code {job.exit_code}" if job.exit_code else ""
        raise SlurmError(
            f"Slurm job {job.job_id} is {job.state or 'in no known state'}{code}: it has ended, "
            "so there is nothing running to snapshot (its logs stay where Slurm wrote them)."
        )
    if not job.nodes:
        raise SlurmError(f"Slurm job {job.job_id} is {job.state} but names no nodes.")


def evidence_lines(read: JobRead) -> dict[str, list[str]]:
    """Slurm's own words per node, as log lines the readers of every log understand: each
    node's state when it is down / drained / failed (with the reason), and the steps that
    ended badly (on every node of the step). Keyed by node name."""
    lines: dict[str, list[str]] = {}
    for state in read.nodes.values():
        if state.bad:
            lines.setdefault(state.name, []).append(state.line())
    for step in read.steps:
        if not step.failed or "." not in step.step_id:
            continue
        text = (
            f"slurm: step {step.step_id} ({step.name}) {step.state} "
            f"ExitCode={step.exit_code}:{step.signal}"
        )
        try:
            names = expand(step.node_list) if step.node_list else []
        except HostListError:
            names = []
        for name in names:
            lines.setdefault(name, []).append(text)
    return lines
