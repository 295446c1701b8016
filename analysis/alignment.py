"""Flight-recorder dumps read together, and the watchdog's lines: where each group stops, and who.

Collectives are aligned per process group by sequence number (each group counts its own; seq 6
of one group has nothing to do with seq 6 of another). A group's members come from the dumps'
`pg_config` (a name shared by groups of different members, as `split_group` makes, is told
apart by its members), or, where torch leaves them empty (gloo), from the world size for the
default group and from the ranks that recorded the group's entries otherwise. Each rank keeps
a ring buffer, so only sequence numbers every member still holds are compared.

At the first sequence number where a group's members do not meet, the stop says how:
members that never issued it (`missing_ranks`), or left no dump at all; ops, sizes or dtypes
that break the op's law (`analysis.agreement`); a coalesced group whose inner ops differ;
ranks that have not completed (or started) what the others did; or everyone waiting in it
alike (`all_waiting`: the meeting itself fails). Point-to-point ops are matched by peer: a rank
waiting in a recv waits for the sender, so the sender that never sent is the culprit.

A rank absent from one group's collective because it waits in another group's (or in a
send/recv) is that other stop's victim, not a culprit; ranks that wait for each other in two
groups' collectives issued them in different orders (`different_order`). Stops are ordered
cause first: a stop that names a rank waiting on nothing comes before the stops of the ranks
waiting for it, and ties go to the stop whose entries were created first, never to a group's
name.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import filterfalse
from operator import attrgetter, itemgetter

from analysis import agreement
from analysis.fr_causes import Entries, break_ties, cause_first, order_cycles
from analysis.fr_model import (
    FlightRecorderReading,
    FrGroup,
    GroupStop,
    Wait,
    make_stop,
    no_dump_line,
    side_of,
)
from analysis.fr_p2p import p2p_stops
from analysis.parsers.flight_recorder import FrDump, FrEntry
from analysis.parsers.logs import WatchdogFact
from analysis.snapshot_parse import MAX_WORLD
from analysis.stacks import compact_ranks
from analysis.verdict import ranks_text

# An entry's fields, read for every member at each sequence number compared: by C, not a
# generator a member.
_COMPLETED, _STARTED = attrgetter("completed"), attrgetter("started")
_SEQ, _PATH = attrgetter("seq"), attrgetter("path")
# Completed, and what `agreement.alike` compares: one tuple an entry, counted in C.
_MET = attrgetter("completed", *agreement.CONTENT_FIELDS)

__all__ = [
    "FlightRecorderReading",
    "GroupStop",
    "align_flight_recorder",
    "dumps_by_rank",
    "read_dumps",
    "read_watchdog",
]


def align_flight_recorder(dumps: list[FrDump], world: int | None = None) -> dict | None:
    """The dumps read together, as the diagnosis JSON keeps it; None without any dump."""
    reading = read_dumps(dumps, world)
    return reading.to_json() if reading.dump_ranks else None


def dumps_by_rank(dumps: list[FrDump]) -> dict[int, FrDump]:
    per_rank: dict[int, FrDump] = {}
    for dump in sorted(dumps, key=_PATH):
        if dump.rank is not None and dump.rank < MAX_WORLD and dump.rank not in per_rank:
            per_rank[dump.rank] = dump  # a rank may have a pickle and a JSON dump: use one
    return per_rank


def read_dumps(dumps: list[FrDump], world: int | None = None) -> FlightRecorderReading:
    per_rank = dumps_by_rank(dumps)
    configured = _configured_by_rank(per_rank)
    world = _world(per_rank, configured, world)
    groups, entries, waiting, last, kinds = _groups(per_rank, configured, world)
    stops: list[GroupStop] = []
    for key, group in groups.items():
        stop = _collective_stop(group, entries[key], per_rank, waiting, kinds)
        if stop is not None:
            stops.append(stop)
    with_p2p = kinds[0]  # a rank waiting in a send or recv recorded one
    for key in sorted(
        {waiting[r].group for r in with_p2p if r in waiting and waiting[r].entry.is_p2p}
    ):
        if key in groups:
            stops += p2p_stops(groups[key], per_rank, waiting)
    stops = break_ties(stops, groups, entries)
    stops = order_cycles(stops)
    stops.sort(key=cause_first)
    expected = set(range(world)) if world else {m for g in groups.values() for m in g.members}
    return FlightRecorderReading(
        dump_ranks=tuple(sorted(per_rank)),
        world=world,
        without_dump=tuple(sorted(expected - set(per_rank))),
        groups=tuple(sorted(groups.values(), key=lambda g: (len(g.members) == 0, g.key))),
        stops=tuple(stops),
        last_completed=last,
    )


# ------------------------------------------------------------------ groups


def _is_default(name: str, desc: str) -> bool:
    return name == "0" or desc == "default_pg"


def _world(per_rank: dict[int, FrDump], configured, world: int | None) -> int | None:
    """The expected world, else the default group's size (pg_config lists the whole world)."""
    if world:
        return min(world, MAX_WORLD)
    sizes = [
        len(members)
        for rank, dump in per_rank.items()
        for name, members in configured[rank].items()
        if _is_default(name, dump.pg_desc.get(name, ""))
    ]
    return min(max(sizes), MAX_WORLD) if sizes else None


