"""Small evidence built in code, in the shapes the probe ships (ps, environ, py-spy JSON, logs),
for tests that must vary one fact at a time (the joins, the property tests).

Every line format here is a real one: the lab's step line, py-spy's `dump --json` thread list,
`ps -eo pid,ppid,stat,etimes,args`, a NUL-separated environ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from analysis.evidence import NodeEvidence, SnapshotEvidence

T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
C10D = "torch/distributed/distributed_c10d.py"
WRAPPER = ("wrapper", "torch/distributed/c10d_logger.py", 83)
TRAIN = ("train_step", "train.py", 64)
MAIN = ("<module>", "train.py", 120)


def in_collective(op: str = "all_reduce", line: int = 3252, caller: int = 64) -> list[tuple]:
    """Frames innermost first: an op called from train_step."""
    return [(op, C10D, line), WRAPPER, ("train_step", "train.py", caller), MAIN]


def outside(name: str = "load_batch", filename: str = "data.py", line: int = 33) -> list[tuple]:
    return [(name, filename, line), TRAIN, MAIN]


def pyspy_json(pid: int, frames: list[tuple]) -> str:
    thread = {
        "pid": pid,
        "thread_id": pid,
        "thread_name": "MainThread",
        "os_thread_id": pid,
        "active": True,
        "owns_gil": False,
        "frames": [
            {"name": n, "filename": f, "short_filename": f, "line": ln, "locals": None}
            for n, f, ln in frames
        ],
    }
    return json.dumps([thread])


def environ(rank: int, local: int, world: int, local_world: int) -> bytes:
    pairs = {
        "RANK": rank,
        "LOCAL_RANK": local,
        "WORLD_SIZE": world,
        "LOCAL_WORLD_SIZE": local_world,
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": 29500,
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in pairs.items())


def step_lines(rank: int, host: str, last: int, at: datetime, step_s: float) -> str:
    """The lab's step lines for steps 1..last, the last one stamped `at`."""
    out = []
    for step in range(1, last + 1):
        when = at - timedelta(seconds=(last - step) * step_s)
        stamp = when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"
        out.append(
            f"{stamp} INFO [rank{rank}] host={host} step={step} loss=1.0 step_time={step_s}s"
        )
    return "\n".join(out) + "\n"


@dataclass
class Rank:
    rank: int
    pid: int
    state: str = "S"
    frames: list[tuple] = field(default_factory=in_collective)
    alive: bool = True
    log: str = ""


@dataclass
class Job:
    """A job of `nodes` x `per_node` ranks, every rank alive in the same all_reduce, each
    logging steps up to `steps` (the last `age_s` before the snapshot), every `step_s`."""

    nodes: int = 2
    per_node: int = 4
    steps: int = 40
    step_s: float = 1.0
    age_s: float = 1.0
    collected_at: datetime = T0
    world_stated: bool = True
    node_names: list[str] = field(default_factory=list)
    ranks: dict[int, Rank] = field(default_factory=dict)
    extra_logs: dict[int, list[str]] = field(default_factory=dict)  # node index -> lines
    dmesg: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.node_names:
            self.node_names = [f"gpu-{i:02d}" for i in range(self.nodes)]
        for rank in range(self.world):
            self.ranks.setdefault(rank, Rank(rank, 4000 + rank))

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def node_of(self, rank: int) -> int:
        return rank // self.per_node

    def evidence(self) -> SnapshotEvidence:
        nodes = []
        last_at = self.collected_at - timedelta(seconds=self.age_s)
        for index, name in enumerate(self.node_names):
            node = NodeEvidence(node=name, hostname=name, collected_at=self.collected_at)
            rows = ["  PID  PPID STAT ELAPSED COMMAND", " 3999     1 Ssl 3600 torchrun train.py"]
            for rank in range(index * self.per_node, (index + 1) * self.per_node):
                state = self.ranks[rank]
                lines = step_lines(rank, name, self.steps, last_at, self.step_s) + state.log
                node.logs[f"/var/log/train/rank{rank}.log"] = lines
                if not state.alive:
                    continue
                rows.append(f" {state.pid}  3999 {state.state}l 3590 python -u train.py")
                node.environ[state.pid] = environ(
                    rank, rank % self.per_node, self.world, self.per_node
                )
                node.pyspy[state.pid] = pyspy_json(state.pid, state.frames)
            node.ps = "\n".join(rows) + "\n"
            node.environ[3999] = b"PATH=/usr/bin\0HOME=/root\0"  # the launcher: no RANK
            if self.extra_logs.get(index):
                node.logs["/var/log/train/launcher.log"] = "\n".join(self.extra_logs[index]) + "\n"
            node.dmesg = self.dmesg.get(index, "[    0.000000] Linux version 6.1.0\n")
            nodes.append(node)
        return SnapshotEvidence(
            nodes=nodes,
            expected_world_size=self.world if self.world_stated else None,
            collected_at=self.collected_at,
        )
