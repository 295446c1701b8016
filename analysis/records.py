"""The typed records a diagnosis is made of: per-rank rows, stack groups, environment and NCCL
differences, shell start-up lines, flight-recorder and watchdog summaries, parse problems.

Each record is a frozen dataclass with `to_json()` (the stored and served form, field by field
as `collectors/diagnosis_serializers.py` documents it) and `from_json()`, which reads what any
schema version stored: a field an older diagnosis lacks takes its default, a field it does
not know is ignored. Readers (pages, guide, branches, post-mortems, sharing, the chart) read
these fields, never the JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from analysis.stacks import compact_ranks


class RankStatus(StrEnum):
    """Where a rank stands in one snapshot: the per-rank table, the chart and the API."""

    IN_COLLECTIVE = "in_collective"  # its stack waits in a collective
    INIT = "init"  # its stack is in init_process_group / rendezvous
    OUTSIDE = "outside"  # alive, its stack outside any collective
    NO_STACK = "no_stack"  # alive, no stack collected
    LOG_ONLY = "log_only"  # only its log lines were seen
    MISSING = "missing"  # gone, on positive evidence
    EXITED = "exited"  # gone, with an exit code or a zombie
    UNOBSERVED = "unobserved"  # the evidence says nothing about it

    @property
    def gone(self) -> bool:
        return self in (RankStatus.MISSING, RankStatus.EXITED)

    @classmethod
    def read(cls, value: object) -> RankStatus:
        """A stored status; a value no version wrote reads as unobserved (claims nothing)."""
        # A dict lookup: the Enum call costs more than the rest of a row (4,096 rows a page).
        return _STATUSES.get(value, cls.UNOBSERVED) if type(value) is str else cls.UNOBSERVED


class GroupKind(StrEnum):
    """What a stack group holds: ranks sharing one stack (by its innermost frame's kind), or
    the ranks with no stack, gathered by why."""

    COLLECTIVE = "collective"
    INIT = "init"
    OUTSIDE = "outside"
    MISSING = "missing"
    EXITED = "exited"
    NO_STACK = "no_stack"
    LOG_ONLY = "log_only"
    UNOBSERVED = "unobserved"

    @classmethod
    def read(cls, value: object) -> GroupKind:
        try:
            return cls(value)
        except ValueError:
            return cls.OUTSIDE


_STATUSES: dict[str, RankStatus] = {status.value: status for status in RankStatus}


# ------------------------------------------------------------------ lenient readers
# JSON gives exact types (`type(x) is int` also keeps out bool, a subclass of int); they run
# once per field of every rank row a page reads, so they stay this small.


def as_str(value: object, default: str = "") -> str:
    return value if type(value) is str else default


def as_opt_str(value: object) -> str | None:
    return value if type(value) is str else None


def as_int(value: object, default: int = 0) -> int:
    return value if type(value) is int else default


def as_opt_int(value: object) -> int | None:
    return value if type(value) is int else None


def as_opt_float(value: object) -> float | None:
    kind = type(value)
    return value if kind is float else float(value) if kind is int else None


_INTS, _STRS = frozenset({int}), frozenset({str})


def as_ints(value: object) -> tuple[int, ...]:
    if type(value) is not list and type(value) is not tuple:
        return ()
    if _INTS.issuperset(map(type, value)):  # in C: a whole-world stop lists every rank
        return tuple(value)
    return tuple(v for v in value if type(v) is int)


def as_strs(value: object) -> tuple[str, ...]:
    if type(value) is not list and type(value) is not tuple:
        return ()
    if _STRS.issuperset(map(type, value)):
        return tuple(value)
    return tuple(v for v in value if type(v) is str)


def _dicts(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_when(value: object) -> datetime | None:
    """An ISO timestamp as stored; anything else is no time."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    if type(value) is not str or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def records(kind, value: object) -> tuple:
    """A stored list of `kind` records (each read by `kind.from_json`)."""
    return tuple(kind.from_json(item) for item in _dicts(value))


# ------------------------------------------------------------------ per rank


@dataclass(slots=True)
class RankRow:
    """One rank of the per-rank table. Not frozen (nothing changes a row once made): a
    frozen row sets each of its 15 fields by a call, 12x the cost of the row itself, and a
    verdict makes 32,000 of them at fleet scale."""

    rank: int
    status: RankStatus
    node: str | None = None
    pid: int | None = None
    state: str = ""  # R/S/D/Z/T from ps, "" when unknown
    local_rank: int | None = None
    suspect: bool = False
    last_step: int | None = None
    last_step_at: datetime | None = None
    step_time: float | None = None  # seconds, median of the last logged step times
    frame: str = ""  # "all_reduce (torch/distributed/distributed_c10d.py:3252)"
    stack_signature: str = ""
    stack_group: int | None = None  # the index of its stack group
    exit_code: int | None = None
    gpu_util: int | None = None  # percent

    def to_json(self) -> dict[str, Any]:
        return _row_json(self, iso(self.last_step_at))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankRow:
        get = data.get
        return cls(
            rank=as_int(get("rank")),
            status=RankStatus.read(get("status")),
            node=as_opt_str(get("node")),
            pid=as_opt_int(get("pid")),
            state=as_str(get("state")),
            local_rank=as_opt_int(get("local_rank")),
            suspect=get("suspect") is True,
            last_step=as_opt_int(get("last_step")),
            last_step_at=read_when(get("last_step_at")),
            step_time=as_opt_float(get("step_time")),
            frame=as_str(get("frame")),
            stack_signature=as_str(get("stack_signature")),
            stack_group=as_opt_int(get("stack_group")),
            exit_code=as_opt_int(get("exit_code")),
            gpu_util=as_opt_int(get("gpu_util")),
        )


def rows_json(rows: Iterable[RankRow]) -> list[dict[str, Any]]:
    """The rows' JSON, each distinct step time written once: a fleet's ranks log their steps
    at a few times (each rank's its own object), 32,000 `isoformat` calls at fleet scale."""
    # By value, zone and fold: times of one zone compare by their local fields alone, fold
    # ignored, and two of them equal so may print apart (the hour a clock goes back).
    written: dict[tuple, str] = {}
    out = []
    for row in rows:
        at, text = row.last_step_at, None
        if at is not None:
            spelled = (at, at.tzinfo, at.fold)
            text = written.get(spelled)
            if text is None:
                text = written[spelled] = at.isoformat()
        out.append(_row_json(row, text))
    return out


def _row_json(row: RankRow, last_step_at: str | None) -> dict[str, Any]:
    return {
        "rank": row.rank,
        "node": row.node,
        "pid": row.pid,
        "state": row.state,
        "local_rank": row.local_rank,
        "status": str(row.status),
        "suspect": row.suspect,
        "last_step": row.last_step,
        "last_step_at": last_step_at,
        "step_time": row.step_time,
        "frame": row.frame,
        "stack_signature": row.stack_signature,
        "stack_group": row.stack_group,
        "exit_code": row.exit_code,
        "gpu_util": row.gpu_util,
    }


@dataclass(frozen=True)
class StackGroup:
    """Ranks with one identical stack, or the ranks without one gathered by why."""

    index: int
    kind: GroupKind
    frame: str  # the innermost relevant frame's name, or "(absent)", "(no stack)", ...
    rank_list: tuple[int, ...]
    signature: str = ""
    location: str = ""  # "torch/distributed/distributed_c10d.py:3252"
    nodes: tuple[str, ...] = ()  # the first few
    node_count: int = 0
    stack: tuple[str, ...] = ()  # a sample of its frames, innermost first

    @cached_property
    def ranks(self) -> str:
        """Compact: "0-6, 8-39" (once: a page asks several times, 32,000 ranks cost ms)."""
        return compact_ranks(self.rank_list)

    @property
    def rank_count(self) -> int:
        return len(self.rank_list)

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "frame": self.frame,
            "location": self.location,
            "kind": str(self.kind),
            "ranks": self.ranks,
            "rank_list": list(self.rank_list),
            "rank_count": self.rank_count,
            "nodes": list(self.nodes),
            "node_count": self.node_count,
            "stack": list(self.stack),
            "index": self.index,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StackGroup:
        get = data.get
        return cls(
            index=as_int(get("index")),
            kind=GroupKind.read(get("kind")),
            frame=as_str(get("frame")),
            rank_list=as_ints(get("rank_list")),
            signature=as_str(get("signature")),
            location=as_str(get("location")),
            nodes=as_strs(get("nodes")),
            node_count=as_int(get("node_count")),
            stack=as_strs(get("stack")),
        )


# ------------------------------------------------------------------ what differs


@dataclass(frozen=True)
class DiffValue:
    """One value of a variable (or of NCCL's choice) and who has it."""

    value: str
    ranks: str  # compact
    nodes: tuple[str, ...] = ()  # the first few
    node_count: int = 0
    rank_count: int | None = None  # environment differences count their ranks

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "ranks": self.ranks}
        if self.rank_count is not None:
            out["rank_count"] = self.rank_count
        out.update(nodes=list(self.nodes), node_count=self.node_count)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiffValue:
        get = data.get
        return cls(
            value=as_str(get("value")),
            ranks=as_str(get("ranks")),
            nodes=as_strs(get("nodes")),
            node_count=as_int(get("node_count")),
            rank_count=as_opt_int(get("rank_count")),
        )