def _groups(per_rank: dict[int, FrDump], configured, world: int | None):
    """The groups, each rank's entries of each (in record order), where each rank waits (its
    first pending entry), its last completed collective, and the ranks that recorded
    point-to-point ops and those whose dump is one run (see _sorted_entries), in one pass
    over the entries."""
    configs = _distinct_configs(configured)
    groups: dict[str, FrGroup] = {}
    entries: Entries = defaultdict(dict)
    waiting: dict[int, Wait] = {}
    last: dict[int, int | None] = {}
    with_p2p: set[int] = set()
    gapless: set[int] = set()
    # (name, description, the rank's configured groups) -> the group's key: ranks sharing a
    # pg_config share the dict (see _configured_by_rank), so a job's key is found once.
    known: dict[tuple[str, str, int], str] = {}
    # (the dump's entry list, its configured groups) -> what _sorted_entries says of it, and
    # its groups' keys: a node's ranks alike share one list (analysis.fr_shared).
    read: dict[tuple[int, int], tuple] = {}
    for rank, dump in per_rank.items():
        own = configured[rank]
        found = read.get((id(dump.entries), id(own)))
        if found is None:
            by_name, pending, done, p2p, run = _sorted_entries(dump)
            keys = {}
            for name, mine in by_name.items():
                first = mine[0]
                memo = (name, first.pg_desc, id(own))
                key = known.get(memo)
                if key is None:
                    key = known[memo] = _group_key(first, own, configs, world, groups)
                keys[name] = key
            wait = Wait(keys[pending.pg], pending) if pending is not None else None
            found = read[(id(dump.entries), id(own))] = (by_name, keys, wait, done, p2p, run)
        by_name, keys, wait, last[rank], p2p, run = found
        for name, mine in by_name.items():
            entries[keys[name]][rank] = mine
        if wait is not None:
            waiting[rank] = wait
        if p2p:
            with_p2p.add(rank)
        elif run:
            gapless.add(rank)
    for key, group in groups.items():
        if not group.members:
            members = tuple(sorted(entries[key]))
            groups[key] = FrGroup(key, group.name, group.desc, members, "entries")
    if world:
        _place_ranks_without_dumps(groups, set(range(world)) - set(per_rank))
    return groups, entries, waiting, last, (with_p2p, gapless)


