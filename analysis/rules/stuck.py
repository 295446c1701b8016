"""Stuck signals: the facts that forbid "healthy" whatever the steps say.

A job can log a step a second ago and still hang: the warm-up step before the first real
collective, a rank gone while the others finish what they started, a group in which one rank
never issued its collective. "healthy" is a claim of motion *and* of nothing stuck, so the
combiner (analysis/findings.py) takes it only when this list is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from operator import itemgetter

from analysis import jobtime, quotes
from analysis.facts import Facts
from analysis.findings import Context, StuckSignal
from analysis.parsers.flight_recorder import FrEntry
from analysis.parsers.logs import parse_timestamp
from analysis.progress import HEALTHY_STEP_MULTIPLE
from analysis.verdict import ranks_text

# The combiner needs to know whether there is any; quoting a few is enough.
SIGNALS_KEPT = 32
# A collective some ranks issued and others not yet is what every moving job shows at the
# moment of a dump; it says "stuck" once it has waited this long with no step time to go by.
UNMATCHED_WITHOUT_PACE_S = 60.0


def context(facts: Facts) -> Context:
    stuck = tuple(stuck_signals(facts))
    # A watchdog that fired proves a collective sat unfinished for its whole timeout.
    timed_out = any(s.kind == "timeout" for s in stuck)
    return Context(
        stuck=stuck,
        proven_stopped=facts.progress.progressing is False or timed_out,
        moving=bool(facts.progress.progressing),
    )


def stuck_signals(facts: Facts) -> list[StuckSignal]:
    found: list[StuckSignal] = []
    for source in (_gone, _unmatched, _split, _timeouts, _stopped, _failures):
        found += source(facts)
        if len(found) >= SIGNALS_KEPT:
            break
    return found[:SIGNALS_KEPT]


def _gone(facts: Facts) -> list[StuckSignal]:
    gone = [
        StuckSignal("gone", r, facts.node_of(r), f"rank {r}: {quotes.why_lost(facts, r)}")
        for r in facts.missing[:SIGNALS_KEPT]
    ]
    return gone + [StuckSignal("gone", None, node, line) for node, line in facts.node_exits]


def _unmatched(facts: Facts) -> list[StuckSignal]:
    """The flight recorder's first unmatched collective of a group, unless it is simply in
    flight: issued a moment before the dump, or by a dump the job has since left behind."""
    stops = facts.group_stops[:SIGNALS_KEPT]
    if not stops:
        return []
    issued = _issued_at(facts, {(s.pg, s.seq) for s in stops})
    pace = facts.step_time
    latest = facts.latest_step_at
    return [
        StuckSignal("unmatched", None, None, quotes.flight_recorder(stop.mismatch).text)
        for stop in stops
        if _waited_long(facts, issued.get((stop.pg, stop.seq)), pace, latest)
    ]


def _issued_at(facts: Facts, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], datetime]:
    """(group, sequence number) -> when the first rank issued it."""
    first: dict[tuple[str, int], int] = {}
    seqs = {seq for _, seq in wanted}  # an int looked up an entry, a key built for few
    # A node's ranks alike share one entry list (analysis.fr_shared): each list's wanted
    # places are found once, and the times of the dumps that share it read there by C.
    shared: dict[int, tuple[list[FrEntry], list[list[int]]]] = {}  # id(entries) -> its times
    for dump in facts.snap.dumps:
        entries, times = dump.entries, dump.created_ns
        if len(times) != len(entries):
            continue  # no times kept (a dump edited out of step)
        found = shared.get(id(entries))
        if found is None:
            found = shared[id(entries)] = (entries, [])
        found[1].append(times)
    for entries, times in shared.values():
        for at, entry in enumerate(entries):
            if entry.seq in seqs and (key := (entry.pg, entry.seq)) in wanted:
                created = min(filter(None, map(itemgetter(at), times)), default=None)
                if created is not None:
                    first[key] = min(first.get(key, created), created)
    out = {}
    for key, ns in first.items():
        try:
            out[key] = datetime.fromtimestamp(ns / 1e9, UTC)
        except (OverflowError, OSError, ValueError):
            continue  # a time no clock gives: no age, counted as waiting
    return out


def _waited_long(
    facts: Facts, issued: datetime | None, pace: float | None, latest_step: datetime | None
) -> bool:
    now = facts.snap.collected_at
    if issued is None or now is None:
        return True  # nothing tells in flight from stuck: it counts
    limit = timedelta(seconds=HEALTHY_STEP_MULTIPLE * pace if pace else UNMATCHED_WITHOUT_PACE_S)
    if latest_step is not None and latest_step > issued + limit:
        return False  # the job logged steps well after it: an old dump
    return now - issued > limit


def _split(facts: Facts) -> list[StuckSignal]:
    if len(facts.ops) >= 2:
        ops = ", ".join(sorted(facts.ops)[:4])
        return [StuckSignal("split", None, None, f"ranks wait in different collectives: {ops}")]
    if len(facts.signatures) >= 2:
        text = f"ranks wait in {facts.main_op()} from {len(facts.signatures)} call sites"
        return [StuckSignal("split", None, None, text)]
    return []


def _timeouts(facts: Facts) -> list[StuckSignal]:
    """Watchdog, desync and DETAIL lines, unless stamped before the steps that followed
    them (a collective that once sat past its timeout on a loaded machine, then went on)."""
    if not facts.snap.watchdog and not facts.snap.logs_of_note:
        return []  # most big hangs: no such line, and no walk of every rank's steps
    latest = _latest_steps(facts)
    found = [
        StuckSignal("timeout", rank, node, fact.line)
        for node, rank, fact in facts.snap.watchdog[:SIGNALS_KEPT]
        if not _passed(fact.line, latest(rank))
    ]
    for node, log in facts.snap.logs_of_note:
        if not (log.desync or log.mismatches):
            continue  # most logs of a big job
        for fact in (*log.desync[:2], *log.mismatches[:2]):
            if not _passed(fact.line, latest(fact.rank)):
                found.append(StuckSignal("timeout", fact.rank, node, fact.line))
        if len(found) >= SIGNALS_KEPT:
            break
    return found


def _latest_steps(facts: Facts) -> Callable[[int | None], datetime | None]:
    """rank -> when its latest step was logged, else the job's latest. Asked of a few lines'
    ranks: one walk in C for the job's latest, no map of every rank."""
    ranks = facts.ranks
    job = facts.latest_step_at

    def step_at(rank: int | None) -> datetime | None:
        state = ranks.get(rank) if rank is not None else None
        at = state.last_step_at if state is not None else None
        return job if at is None else at

    return step_at


