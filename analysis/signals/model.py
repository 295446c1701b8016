"""The line reader's contract: where a text came from, and what one of its lines says.

Interface 1 of issue 17 (docs/architecture.md, "Signals"): `LineSource` and `Signal` as agreed,
plus a few optional fields with defaults (`collected_at`, `local_ranks`, `single_node` on the
source; `local` and `pid` on the signal) that no caller has to give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

# Every kind a signal may have. The engine may add kinds; nobody renames one.
SIGNAL_KINDS = (
    "progress",  # a monotonically increasing counter: step, iter, global_step, tqdm, trainer dicts
    "checkpoint",  # a checkpoint save begins or is under way
    "exception",  # the line that says what a Python exception was (`ValueError: ...`)
    "fatal",  # Fatal Python error, abort, CUDA / NCCL errors that end the process
    "killed",  # SIGKILL, exit 137 / -9
    "segfault",  # SIGSEGV, -11 / 139, kernel segfault lines
    "oom",  # host or cgroup OOM kill
    "gpu_oom",  # CUDA out of memory
    "xid",  # NVIDIA Xid; `code` is the Xid
    "exit",  # a process or task exited non-zero, other signals
    "timeout",  # a collective / watchdog / barrier timeout
    "connection",  # closed / refused / reset / broken pipe / remote process exited
    "rendezvous",  # c10d store, TCPStore, rendezvous, init_process_group failures
    "init",  # NCCL communicator set-up failures
    "desync",  # a desync report naming a lagging rank (`peer`)
    "mismatch",  # ranks ran different collectives
    "ras",  # an NCCL RAS status other than OK; `peer` the missing rank
    "ras_ok",  # NCCL RAS says every communicator is OK
    "straggler",  # a straggler detector names a rank (`peer`)
    "link",  # InfiniBand / mlx5 / NVLink link errors
    "node_state",  # a scheduler marks a node down / drained / failed / not ready
    "evicted",  # a pod or task preempted / evicted
    "nccl_config",  # NCCL reports a configuration choice
)
# What is not a failure: the rest say something went wrong, on the rank or node named.
NOT_FAILURES = frozenset({"progress", "checkpoint", "ras_ok", "nccl_config"})
FAILURE_KINDS = frozenset(SIGNAL_KINDS) - NOT_FAILURES

TEXT_CAP = 1000  # characters of a line kept in a signal


@dataclass(frozen=True)
class LineSource:
    """Where a text came from: what its lines cannot say about themselves."""

    path: str = ""  # the file's path inside the node's bundle folder, "logs/train-worker-3.log"
    node: str = ""  # the node (bundle folder name / host name) the file came from
    pid_ranks: Mapping[int, int] = field(default_factory=dict)  # pid -> global rank (environ)
    hosts: Mapping[str, str] = field(default_factory=dict)  # host as lines spell it -> node
    # Beyond the agreed fields, all optional:
    collected_at: datetime | None = None  # gives a year to stamps printed without one (glog)
    local_ranks: Mapping[int, int] = field(default_factory=dict)  # the node's local -> global
    # Is the job one node (a local rank is then the rank)? None: nobody said; a local rank
    # with no map is then read as the rank, as the line alone suggests (`Signal.local` says so).
    single_node: bool | None = None


@dataclass(frozen=True)
class Signal:
    """One thing one line says, tied to the rank and node it concerns."""

    kind: str  # one of SIGNAL_KINDS
    rank: int | None  # the rank the line is tied to (its prefix, its file, its pid)
    node: str | None  # the node the line is tied to
    text: str  # the line (or the one line of a multi-line entry) that says it
    peer: int | None = None  # a rank the line names as the failing one (the reporter: a victim)
    step: int | None = None  # for progress: the counter's value
    code: int | None = None  # exit code, signal number or Xid, where the line gives one
    at: datetime | None = None  # the line's own timestamp, where it has one
    # Beyond the agreed fields:
    local: int | None = None  # the local rank the line's prefix gave, when it gave one
    pid: int | None = None  # the process the line names or was written by, when it says
    line_no: int = 0  # 1-based line number in the text read, for ordering within one file