def _distinct_configs(configured) -> dict[str, list[tuple[int, ...]]]:
    """name -> the distinct member lists the dumps give it. Every dump of a job repeats the
    same tuples (the parser shares them), so `is` settles almost every comparison."""
    configs: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    for own in {id(own): own for own in configured.values()}.values():
        for name, members in own.items():
            known = configs[name]
            if not any(m is members or m == members for m in known):
                known.append(members)
    return configs


def _sorted_entries(dump: FrDump):
    """One dump's entries by group name, its first pending entry, its last completed
    collective's sequence id, whether it recorded a point-to-point op, and whether it is one
    group's collectives numbered on without a gap (a run: every dump of a whole-world job)."""
    entries = dump.entries
    if not entries:
        return {}, None, None, False, False
    pg = entries[0].pg
    pending = done = None
    seq = entries[0].seq - 1
    for entry in entries:
        if entry.pg != pg or entry.is_p2p or entry.seq != seq + 1:
            return _sorted_entries_of_groups(entries)
        seq = entry.seq
        if not entry.completed:
            if pending is None:
                pending = entry
        else:
            done = seq
    return {pg: entries}, pending, done, False, True  # the dump's own list, never changed


def _sorted_entries_of_groups(entries: list[FrEntry]):
    by_name: dict[str, list[FrEntry]] = {}
    pending = done = None
    p2p = False
    for entry in entries:
        mine = by_name.get(entry.pg)
        if mine is None:
            mine = by_name[entry.pg] = []
        mine.append(entry)
        if entry.is_p2p:
            p2p = True
        if not entry.completed:
            if pending is None:
                pending = entry
        elif not entry.is_p2p and (done is None or entry.seq > done):
            done = entry.seq
    return by_name, pending, done, p2p, False


def _place_ranks_without_dumps(groups: dict[str, FrGroup], silent: set[int]) -> None:
    """Groups known only by their entries cannot show a member that left no dump. Groups of
    one description (the tensor-parallel groups, the data-parallel ones) partition the world
    into equal parts: when exactly one of them is short, the ranks without a dump that are in
    none of them are its missing members."""
    by_desc: dict[str, list[FrGroup]] = defaultdict(list)
    for group in groups.values():
        if group.desc not in ("", "undefined") and not _is_default(group.name, group.desc):
            by_desc[group.desc].append(group)
    for siblings in by_desc.values():
        if len(siblings) < 2 or any(g.members_from != "entries" for g in siblings):
            continue
        size = max(len(g.members) for g in siblings)
        short = [g for g in siblings if len(g.members) < size]
        placed = {m for g in siblings for m in g.members}
        left = sorted(silent - placed)
        if len(short) != 1 or not left or len(left) != size - len(short[0].members):
            continue
        group = short[0]
        members = tuple(sorted({*group.members, *left}))
        groups[group.key] = FrGroup(group.key, group.name, group.desc, members, "siblings")


def _configured_by_rank(per_rank: dict[int, FrDump]) -> dict[int, dict[str, tuple[int, ...]]]:
    """_configured of each rank, made once per distinct pg_config and shared (read only): the
    parser hands every dump of a job the same member tuples, so their ids tell configs apart
    (equal configs of different tuples are only made twice)."""
    made: dict[tuple, dict[str, tuple[int, ...]]] = {}
    configured = {}
    by_map: dict[int, dict[str, tuple[int, ...]]] = {}  # id(pg_ranks): a node's dumps share one
    for rank, dump in per_rank.items():
        pg_ranks = dump.pg_ranks
        own = by_map.get(id(pg_ranks))
        if own is None:
            key = (*pg_ranks, *map(id, pg_ranks.values()))  # names are text, ids numbers
            own = made.get(key)
            if own is None:
                own = made[key] = _configured(dump)
            by_map[id(pg_ranks)] = own
        configured[rank] = own
    return configured


