"""The flight recorder read together, as types: groups, the stops where their members did not
meet, and the whole reading (`analysis.alignment` builds it). Each stop carries its culprits and
victims and the lines that say so; `to_json()` is the form the diagnosis keeps.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import compress, count
from operator import attrgetter, itemgetter, not_
from typing import Any, NamedTuple

from analysis import agreement
from analysis.parsers.flight_recorder import FrDump, FrEntry
from analysis.stacks import compact_ranks
from analysis.verdict import ranks_text

_COMPLETED = attrgetter("completed")
# What an entry's signature is made of: entries alike in these have one signature.
_SIGNED = attrgetter("op", "input_sizes", "output_sizes", "in_dtypes", "out_dtypes")

# How many stops and groups the diagnosis JSON carries (a 4,096-rank job has thousands of
# groups; the first stops are the story).
JSON_STOPS = 8
JSON_GROUPS = 64
LINES_PER_STOP = 8

# Strong stops (a law broken, someone absent) first, then state differences, then everyone
# waiting alike.
TIER = {
    "different_order": 0,
    "different_collective": 0,
    "different_sizes": 0,
    "different_dtypes": 0,
    "invalid_sizes": 0,
    "invalid_dtypes": 0,
    "missing_ranks": 0,
    "unmatched_p2p": 0,
    "not_completed": 1,
    "not_started": 1,
    "all_waiting": 2,
}
MISMATCH_KINDS = frozenset(
    {
        "different_collective",
        "different_sizes",
        "different_dtypes",
        "invalid_sizes",
        "invalid_dtypes",
    }
)


@dataclass(frozen=True)
class FrGroup:
    key: str  # the name, or name[members] when groups of different members share one
    name: str
    desc: str
    members: tuple[int, ...]
    # "pg_config" | "world" | "entries" (the ranks that recorded its ops) | "siblings" (those,
    # plus ranks without a dump that belong to no other group of its description)
    members_from: str

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.key,
            "pg": self.name,
            "desc": self.desc,
            "members": compact_ranks(self.members),
            "members_from": self.members_from,
        }


@dataclass(frozen=True)
class FrSide:
    """Ranks that ran one thing at a stop."""

    ranks: tuple[int, ...]
    op: str
    signature: str
    state: str
    # The entry of the first of them: where the job called it is read only when shown.
    entry: FrEntry | None = field(default=None, compare=False, repr=False)

    @property
    def frame(self) -> str:
        return self.entry.frame if self.entry is not None else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "op": self.op,
            "ranks": compact_ranks(self.ranks),
            "rank_list": list(self.ranks),
            "frame": self.frame,
            "state": self.state,
        }


@dataclass(frozen=True)
class GroupStop:
    """One group's first collective (or point-to-point op) its members did not meet in."""

    pg: str  # the group's name, as torch spells it
    seq: int
    kind: str
    group: FrGroup
    op: str
    sides: tuple[FrSide, ...]  # largest side first
    absent: tuple[int, ...]  # members whose dump shows they never issued it
    without_dump: tuple[int, ...]  # members that left no dump
    culprits: tuple[int, ...]
    victims: tuple[int, ...]
    waiting_elsewhere: tuple[int, ...]  # absent members blocked in another group's op
    detail: str
    notes: tuple[str, ...] = ()  # lines about the absent, the dumpless, the peers
    op_index: int = 0  # the op of a coalesced group that differs
    pending: bool = True  # some rank has not completed it
    created_ns: int | None = None  # when the first of its entries was created

    @cached_property
    def lines(self) -> tuple[str, ...]:
        """The lines behind the stop: what each side ran (and where), then the notes."""
        sides = [f"{ranks_text(s.ranks)}: {_describe(s)}" for s in self.sides[:3]]
        return tuple([*sides, *self.notes][:LINES_PER_STOP])

    @cached_property
    def mismatch(self) -> dict[str, Any]:
        """The stop as the diagnosis JSON keeps it."""
        missing = sorted({*self.absent, *self.without_dump})
        return {
            "pg": self.pg,
            "group": self.group.key,
            "desc": self.group.desc,
            "members": compact_ranks(self.group.members),
            "seq": self.seq,
            "kind": self.kind,
            "op": self.op,
            "op_index": self.op_index,
            "missing_ranks": compact_ranks(missing),
            "missing_rank_list": missing,
            "without_dump": list(self.without_dump),
            "culprits": list(self.culprits),
            "victims": list(self.victims),
            "waiting_elsewhere": list(self.waiting_elsewhere),
            "detail": self.detail,
            "collectives": [side.to_json() for side in self.sides],
            "lines": list(self.lines),
        }


@dataclass(frozen=True)
class FlightRecorderReading:
    """Every rank's dump read together."""

    dump_ranks: tuple[int, ...]
    world: int | None
    without_dump: tuple[int, ...]  # ranks of the world (or of a group) that left no dump
    groups: tuple[FrGroup, ...]
    stops: tuple[GroupStop, ...]  # cause first
    last_completed: dict[int, int | None] = field(default_factory=dict)

    @property
    def first(self) -> GroupStop | None:
        """The first stop that is not everyone waiting alike."""
        return next((s for s in self.stops if s.kind != "all_waiting"), None)

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {
            "ranks_with_dumps": compact_ranks(self.dump_ranks),
            "dump_count": len(self.dump_ranks),
            "world_size": self.world,
            "ranks_without_dump": compact_ranks(self.without_dump),
            "first_mismatch": first.mismatch if first else None,
            "stops": [s.mismatch for s in self.stops[:JSON_STOPS]],
            "groups": [g.to_json() for g in self.groups[:JSON_GROUPS]],
            "last_completed_seq": group_values(self.last_completed),
        }


