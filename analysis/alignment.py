"""Flight-recorder alignment and watchdog reading: which collective did not match.

Ranks' entries are aligned by (process group, collective sequence id). Each rank keeps a ring
buffer, so only sequence ids every rank still holds are compared; the first one where a rank is
missing (A) or runs a different op or sizes (B) is the answer.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from analysis.parsers.flight_recorder import FrDump, FrEntry
from analysis.parsers.logs import WatchdogFact
from analysis.stacks import compact_ranks


def align_flight_recorder(dumps: list[FrDump]) -> dict | None:
    """The first unmatched collective across ranks' dumps, or a note that all matched."""
    per_rank = dumps_by_rank(dumps)
    return summarise_alignment(per_rank, group_mismatches(per_rank))


def summarise_alignment(per_rank: dict[int, FrDump], mismatches: list[dict]) -> dict | None:
    if not per_rank:
        return None
    first: dict | None = None
    for found in mismatches:
        if first is None or (found["seq"], found["pg"]) < (first["seq"], first["pg"]):
            first = found
    last = {
        rank: max((e.seq for e in dump.entries if e.completed), default=None)
        for rank, dump in per_rank.items()
    }
    return {
        "ranks_with_dumps": compact_ranks(sorted(per_rank)),
        "dump_count": len(per_rank),
        "first_mismatch": first,
        "last_completed_seq": _group_values(last),
    }


def dumps_by_rank(dumps: list[FrDump]) -> dict[int, FrDump]:
    per_rank: dict[int, FrDump] = {}
    for dump in sorted(dumps, key=lambda d: d.path):
        if dump.rank is not None and dump.rank not in per_rank:
            per_rank[dump.rank] = dump  # a rank may have a pickle and a JSON dump: use one
    return per_rank


def group_mismatches(per_rank: dict[int, FrDump]) -> list[dict]:
    """For each process group, its first collective that its members did not all run alike."""
    table: dict[str, dict[int, dict[int, FrEntry]]] = defaultdict(lambda: defaultdict(dict))
    config: dict[str, list[int]] = {}
    for rank, dump in per_rank.items():
        for entry in dump.entries:
            if not entry.is_p2p:
                table[entry.pg][entry.seq][rank] = entry
        for pg, members in dump.pg_ranks.items():
            config.setdefault(pg, members)
    found = []
    for pg in sorted(table):
        members = _members(pg, config, table[pg], only_group=len(table) == 1)
        holders = [r for r in members if r in per_rank]
        if not holders:
            continue
        seqs = table[pg]
        # Ring buffers forget old entries: start where every holder still has history.
        start = max(min((s for s in seqs if r in seqs[s]), default=0) for r in holders)
        for seq in sorted(s for s in seqs if s >= start):
            mismatch = _compare(pg, seq, seqs[seq], holders)
            if mismatch:
                found.append(mismatch)
                break
    return found


def _members(
    pg: str, config: dict[str, list[int]], seqs: dict[int, dict[int, FrEntry]], only_group: bool
) -> list[int]:
    if config.get(pg):
        return config[pg]
    known = [ranks for ranks in config.values() if ranks]
    if only_group and len(known) == 1:
        # gloo dumps name their only group "" in pg_config while entries say "0".
        return known[0]
    # No membership recorded (recent gloo dumps leave `ranks` empty): a rank records a
    # group's collectives only if it belongs to that group.
    return sorted({rank for entries in seqs.values() for rank in entries})


def _compare(pg: str, seq: int, entries: dict[int, FrEntry], holders: list[int]) -> dict | None:
    missing = [r for r in holders if r not in entries]
    by_signature: dict[str, list[int]] = defaultdict(list)
    for rank, entry in entries.items():
        by_signature[entry.signature].append(rank)
    if not missing and len(by_signature) == 1:
        return None
    groups = sorted(by_signature.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {
        "pg": pg,
        "seq": seq,
        "kind": "different_collective" if len(groups) > 1 else "missing_ranks",
        "missing_ranks": compact_ranks(missing),
        "missing_rank_list": sorted(missing),
        "collectives": [
            {
                "signature": signature,
                "op": entries[ranks[0]].op,
                "ranks": compact_ranks(ranks),
                "rank_list": sorted(ranks),
                "frame": entries[ranks[0]].frame,
            }
            for signature, ranks in groups
        ],
    }


def _group_values(values: dict[int, int | None]) -> list[dict]:
    grouped: dict[int | None, list[int]] = defaultdict(list)
    for rank, value in values.items():
        grouped[value].append(rank)
    return [
        {"seq": value, "ranks": compact_ranks(ranks)}
        for value, ranks in sorted(grouped.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ]


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