def _configured(dump: FrDump) -> dict[str, tuple[int, ...]]:
    """This dump's groups with their members (old gloo dumps name the default group "")."""
    own = {
        name: members
        for name, members in dump.pg_ranks.items()
        if members and members[-1] < MAX_WORLD
    }
    if "" in own and "0" not in own:
        own["0"] = own.pop("")
    return own


def _group_key(entry: FrEntry, own, configs, world, groups: dict[str, FrGroup]) -> str:
    name = entry.pg
    members = own.get(name)
    if members is None and len(configs.get(name, ())) == 1:
        members = next(iter(configs[name]))
    source = "pg_config"
    if members is None and world and _is_default(name, entry.pg_desc):
        members, source = tuple(range(world)), "world"
    key = name if len(configs.get(name, ())) <= 1 else f"{name}[{compact_ranks(members or ())}]"
    if key not in groups:
        groups[key] = FrGroup(key, name, entry.pg_desc, members or (), source)
    return key


# ------------------------------------------------------------------ where each rank waits


def _elsewhere(rank: int, key: str, waiting: dict[int, Wait]) -> bool:
    """Blocked in another group's op, or in a send/recv: absent from a collective for that."""
    wait = waiting.get(rank)
    return wait is not None and (wait.group != key or wait.entry.is_p2p)


# ------------------------------------------------------------------ collectives


def _collective_stop(group: FrGroup, entries, per_rank, waiting, kinds) -> GroupStop | None:
    holders = list(filter(per_rank.__contains__, group.members))  # in C: the whole world
    runs, profiles, calls = _calls(holders, entries, *kinds)
    if not runs and not calls:
        return None
    without = tuple(filterfalse(per_rank.__contains__, group.members))
    if len(runs) + len(calls) == len(holders):  # every member with a dump recorded some
        comparable = recorded = holders
    else:
        # A member with a dump and none of this group's entries never issued one, unless its
        # ring buffer wrapped (then it may have forgotten them: not compared).
        comparable = [r for r in holders if r in runs or r in calls or not per_rank[r].wrapped]
        recorded = [r for r in comparable if r in runs or r in calls]
    if not recorded:
        return None
    firsts = [first for first, _count in profiles] + [min(by_seq) for by_seq in calls.values()]
    tops = [first + count - 1 for first, count in profiles] + [max(c) for c in calls.values()]
    start = max(firsts)
    numbers = {s for first, count in profiles for s in range(max(first, start), first + count)}
    numbers.update(s for by_seq in calls.values() for s in by_seq if s >= start)
    lowest_top = min(tops + [0] * (len(comparable) > len(recorded)))
    size = len(group.members) or None
    top: dict[int, int] | None = None
    for seq in sorted(numbers):
        absent: tuple[int, ...] = ()
        if seq > lowest_top:
            top = top or _tops(comparable, profiles, calls)
            absent = tuple(r for r in comparable if top[r] < seq)
        if not absent and _met(seq, profiles, calls, size):
            continue
        present = _present(seq, recorded, runs, calls)
        if not present:
            continue
        stop = _meeting(group, seq, present, absent, without, size, waiting, per_rank)
        if stop is not None:
            return stop
    return None


def _calls(holders, entries, with_p2p, gapless):
    """Each member's collectives of the group by sequence number. A member that recorded one
    entry a number, numbered on without a gap (every member, but for a coalesced group or a
    point-to-point op), is kept as a run: its first number and its entries, read by position;
    members of one (first, count) are gathered in `profiles` (their ranks, their entry lists,
    a list shared by ranks next to each other kept once). Any
    other member's are a dict of lists, in `calls`."""
    runs: dict[int, tuple[int, list[FrEntry]]] = {}
    profiles: dict[tuple[int, int], tuple[list[int], list[list[FrEntry]]]] = {}
    calls: dict[int, dict[int, list[FrEntry]]] = {}
    known: dict[tuple[int, ...], bool] = {}  # seq ids -> numbered on without a gap
    for rank in holders:
        mine = entries.get(rank)
        if not mine:
            continue
        run = rank in gapless
        if not run and rank not in with_p2p:
            seqs = tuple(map(_SEQ, mine))
            run = known.get(seqs)
            if run is None:
                run = known[seqs] = seqs == tuple(range(seqs[0], seqs[0] + len(seqs)))
        if run:
            first = mine[0].seq
            runs[rank] = (first, mine)
            ranks, mines = profiles.setdefault((first, len(mine)), ([], []))
            ranks.append(rank)
            if not mines or mines[-1] is not mine:  # a node's ranks alike: one list, read once
                mines.append(mine)
            continue
        by_seq: dict[int, list[FrEntry]] = defaultdict(list)
        for entry in mine:
            if not entry.is_p2p:
                by_seq[entry.seq].append(entry)
        if by_seq:
            calls[rank] = by_seq
    return runs, profiles, calls


