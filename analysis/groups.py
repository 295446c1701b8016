"""Where each rank stands in each process group's sequence of collectives.

Every source feeds one per-rank record of (process group, sequence number, op, sizes, dtype):
watchdog timeouts, DETAIL mismatch reports, the desync report (from the logs) and the flight
recorder's dumps. Reasoning is per group: ranks that run a different op or size at the same
sequence number of one group disagree (type B); a rank whose sequence number lags its group's
is where that group stops. A rank that never reached a group's collective because it waits in
another group's collective is a victim of that other group, not a culprit.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from analysis.parsers.flight_recorder import FrDump


def op_key(op: str | None) -> str:
    """ "nccl:all_reduce", "ALLREDUCE", "allreduce" -> "allreduce": one name per collective."""
    if not op:
        return ""
    name = op.rsplit(":", 1)[-1].lower().replace("_", "")
    return name.removesuffix("base").removesuffix("coalesced") or name


@dataclass(frozen=True)
class CollectiveRecord:
    rank: int
    node: str
    source: str  # "watchdog" | "detail" | "desync"
    pg: str  # "" when the line names no process group
    seq: int | None
    op: str
    numel_in: int | None
    numel_out: int | None
    dtype: str | None
    shapes: str | None
    line: str

    def signature(self) -> tuple:
        """What ranks at the same sequence number must agree on; unknown parts compare equal."""
        return (op_key(self.op), self.numel_in, self.numel_out, self.dtype, self.shapes)


def collective_records(snap) -> dict[int, tuple[CollectiveRecord, ...]]:
    per_rank: dict[int, list[CollectiveRecord]] = defaultdict(list)
    for node, rank, fact in snap.collectives:
        if rank is None:
            continue
        per_rank[rank].append(
            CollectiveRecord(
                rank=rank,
                node=node,
                source=fact.source,
                pg=_pg_id(fact.pg),
                seq=fact.seq,
                op=fact.op or "",
                numel_in=fact.numel_in,
                numel_out=fact.numel_out,
                dtype=fact.dtype,
                shapes=fact.shapes,
                line=fact.line,
            )
        )
    return {rank: tuple(records) for rank, records in per_rank.items()}


def _pg_id(pg: str | None) -> str:
    # "0(default_pg)", "0", "default_pg" all name the world group.
    if not pg:
        return ""
    head = pg.split("(", 1)[0].strip()
    return "0" if head in ("", "default_pg") else head


@dataclass(frozen=True)
class Disagreement:
    """Ranks of one group that ran different collectives at one sequence number."""

    pg: str
    seq: int
    majority: tuple[int, ...]
    minority: tuple[int, ...]
    majority_op: str
    minority_op: str
    lines: tuple[str, ...]


def disagreements(
    records: dict[int, tuple[CollectiveRecord, ...]],
    sources: frozenset[str] = frozenset({"watchdog", "detail"}),
    departed: frozenset[int] = frozenset(),
) -> list[Disagreement]:
    """Every (group, sequence number) at which the ranks' logs report different collectives."""
    at: dict[tuple[str, int], dict[int, CollectiveRecord]] = defaultdict(dict)
    for rank, mine in records.items():
        for record in mine:
            if record.seq is not None and record.op and record.source in sources:
                at[(record.pg, record.seq)].setdefault(rank, record)
    found = []
    for (pg, seq), by_rank in sorted(at.items()):
        groups: dict[tuple, list[int]] = defaultdict(list)
        for rank, record in by_rank.items():
            groups[_comparable(record, by_rank.values())].append(rank)
        if len(groups) < 2:
            continue
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        majority, minority = ordered[0][1], [r for _, ranks in ordered[1:] for r in ranks]
        if len(ordered[0][1]) == len(ordered[1][1]):
            majority, minority = _break_tie(ordered, records, seq, departed)
        odd = minority or [r for _, ranks in ordered[1:] for r in ranks]
        found.append(
            Disagreement(
                pg=pg,
                seq=seq,
                majority=tuple(sorted(majority)),
                minority=tuple(sorted(minority)),
                majority_op=by_rank[min(majority)].op,
                minority_op=by_rank[min(odd)].op,
                lines=tuple(by_rank[r].line for r in sorted(odd)[:3]),
            )
        )
    return found


def _comparable(record: CollectiveRecord, others) -> tuple:
    # Compare only what every report at this point carries: one line printing sizes and
    # another not is no disagreement.
    mine = record.signature()
    keep = [all(o.signature()[i] is not None for o in others) for i in range(len(mine))]
    return tuple(v if k else None for v, k in zip(mine, keep, strict=True))


