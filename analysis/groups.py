"""Where each rank stands in each process group's sequence of collectives, as its logs say.

Every log source feeds one per-rank record of (process group, sequence number, op, sizes,
dtype): watchdog timeouts, DETAIL mismatch reports, the desync report (the flight recorder's
dumps are read together by `analysis.alignment`). Reasoning is per group: ranks that run a
different op or size at the same sequence number of one group disagree (type B); a rank whose
sequence number lags its group's is where that group stops.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import NamedTuple


def op_key(op: str | None) -> str:
    """ "nccl:all_reduce", "ALLREDUCE", "allreduce" -> "allreduce": one name per collective."""
    if not op:
        return ""
    name = op.rsplit(":", 1)[-1].lower().replace("_", "")
    return name.removesuffix("base").removesuffix("coalesced") or name


class CollectiveRecord(NamedTuple):
    """One rank's position in one group's sequence, as one of its lines says (a tuple: one is
    made for every rank's watchdog line of a hung job, and a frozen class costs 4x more)."""

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
    groups: dict[str | None, str] = {}  # as printed -> its id: a job prints a few
    for node, rank, fact in snap.collectives:
        if rank is None:
            continue
        pg = groups.get(fact.pg)
        if pg is None:
            pg = groups[fact.pg] = _pg_id(fact.pg)
        per_rank[rank].append(
            CollectiveRecord(
                rank,
                node,
                fact.source,
                pg,
                fact.seq,
                fact.op or "",
                fact.numel_in,
                fact.numel_out,
                fact.dtype,
                fact.shapes,
                fact.line,
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