def _tops(comparable, profiles, calls) -> dict[int, int]:
    """Each comparable member's highest sequence number (0 for one that recorded none)."""
    top = dict.fromkeys(comparable, 0)
    for (first, count), (ranks, _mines) in profiles.items():
        top.update(dict.fromkeys(ranks, first + count - 1))
    for rank, by_seq in calls.items():
        top[rank] = max(by_seq)
    return top


def _met(seq, profiles, calls, size: int | None) -> bool:
    """Every member that issued `seq` ran the very same single op, completed, and the op breaks
    no law on its own: what `_meeting` finds nothing wrong with, told in C (the members'
    tuples of state and content counted) rather than compared a member at a time. False
    sends the number to the detailed comparison (as when a member recorded several ops)."""
    rows: list[tuple] = []
    entry = None
    for (first, count), (_ranks, mines) in profiles.items():
        if first <= seq < first + count:
            rows += map(_MET, map(itemgetter(seq - first), mines))
            entry = entry or mines[0][seq - first]
    for by_seq in calls.values():
        ops = by_seq.get(seq)
        if ops is not None:
            if len(ops) != 1:
                return False
            rows.append(_MET(ops[0]))
            entry = entry or ops[0]
    if entry is None:
        return False
    first = rows[0]
    met = first[0] is True and rows.count(first) == len(rows)  # == True: every one completed
    return met and agreement.lawful_alone(entry, size)


def _present(seq, recorded, runs, calls) -> dict[int, list[FrEntry]]:
    """What each member that issued `seq` ran (the ops of a coalesced group), in member order."""
    present: dict[int, list[FrEntry]] = {}
    for rank in recorded:
        run = runs.get(rank)
        if run is not None:
            first, mine = run
            if first <= seq < first + len(mine):
                present[rank] = [mine[seq - first]]
        else:
            ops = calls[rank].get(seq)
            if ops:
                present[rank] = ops
    return present


def _meeting(group, seq, present, absent, without, size, waiting, dumps) -> GroupStop | None:
    """What is wrong with one sequence number of one group, if anything."""
    if absent:
        return _missing(group, seq, present, absent, without, waiting, dumps)
    found = agreement.compare(present, size)
    if found is not None:
        return _disagreeing(group, seq, present, found, dumps)
    done = [r for r, ops in present.items() if all(map(_COMPLETED, ops))]
    if len(done) == len(present):
        return None
    if done:
        behind = tuple(sorted(set(present) - set(done)))
        text = f"{ranks_text(done)} completed it; {ranks_text(behind)} did not"
        return make_stop(group, seq, "not_completed", present, behind, text, dumps=dumps)
    if without:
        return _missing(group, seq, present, (), without, waiting, dumps)
    started = [r for r, ops in present.items() if all(map(_STARTED, ops))]
    if started and len(started) < len(present):
        late = tuple(sorted(set(present) - set(started)))
        text = f"{ranks_text(started)} started it; on {ranks_text(late)} it never started"
        return make_stop(group, seq, "not_started", present, late, text, dumps=dumps)
    text = f"every member issued it alike ({ranks_text(present)}) and none completed it"
    return make_stop(group, seq, "all_waiting", present, (), text, dumps=dumps)


