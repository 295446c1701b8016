"""Which stop is the cause: ties between equal sides, waits that go round in a circle, and the
order in which the stops are told.
"""

from __future__ import annotations

from collections import Counter

from analysis.fr_model import LINES_PER_STOP, MISMATCH_KINDS, TIER, GroupStop, replace_stop
from analysis.parsers.flight_recorder import FrEntry
from analysis.verdict import ranks_text

# group key -> rank -> that rank's entries of the group, in record order
Entries = dict[str, dict[int, list[FrEntry]]]


def break_ties(stops: list[GroupStop], groups, entries: Entries) -> list[GroupStop]:
    """Equal sides of a disagreement: the side that runs what its sibling groups (same
    description: the other tensor-parallel groups) run at this sequence number is right."""
    out = []
    for stop in stops:
        if stop.kind not in MISMATCH_KINDS or stop.culprits or len(stop.sides) < 2:
            out.append(stop)
            continue
        seen = Counter(
            e.signature
            for key, group in groups.items()
            if key != stop.group.key and group.desc == stop.group.desc
            for mine in entries[key].values()
            for e in mine
            if e.seq == stop.seq and not e.is_p2p
        )
        score = [seen[side.signature] for side in stop.sides]
        best = max(score)
        if best == 0 or score.count(best) > 1:
            out.append(stop)
            continue
        right = stop.sides[score.index(best)]
        culprits = tuple(sorted(r for s in stop.sides if s is not right for r in s.ranks))
        sides = (right, *(s for s in stop.sides if s is not right))
        note = f"; its sibling groups run {right.op} here"
        victims = tuple(r for r in stop.victims if r not in culprits)
        out.append(
            replace_stop(
                stop, culprits=culprits, victims=victims, sides=sides, detail=stop.detail + note
            )
        )
    return out


def order_cycles(stops: list[GroupStop]) -> list[GroupStop]:
    """Stops that blame no one because every absent member waits elsewhere: when following
    those waits (to the stop each of them waits in) comes back to a stop already seen, the
    ranks issued the groups' collectives in different orders."""
    absent_kinds = ("missing_ranks", "unmatched_p2p")
    waits_in = {
        rank: stop
        for stop in stops
        if stop.kind in absent_kinds
        for rank in stop.victims
        if rank not in stop.waiting_elsewhere
    }
    seen: list[GroupStop] = []
    out = list(stops)
    for start in stops:
        if start.kind not in absent_kinds or start in seen:
            continue
        cycle = _cycle(start, waits_in)
        if len(cycle) < 2 or any(stop in seen for stop in cycle):
            continue
        seen += cycle
        out = [s for s in out if s not in cycle]
        out.append(_order_stop(cycle))
    return out


def _cycle(start: GroupStop, waits_in: dict[int, GroupStop]) -> list[GroupStop]:
    path: list[GroupStop] = []
    stop: GroupStop | None = start
    while stop is not None and stop not in path:
        if stop.culprits or not stop.waiting_elsewhere:
            return []
        path.append(stop)
        stop = waits_in.get(stop.waiting_elsewhere[0])
    return path[path.index(stop) :] if stop is not None else []


def _order_stop(cycle: list[GroupStop]) -> GroupStop:
    """The meeting most ranks wait in is the order the job meant; the ranks waiting in the
    other one issued theirs first."""
    biggest = max(cycle, key=lambda s: (len(s.victims) - len(s.waiting_elsewhere), s.group.key))
    sizes = [len(s.victims) - len(s.waiting_elsewhere) for s in cycle]
    tie = sizes.count(max(sizes)) > 1
    culprits = () if tie else tuple(sorted(biggest.waiting_elsewhere))
    here = [sorted(set(s.victims) - set(s.waiting_elsewhere)) for s in cycle]
    parts = "; ".join(
        f"{ranks_text(ranks)} {'waits' if len(ranks) == 1 else 'wait'} in group "
        f"{s.group.key} #{s.seq} ({s.op})"
        for s, ranks in zip(cycle, here, strict=True)
    )
    lines = tuple(line for s in cycle for line in s.lines)[:LINES_PER_STOP]
    return replace_stop(
        biggest,
        kind="different_order",
        culprits=culprits,
        victims=tuple(sorted({r for s in cycle for r in s.victims} - set(culprits))),
        detail=f"the ranks issued these groups' collectives in different orders: {parts}",
        lines=lines,
    )


def cause_first(stop: GroupStop) -> tuple:
    created = stop.created_ns if stop.created_ns is not None else 1 << 63
    return (TIER.get(stop.kind, 1), not stop.culprits, not stop.pending, created, stop.group.key)