class Wait(NamedTuple):
    """Where a rank is blocked: the first op it issued and never completed (a tuple: one is
    made for every rank of a hung job)."""

    group: str
    entry: FrEntry


def make_stop(
    group: FrGroup,
    seq: int,
    kind: str,
    present: dict[int, list[FrEntry]],
    culprits: tuple[int, ...],
    detail: str,
    *,
    dumps: dict[int, FrDump],
    absent: tuple[int, ...] = (),
    without: tuple[int, ...] = (),
    elsewhere: tuple[int, ...] = (),
    sides: tuple[FrSide, ...] = (),
    op_index: int = 0,
    more_lines: list[str] | None = None,
    pending: bool = True,
) -> GroupStop:
    """A stop of `group` at `seq`: `present` is what each rank that issued it ran (the ops of
    a coalesced group); its victims are the ranks that wait in it, and those blocked
    elsewhere that it keeps from coming. `dumps`: each rank's dump, which keeps the entries'
    times."""
    sides = sides or _sides_by_signature(present, op_index)
    # In C, not a loop a rank: a stop of a whole-world group reads every rank's entry.
    done = map(all, map(partial(map, _COMPLETED), present.values()))
    waiting_here = set(compress(present, map(not_, done)))
    created = first_created(present, dumps)
    op = sides[0].op if sides else "?"
    return GroupStop(
        pg=group.name,
        seq=seq,
        kind=kind,
        group=group,
        op=op,
        sides=sides,
        absent=tuple(absent),
        without_dump=tuple(without),
        culprits=tuple(culprits),
        victims=tuple(sorted({*waiting_here, *elsewhere} - set(culprits))),
        waiting_elsewhere=tuple(elsewhere),
        detail=f"group {group.key} #{seq} ({op}): {detail}",
        notes=tuple(more_lines or ()),
        op_index=op_index,
        pending=pending,
        created_ns=created,
    )


def first_created(present: dict[int, list[FrEntry]], dumps: dict[int, FrDump]) -> int | None:
    """When the first of the present ranks' entries was created. An entry may be one object
    for a node's ranks, so its time is read from the rank's dump at the entry's place (ranks
    alike share their dumps' entry list, and so one map of places)."""
    found = []
    places: dict[int, dict[int, int]] = {}  # id(entry list) -> id(entry) -> its index
    for rank, ops in present.items():
        dump = dumps.get(rank)
        if dump is None or len(dump.created_ns) != len(dump.entries):
            continue  # no times kept (a dump edited out of step): none known
        entries, times = dump.entries, dump.created_ns
        place = places.get(id(entries))
        if place is None:
            place = places[id(entries)] = dict(zip(map(id, entries), count()))
        for op in ops:
            at = place.get(id(op))
            if at is not None and times[at]:
                found.append(times[at])
    return min(found) if found else None


def _sides_by_signature(present: dict[int, list[FrEntry]], index: int) -> tuple[FrSide, ...]:
    if present and index == 0 and agreement.alike(list(map(itemgetter(0), present.values()))):
        return (side_of(tuple(sorted(present)), present, 0),)  # every rank ran the same
    # Ranks grouped by what their signature is made of, each signature then made once per
    # group (equal signatures of different parts, as "in=[1]" cut short, still join).
    by_parts: dict[tuple, list[int]] = defaultdict(list)
    for rank, ops in present.items():
        by_parts[_SIGNED(ops[min(index, len(ops) - 1)])].append(rank)
    by_signature: dict[str, list[int]] = defaultdict(list)
    for ranks in by_parts.values():
        ops = present[ranks[0]]
        by_signature[ops[min(index, len(ops) - 1)].signature] += ranks
    ordered = sorted(by_signature.values(), key=lambda ranks: (-len(ranks), min(ranks)))
    return tuple(side_of(tuple(sorted(ranks)), present, index) for ranks in ordered)


def side_of(ranks: tuple[int, ...], present, index: int) -> FrSide:
    ops = present[ranks[0]]
    entry = ops[min(index, len(ops) - 1)]
    return FrSide(ranks, entry.op, entry.signature, entry.state, entry)


def _describe(side: FrSide) -> str:
    where = f" at {side.frame}" if side.frame else ""
    return f"{side.signature} ({side.state or 'no state'}){where}"


def no_dump_line(without, group: FrGroup) -> str:
    return (
        f"{ranks_text(without)}: no flight-recorder dump, though a member of group "
        f"{group.key} ({ranks_text(group.members)})"
    )


def replace_stop(stop: GroupStop, **changes) -> GroupStop:
    fields = {name: getattr(stop, name) for name in GroupStop.__dataclass_fields__}
    return GroupStop(**{**fields, **changes})


def group_values(values: dict[int, int | None]) -> list[dict]:
    grouped: dict[int | None, list[int]] = defaultdict(list)
    for rank, value in values.items():
        grouped[value].append(rank)
    return [
        {"seq": value, "ranks": compact_ranks(ranks)}
        for value, ranks in sorted(grouped.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ]