@dataclass(frozen=True)
class EnvDiff:
    """An NCCL_/TORCH_/CUDA_/GLOO_ variable whose value is not the same on every rank."""

    name: str
    values: tuple[DiffValue, ...]
    expected_per_rank: bool = False  # differs per rank by design (CUDA_VISIBLE_DEVICES, ...)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "values": [v.to_json() for v in self.values],
            "expected_per_rank": self.expected_per_rank,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnvDiff:
        return cls(
            name=as_str(data.get("name")),
            values=records(DiffValue, data.get("values")),
            expected_per_rank=data.get("expected_per_rank") is True,
        )


@dataclass(frozen=True)
class NcclConfigDiff:
    """A choice NCCL reports (version, net plugin, transport, interfaces) that differs."""

    name: str
    values: tuple[DiffValue, ...]
    minority_nodes: tuple[str, ...] = ()
    minority_ranks: tuple[int, ...] = ()
    lines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "values": [v.to_json() for v in self.values],
            "minority_nodes": list(self.minority_nodes),
            "minority_ranks": list(self.minority_ranks),
            "lines": list(self.lines),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NcclConfigDiff:
        get = data.get
        return cls(
            name=as_str(get("name")),
            values=records(DiffValue, get("values")),
            minority_nodes=as_strs(get("minority_nodes")),
            minority_ranks=as_ints(get("minority_ranks")),
            lines=as_strs(get("lines")),
        )