def _missing(group, seq, present, absent, without, waiting, dumps) -> GroupStop:
    key = group.key
    pending = any(not e.completed for ops in present.values() for e in ops)
    elsewhere = tuple(r for r in absent if _elsewhere(r, key, waiting))
    # Ranks whose dump shows them absent are the evidence; ranks that left no dump are the
    # culprits only when nothing else explains the wait.
    culprits = tuple(r for r in absent if r not in elsewhere) if absent else tuple(without)
    wait = "waits" if len(present) == 1 else "wait"
    if not absent:
        text = f"{ranks_text(without)} left no dump; {ranks_text(present)} {wait} in it"
    elif pending:
        text = f"{ranks_text(absent)} never issued it; {ranks_text(present)} {wait} in it"
    else:
        text = f"{ranks_text(absent)} never issued it while {ranks_text(present)} did"
    if absent and without:
        text += f" ({ranks_text(without)} left no dump)"
    lines = [_absent_line(r, group, waiting) for r in absent[:3]]
    lines += [no_dump_line(without, group)] if without else []
    return make_stop(
        group,
        seq,
        "missing_ranks",
        present,
        culprits,
        text,
        dumps=dumps,
        absent=absent,
        without=without,
        elsewhere=elsewhere,
        more_lines=lines,
        pending=pending,
    )


def _disagreeing(group, seq, present, found: agreement.Disagreement, dumps) -> GroupStop:
    sides = tuple(side_of(ranks, present, found.op_index) for ranks in found.sides)
    runs = "; ".join(
        f"{ranks_text(s.ranks)} {'runs' if len(s.ranks) == 1 else 'run'} {s.signature}"
        for s in sides[:3]
    )
    inner = f"op {found.op_index + 1} of a coalesced group: " if found.op_index else ""
    why = "" if found.kind == "different_collective" else f" ({found.detail})"
    return make_stop(
        group,
        seq,
        found.kind,
        present,
        found.culprits,
        f"{inner}{runs}{why}",
        dumps=dumps,
        sides=sides,
        op_index=found.op_index,
    )


def _absent_line(rank: int, group: FrGroup, waiting: dict[int, Wait]) -> str:
    wait = waiting.get(rank)
    if wait is not None and wait.group != group.key:
        return (
            f"rank {rank}: waits in group {wait.group} #{wait.entry.seq} ({wait.entry.op}) instead"
        )
    return f"rank {rank}: its dump shows it never issued this collective of group {group.key}"


# ------------------------------------------------------------------ watchdog lines


def read_watchdog(facts: list[tuple[str, int | None, WatchdogFact]]) -> dict | None:
    """What the watchdog lines say: the stuck collective and who lags behind."""
    if not facts:
        return None
    seqs: Counter[tuple[int | None, str | None]] = Counter()
    completed: dict[int, int] = {}
    for _node, rank, fact in facts:
        if fact.seq is not None:
            seqs[(fact.seq, fact.op)] += 1
        if rank is not None and fact.last_completed is not None:
            completed[rank] = max(completed.get(rank, -1), fact.last_completed)
    stuck = None
    if seqs:
        (seq, op), count = sorted(seqs.items(), key=lambda kv: (-kv[1], kv[0][0] or 0))[0]
        ops = [o for (s, o) in seqs if s == seq and o]
        stuck = {"seq": seq, "op": op or (ops[0] if ops else None), "reports": count}
    lagging: list[int] = []
    if len(completed) > 1:
        top = max(completed.values())
        lagging = sorted(r for r, c in completed.items() if c < top)
    return {
        "stuck_collective": stuck,
        "last_completed": {str(r): c for r, c in sorted(completed.items())},
        "lagging_ranks": lagging,
    }