def _passed(line: str, step_at: datetime | None) -> bool:
    """Is the line stamped before a step that came after it?"""
    if step_at is None:
        return False
    stamped = parse_timestamp(line.lstrip("[")) if line[:1].isdigit() or line[:1] == "[" else None
    return stamped is not None and stamped < step_at


# What the line reader found that says stuck or gone (a checkpoint or progress line does not).
_STUCK_KINDS = frozenset(
    {"timeout", "killed", "segfault", "oom", "gpu_oom", "fatal", "exit", "ras", "desync"}
    | {"mismatch", "connection", "xid", "node_state", "evicted"}
)


def _failures(facts: Facts) -> list[StuckSignal]:
    """Signals of trouble, unless the rank's own steps went on after them (an earlier run's
    timeout in a log tail that then shows the job restarted and training again)."""
    found = []
    signals = facts.snap.signals
    states = facts.ranks
    for rank, mine in signals.signalled.items():
        moved = states[rank].last_step_at if rank in states else None
        for signal in mine.failures:
            old = moved and signal.at and signal.at < moved
            if (
                signal.kind in _STUCK_KINDS
                and not old
                and not jobtime.before_job(signal.at, facts.job_started)
            ):
                found.append(StuckSignal(signal.kind, rank, signal.node, signal.text))
                break
        if len(found) >= SIGNALS_KEPT:
            return found
    alive = _every_rank_alive(facts) if signals.by_node else {}
    for node, mine in signals.by_node.items():
        found += [
            StuckSignal(s.kind, None, node, s.text)
            for s in mine[:8]
            if s.kind in _STUCK_KINDS
            and not jobtime.before_job(s.at, facts.job_started)
            and not _someone_elses(facts, node, s, alive)
        ][:2]
    return found


def _every_rank_alive(facts: Facts) -> dict[str, bool]:
    """node -> is every rank on it alive (its process seen); nodes without a rank absent. Read
    once: a node signal each would be a walk of every rank each."""
    alive: dict[str, bool] = {}
    for state in facts.ranks.values():
        alive[state.node] = alive.get(state.node, True) and state.process_seen
    return alive


def _someone_elses(facts: Facts, node: str, signal, alive: dict[str, bool]) -> bool:
    """A kernel kill of a process that is none of the node's ranks, every one of which is
    alive: another job's (machines are shared), or a helper's. No rank is gone."""
    facts_of_node = facts.nodes.get(node)
    if signal.pid is None or facts_of_node is None or signal.pid in facts_of_node.rank_pids:
        return False
    return alive.get(node, False)


def _stopped(facts: Facts) -> list[StuckSignal]:
    """A process stopped (T: SIGSTOP, a debugger) cannot attend any collective."""
    stopped = sorted(r for r, state in facts.held.items() if state == "T")
    if not stopped:
        return []
    text = f"{ranks_text(stopped)} stopped (ps state T)"
    return [StuckSignal("stopped", r, facts.rank_node.get(r), text) for r in stopped[:8]]