@dataclass(frozen=True)
class ShellInitLine:
    """An NCCL_ setting found in a shell start-up file on a node."""

    node: str
    path: str
    line_number: int
    name: str
    value: str
    line: str

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "path": self.path,
            "line_number": self.line_number,
            "name": self.name,
            "value": self.value,
            "line": self.line,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShellInitLine:
        get = data.get
        return cls(
            node=as_str(get("node")),
            path=as_str(get("path")),
            line_number=as_int(get("line_number")),
            name=as_str(get("name")),
            value=as_str(get("value")),
            line=as_str(get("line")),
        )


@dataclass(frozen=True)
class ParseProblem:
    """A piece of evidence that could not be read, and why."""

    node: str
    source: str
    problem: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "source": self.source, "problem": self.problem}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ParseProblem:
        get = data.get
        return cls(as_str(get("node")), as_str(get("source")), as_str(get("problem")))


# ------------------------------------------------------------------ collectives


@dataclass(frozen=True)
class StuckCollective:
    """The collective most watchdog lines report stuck."""

    seq: int | None
    op: str | None
    reports: int

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "op": self.op, "reports": self.reports}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StuckCollective:
        get = data.get
        return cls(as_opt_int(get("seq")), as_opt_str(get("op")), as_int(get("reports")))


@dataclass(frozen=True)
class WatchdogSummary:
    """What the NCCL watchdog lines say: the stuck collective and who lags behind."""

    stuck_collective: StuckCollective | None = None
    last_completed: tuple[tuple[int, int], ...] = ()  # (rank, last completed work), by rank
    lagging_ranks: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        stuck = self.stuck_collective
        return {
            "stuck_collective": stuck.to_json() if stuck else None,
            "last_completed": {str(rank): seq for rank, seq in self.last_completed},
            "lagging_ranks": list(self.lagging_ranks),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatchdogSummary:
        get = data.get
        stuck = get("stuck_collective")
        completed = []
        for rank, seq in _mapping(get("last_completed")).items():
            if str(rank).isdigit() and isinstance(seq, int):
                completed.append((int(rank), seq))
        return cls(
            stuck_collective=StuckCollective.from_json(stuck)
            if isinstance(stuck, Mapping)
            else None,
            last_completed=tuple(sorted(completed)),
            lagging_ranks=as_ints(get("lagging_ranks")),
        )