def _break_tie(ordered, records, seq, departed) -> tuple[list[int], list[int]]:
    """Equal halves: the side that runs what the rest of the world runs at this sequence
    number wins; else the side a rank of which left the job is the odd one; else nobody can
    be named (two ranks that disagree say "look here", not "it is that one")."""
    world = Counter(
        op_key(r.op) for mine in records.values() for r in mine if r.seq == seq and r.op
    )
    score = {key: (world.get(key[0], 0), not set(ranks) & departed) for key, ranks in ordered}
    best = max(ordered, key=lambda kv: score[kv[0]])
    rivals = [kv for kv in ordered if kv is not best and score[kv[0]] == score[best[0]]]
    everyone = [r for _, ranks in ordered for r in ranks]
    if rivals:
        return everyone, []
    return best[1], [r for r in everyone if r not in best[1]]


def lagging_in_group(records: dict[int, tuple[CollectiveRecord, ...]]) -> dict[int, str]:
    """Ranks whose reported position is behind their group's: rank -> the line that says so."""
    position: dict[str, dict[int, CollectiveRecord]] = defaultdict(dict)
    for rank, mine in records.items():
        for record in mine:
            if record.seq is None or record.source == "desync":
                continue
            held = position[record.pg].get(rank)
            if held is None or record.seq > held.seq:  # type: ignore[operator]
                position[record.pg][rank] = record
    behind: dict[int, str] = {}
    for by_rank in position.values():
        if len(by_rank) < 2:
            continue
        top = max(r.seq for r in by_rank.values())  # type: ignore[type-var]
        for rank, record in by_rank.items():
            if record.seq < top:  # type: ignore[operator]
                behind.setdefault(rank, record.line)
    return behind


@dataclass(frozen=True)
class GroupStop:
    """The first collective of one process group that its members did not all run alike."""

    pg: str
    seq: int
    kind: str  # "missing_ranks" | "different_collective"
    absent: tuple[int, ...]  # members with no entry for it
    waiting_elsewhere: tuple[int, ...]  # of those, ranks blocked in another group's collective
    mismatch: dict

    @property
    def culprits(self) -> tuple[int, ...]:
        return tuple(r for r in self.absent if r not in self.waiting_elsewhere)


def group_stops(per_rank: dict[int, FrDump], mismatches: list[dict]) -> list[GroupStop]:
    """Each group's first unmatched collective (`alignment.group_mismatches`), with the
    absent members that wait in another group's collective told apart."""
    if not per_rank:
        return []
    waiting = _waiting_in(per_rank)
    stops = []
    for found in mismatches:
        mismatch = _with_tie_broken(found, per_rank)
        absent = tuple(mismatch["missing_rank_list"])
        elsewhere = tuple(r for r in absent if waiting.get(r, mismatch["pg"]) != mismatch["pg"])
        stops.append(
            GroupStop(
                pg=mismatch["pg"],
                seq=mismatch["seq"],
                kind=mismatch["kind"],
                absent=absent,
                waiting_elsewhere=elsewhere,
                mismatch=mismatch,
            )
        )
    return stops


def _with_tie_broken(mismatch: dict, per_rank: dict[int, FrDump]) -> dict:
    """Two halves of a group that disagree (a 2-rank tensor-parallel group): the side that
    runs what the other groups run at this sequence number is the majority."""
    collectives = mismatch["collectives"]
    if len(collectives) < 2 or len(collectives[0]["rank_list"]) != len(collectives[1]["rank_list"]):
        return mismatch
    elsewhere = Counter(
        entry.signature
        for dump in per_rank.values()
        for entry in dump.entries
        if entry.seq == mismatch["seq"] and entry.pg != mismatch["pg"] and not entry.is_p2p
    )
    ordered = sorted(collectives, key=lambda c: (-len(c["rank_list"]), -elsewhere[c["signature"]]))
    return {**mismatch, "collectives": ordered}


def _waiting_in(per_rank: dict[int, FrDump]) -> dict[int, str]:
    """rank -> the group of the collective it entered and never completed, if any."""
    waiting = {}
    for rank, dump in per_rank.items():
        pending = [e for e in dump.entries if not e.completed and not e.is_p2p]
        if pending:
            waiting[rank] = min(pending, key=lambda e: e.time_created_ns or 0).pg
    return waiting
