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
    ties = [s for s in stops if s.kind in MISMATCH_KINDS and not s.culprits and len(s.sides) > 1]
    if not ties:
        return stops
    counts = _sibling_signatures(ties, groups, entries)
    tied = {id(stop) for stop in ties}
    return [_broken(stop, counts) if id(stop) in tied else stop for stop in stops]


def _sibling_signatures(ties: list[GroupStop], groups, entries: Entries) -> Counter:
    """(desc, seq, signature) and (group, seq, signature) -> how many entries ran it: one pass
    over the entries of the groups that share a tied stop's description."""
    wanted = {(t.group.desc, t.seq) for t in ties}
    descs = {desc for desc, _ in wanted}
    counts: Counter = Counter()
    for key, group in groups.items():
        if group.desc not in descs:
            continue
        for mine in entries[key].values():
            for e in mine:
                if (group.desc, e.seq) in wanted and not e.is_p2p:
                    counts[(group.desc, e.seq, e.signature)] += 1
                    counts[(key, e.seq, e.signature)] += 1
    return counts


def _broken(stop: GroupStop, counts: Counter) -> GroupStop:
    desc, key, seq = stop.group.desc, stop.group.key, stop.seq
    score = [
        counts[(desc, seq, side.signature)] - counts[(key, seq, side.signature)]
        for side in stop.sides
    ]
    best = max(score)
    if best == 0 or score.count(best) > 1:
        return stop
    right = stop.sides[score.index(best)]
    culprits = tuple(sorted(r for s in stop.sides if s is not right for r in s.ranks))
    sides = (right, *(s for s in stop.sides if s is not right))
    note = f"; its sibling groups run {right.op} here"
    victims = tuple(r for r in stop.victims if r not in culprits)
    return replace_stop(
        stop, culprits=culprits, victims=victims, sides=sides, detail=stop.detail + note
    )


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
    seen: set[int] = set()  # ids of the stops already in a cycle
    replaced: dict[int, GroupStop | None] = {}
    for start in stops:
        if start.kind not in absent_kinds or id(start) in seen:
            continue
        cycle = _cycle(start, waits_in)
        if len(cycle) < 2 or any(id(stop) in seen for stop in cycle):
            continue
        seen.update(id(stop) for stop in cycle)
        replaced.update((id(stop), None) for stop in cycle)
        replaced[id(cycle[0])] = _order_stop(cycle)
    if not replaced:
        return stops
    out = [replaced.get(id(s), s) for s in stops]
    return [s for s in out if s is not None]


def _cycle(start: GroupStop, waits_in: dict[int, GroupStop]) -> list[GroupStop]:
    path: list[GroupStop] = []
    on_path: dict[int, int] = {}  # id(stop) -> its index in path
    stop: GroupStop | None = start
    while stop is not None and id(stop) not in on_path:
        if stop.culprits or not stop.waiting_elsewhere:
            return []
        on_path[id(stop)] = len(path)
        path.append(stop)
        stop = waits_in.get(stop.waiting_elsewhere[0])
    return path[on_path[id(stop)] :] if stop is not None else []


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
    notes = tuple(line for s in cycle if s is not biggest for line in s.lines)
    notes = (*biggest.notes, *notes)[:LINES_PER_STOP]
    return replace_stop(
        biggest,
        kind="different_order",
        culprits=culprits,
        victims=tuple(sorted({r for s in cycle for r in s.victims} - set(culprits))),
        detail=f"the ranks issued these groups' collectives in different orders: {parts}",
        notes=notes,
    )


def cause_first(stop: GroupStop) -> tuple:
    created = stop.created_ns if stop.created_ns is not None else 1 << 63
    return (TIER.get(stop.kind, 1), not stop.culprits, not stop.pending, created, stop.group.key)
