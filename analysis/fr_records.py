"""The flight recorder's part of the stored diagnosis, typed: what `FlightRecorderReading.to_json`
writes (analysis/fr_model.py) and every reader reads back (`from_json`, lenient: a diagnosis
stored before a field existed reads it as its default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis.records import as_int, as_ints, as_opt_int, as_str, as_strs, records
from analysis.stacks import compact_ranks

# The kinds of a stop (analysis/alignment.py).
FR_STOP_KINDS = (
    "missing_ranks",  # members that never issued it, or left no dump
    "unmatched_p2p",  # a send or recv whose peer never posted the other half
    "different_collective",  # another op (or a coalesced group of another length)
    "different_sizes",  # sizes the op's law does not allow between ranks
    "different_dtypes",
    "invalid_sizes",  # every rank alike, against the op's own law (an all_reduce 16 into 20)
    "invalid_dtypes",
    "different_order",  # ranks waiting for each other in two groups' collectives
    "not_completed",  # some members completed it, others not
    "not_started",  # some members' device started it, others not
    "all_waiting",  # every member issued it alike, none completed it
)


@dataclass(frozen=True)
class FrCollective:
    """The ranks that ran one collective (by signature) at a stop."""

    signature: str
    op: str
    rank_list: tuple[int, ...]
    frame: str = ""
    state: str = ""  # scheduled | started | completed, as torch recorded it

    @property
    def ranks(self) -> str:
        return compact_ranks(self.rank_list)

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "op": self.op,
            "ranks": self.ranks,
            "rank_list": list(self.rank_list),
            "frame": self.frame,
            "state": self.state,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrCollective:
        get = data.get
        return cls(
            signature=as_str(get("signature")),
            op=as_str(get("op")),
            rank_list=as_ints(get("rank_list")),
            frame=as_str(get("frame")),
            state=as_str(get("state")),
        )


@dataclass(frozen=True)
class FrMismatch:
    """A process group's first collective (or send/recv) its members did not meet in."""

    pg: str
    seq: int
    kind: str  # one of FR_STOP_KINDS
    missing_rank_list: tuple[int, ...] = ()  # never issued it, or left no dump
    collectives: tuple[FrCollective, ...] = ()  # most ranks first
    group: str = ""  # the group's key: its name, or name[members] for split groups
    desc: str = ""
    members: str = ""  # compact
    op: str = ""
    op_index: int = 0  # the op of a coalesced group that differs
    without_dump: tuple[int, ...] = ()
    culprits: tuple[int, ...] = ()
    victims: tuple[int, ...] = ()
    waiting_elsewhere: tuple[int, ...] = ()  # absent members blocked in another group's op
    detail: str = ""
    lines: tuple[str, ...] = ()

    @property
    def missing_ranks(self) -> str:
        return compact_ranks(self.missing_rank_list)

    @property
    def culprit_ranks(self) -> str:
        return compact_ranks(self.culprits)

    @property
    def victim_ranks(self) -> str:
        return compact_ranks(self.victims)

    def to_json(self) -> dict[str, Any]:
        return {
            "pg": self.pg,
            "group": self.group,
            "desc": self.desc,
            "members": self.members,
            "seq": self.seq,
            "kind": self.kind,
            "op": self.op,
            "op_index": self.op_index,
            "missing_ranks": self.missing_ranks,
            "missing_rank_list": list(self.missing_rank_list),
            "without_dump": list(self.without_dump),
            "culprits": list(self.culprits),
            "victims": list(self.victims),
            "waiting_elsewhere": list(self.waiting_elsewhere),
            "detail": self.detail,
            "collectives": [c.to_json() for c in self.collectives],
            "lines": list(self.lines),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrMismatch:
        get = data.get
        return cls(
            pg=str(get("pg", "")),
            seq=as_int(get("seq")),
            kind=as_str(get("kind")),
            missing_rank_list=as_ints(get("missing_rank_list")),
            collectives=records(FrCollective, get("collectives")),
            group=as_str(get("group")) or str(get("pg", "")),
            desc=as_str(get("desc")),
            members=as_str(get("members")),
            op=as_str(get("op")),
            op_index=as_int(get("op_index")),
            without_dump=as_ints(get("without_dump")),
            culprits=as_ints(get("culprits")),
            victims=as_ints(get("victims")),
            waiting_elsewhere=as_ints(get("waiting_elsewhere")),
            detail=as_str(get("detail")),
            lines=as_strs(get("lines")),
        )


@dataclass(frozen=True)
class FrGroupRecord:
    """One process group as the dumps show it."""

    group: str
    pg: str
    desc: str = ""
    members: str = ""  # compact
    members_from: str = ""  # pg_config | world | entries | siblings

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "pg": self.pg,
            "desc": self.desc,
            "members": self.members,
            "members_from": self.members_from,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrGroupRecord:
        get = data.get
        return cls(
            group=as_str(get("group")),
            pg=as_str(get("pg")),
            desc=as_str(get("desc")),
            members=as_str(get("members")),
            members_from=as_str(get("members_from")),
        )


@dataclass(frozen=True)
class SeqRanks:
    """The ranks whose last completed sequence id is `seq` (None: none completed)."""

    seq: int | None
    ranks: str  # compact

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "ranks": self.ranks}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SeqRanks:
        return cls(as_opt_int(data.get("seq")), as_str(data.get("ranks")))


@dataclass(frozen=True)
class FlightRecorderSummary:
    """What the ranks' flight-recorder dumps say together."""

    ranks_with_dumps: str  # compact
    dump_count: int
    first_mismatch: FrMismatch | None = None  # the first stop that is not all_waiting
    last_completed_seq: tuple[SeqRanks, ...] = ()
    world_size: int | None = None
    ranks_without_dump: str = ""  # compact
    stops: tuple[FrMismatch, ...] = ()  # every group's stop, cause first (the first few)
    groups: tuple[FrGroupRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {
            "ranks_with_dumps": self.ranks_with_dumps,
            "dump_count": self.dump_count,
            "world_size": self.world_size,
            "ranks_without_dump": self.ranks_without_dump,
            "first_mismatch": first.to_json() if first else None,
            "stops": [s.to_json() for s in self.stops],
            "groups": [g.to_json() for g in self.groups],
            "last_completed_seq": [s.to_json() for s in self.last_completed_seq],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlightRecorderSummary:
        get = data.get
        first = get("first_mismatch")
        return cls(
            ranks_with_dumps=as_str(get("ranks_with_dumps")),
            dump_count=as_int(get("dump_count")),
            first_mismatch=FrMismatch.from_json(first) if isinstance(first, Mapping) else None,
            last_completed_seq=records(SeqRanks, get("last_completed_seq")),
            world_size=as_opt_int(get("world_size")),
            ranks_without_dump=as_str(get("ranks_without_dump")),
            stops=records(FrMismatch, get("stops")),
            groups=records(FrGroupRecord, get("groups")),
        )
